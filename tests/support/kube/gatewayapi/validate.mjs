// Validate one Gateway API object (JSON on stdin) with the validators that
// @kubernetes-models/gateway-api generates from the Gateway API's own types, and print
// every error as JSON (an empty list when it is valid). Argument: the node_modules
// directory the package was installed in (install.sh). Used by tests/support/kube/gateways.py.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules] = process.argv.slice(2);
const obj = JSON.parse(readFileSync(0, "utf8"));
const [group, version] = String(obj.apiVersion ?? "").split("/");
const kind = String(obj.kind ?? "");
const prefix = { "gateway.networking.k8s.io": "IoK8sSigsGatewayApiApis" }[group];
if (!prefix || !version || !/^[A-Za-z]+$/.test(kind)) {
  process.stdout.write(JSON.stringify({ missing: `no schema for ${kind} ${obj.apiVersion}` }));
  process.exit(0);
}
const name = `${prefix}${version[0].toUpperCase()}${version.slice(1)}${kind}.js`;
const file = join(modules, "@kubernetes-models", "gateway-api", "_schemas", name);
let validate;
try {
  ({ validate } = await import(pathToFileURL(file).href));
} catch (error) {
  process.stdout.write(JSON.stringify({ missing: `no schema for ${kind} ${obj.apiVersion}: ${error.code ?? error}` }));
  process.exit(0);
}
validate(obj);
process.stdout.write(JSON.stringify({ errors: validate.errors ?? [] }));
