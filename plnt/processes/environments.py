"""The environment of every child plnt starts: built from an allow-list, never inherited whole.

Why an allow-list: the programs plnt starts read settings from environment variables, and
the shell that started plnt holds variables meant for something else. llama-cpp-python's
server takes every one of its settings from the environment (`PORT`, `HOST`, `MODEL`,
`N_CTX`, `API_KEY`, … pydantic settings, read even for fields its command line leaves
out); etcd reads a flag from every `ETCD_*`; the `temporal` CLI reads `TEMPORAL_*`; Python
reads `PYTHON*`. `make up PORT=16443` exports `PORT` into the recipe, and the model server
bound the API server's port instead of the one plnt picked. A deny-list would have to
know every variable of every child and of every library they load, in every version to
come; an allow-list names the few a process needs to run at all, and plnt passes every
setting it relies on, on the command line (ports, addresses, data directories, files).

What a child gets (`child`), taken from plnt's own environment when set:

* what any program needs to run: `PATH`, `HOME`, `USER`, `LOGNAME`, `LANG`, `LC_*`, `TZ`,
  `TMPDIR`, and where the system's CA certificates are (`SSL_CERT_FILE`, `SSL_CERT_DIR`);
* plnt's own `PLNT_*` variables (no child's program reads that prefix but plnt's);
* with `python=True`, `PYTHONPATH`: a Python child runs plnt's own modules and must find
  them where its parent did (an installed plnt needs none; one run from a source tree may);
* whatever the caller names (`names`) or sets (`values`) for that one child.

The children and what each adds: etcd, the Temporal dev server, the model server and the
fork server nothing (every setting is a flag; the last two are Python children); the API
server's sibling API processes are plnt itself, so they add what plnt reads as its own
settings (`replica`: the kubeconfig and in-cluster variables, botocore's `AWS_*` chain for
catalog sources, the proxy variables of registry pulls); a runner adds the one variable its
backend config names as `apiKeyEnv` (`runner`), read from the file its command line
names, so a key a user exported for a backend still reaches the runner that was told to
read it, and no other variable does. A runner forked by the fork server is given the same
environment (`plnt.runner.forkserver` replaces its own with the one in the request), and
the fork server itself never holds the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

BASE = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""Variables any program needs to run, passed as they are."""
BASE_PREFIXES = ("LC_", "PLNT_")
"""Families passed whole: the locale's categories, and plnt's own settings."""
PYTHON = ("PYTHONPATH",)
"""What a Python child of plnt needs to import plnt as its parent did."""
PLNT_READS = (
    "KUBECONFIG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    *(f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "NO", "ALL")),
    *(f"{scheme}_proxy" for scheme in ("http", "https", "no", "all")),
)
"""What plnt's own process reads besides `PLNT_*` (kubeconfig and in-cluster config as
kubectl reads them, proxies for registry pulls), and so a copy of it must be given."""
PLNT_READS_PREFIXES = ("AWS_",)
"""botocore's credential and endpoint chain, which the catalog's S3 sources use."""
BACKEND_CONFIG_FLAG = "--backend-config"
"""The runner's flag naming its backend config file (`plnt.runner`'s command line)."""


def child(
    *,
    python: bool = False,
    names: Iterable[str] = (),
    prefixes: Iterable[str] = (),
    values: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one child: the allow-list's variables that are set in `environ`
    (this process's environment by default), the variables `names` and the families
    `prefixes` too, then `values` over them."""
    source = os.environ if environ is None else environ
    wanted = {*BASE, *(PYTHON if python else ()), *names}
    families = (*BASE_PREFIXES, *prefixes)
    built = {
        name: value for name, value in source.items() if name in wanted or name.startswith(families)
    }
    built.update(values or {})
    return built


def replica(
    *, values: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a process that is plnt itself (a sibling API process, the fork
    server): what plnt reads as its settings, and nothing else."""
    return child(
        python=True,
        names=PLNT_READS,
        prefixes=PLNT_READS_PREFIXES,
        values=values,
        environ=environ,
    )


def runner(argv: Sequence[str], *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the runner `argv` would start: a Python child's, unbuffered, with
    the variable its backend config names as `apiKeyEnv` (see the module doc)."""
    key = api_key_variable(argv)
    return child(
        python=True,
        names=() if key is None else (key,),
        values={"PYTHONUNBUFFERED": "1"},
        environ=environ,
    )


def api_key_variable(argv: Sequence[str]) -> str | None:
    """The `apiKeyEnv` of the backend config file `argv` names after `--backend-config`
    (JSON or YAML), or None: no such flag, no such key, or a file that cannot be read (the
    runner reports that itself when it starts)."""
    arguments = list(argv)
    path: str | None = None
    for index, argument in enumerate(arguments):
        if argument == BACKEND_CONFIG_FLAG and index + 1 < len(arguments):
            path = arguments[index + 1]
        elif argument.startswith(BACKEND_CONFIG_FLAG + "="):
            path = argument.partition("=")[2]
    if path is None:
        return None
    try:
        document = yaml.safe_load(Path(path).read_bytes())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(document, dict):
        return None
    name = document.get("apiKeyEnv", document.get("api_key_env"))
    return name if isinstance(name, str) and name else None
