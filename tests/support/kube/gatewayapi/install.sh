#!/usr/bin/env bash
# Install the Gateway API's schemas (the npm package @kubernetes-models/gateway-api, pinned by
# package-lock.json beside this script) into build/gateway-api, where the kube-apiserver
# stand-in finds them (tests/support/kube/gateways.py). Nothing of the package is committed.
# A second run with the same lock file does nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
into="${PLNT_GATEWAY_API_DIR:-$root/build/gateway-api}"
mkdir -p "$into"
if cmp -s "$here/package-lock.json" "$into/package-lock.json" && [ -d "$into/node_modules/@kubernetes-models/gateway-api" ]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$into/"
npm ci --prefix "$into" --no-audit --no-fund --loglevel=error --engine-strict=false >/dev/null
