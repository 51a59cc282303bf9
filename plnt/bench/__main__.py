"""`python -m plnt.bench COMMAND [flags]`: one benchmark, its ratios.

    python -m plnt.bench apiserver --quick
    python -m plnt.bench saga --deploys 5 --duration 2
    python -m plnt.bench deploys --kubeconfig K --ref R --digest D --target kubernetes
    python -m plnt.bench invocations --duration 10 --rss-objects 2000
    python -m plnt.bench proxy --concurrency 16 --duration 5
    python -m plnt.bench shadow --shadow-percents 0,50,100 --duration 5
    python -m plnt.bench harness --rate 2000 --duration 5
    python -m plnt.bench model --requests 6 --tokens 16
    python -m plnt.bench agents --invocations 30
    python -m plnt.bench overload --multipliers 4,10 --duration 5

COMMAND is agents, apiserver, saga, deploys, invocations, proxy, shadow, harness, model or
overload. Each subcommand's flags are its own (`python -m plnt.bench saga --help`); this
module only picks the command, so neither pays for the other's imports.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

USAGE = (
    "usage: python -m plnt.bench"
    " {agents,apiserver,saga,deploys,invocations,proxy,shadow,harness,model,overload}"
    " [flags]"
    "  (--help after one for its flags)"
)


def _agents(argv: Sequence[str]) -> int:
    from plnt.bench import agents

    return agents.main(argv)


def _apiserver(argv: Sequence[str]) -> int:
    from plnt.bench import apiserver_command

    return apiserver_command.main(argv)


def _deploys(argv: Sequence[str]) -> int:
    from plnt.bench import deploys_command

    return deploys_command.main(argv)


def _harness(argv: Sequence[str]) -> int:
    from plnt.bench import harness_ceiling

    return harness_ceiling.main(argv)


def _invocations(argv: Sequence[str]) -> int:
    from plnt.bench import invocations_command

    return invocations_command.main(argv)


def _model(argv: Sequence[str]) -> int:
    from plnt.bench import model

    return model.main(argv)


def _overload(argv: Sequence[str]) -> int:
    from plnt.bench import overload

    return overload.main(argv)


def _proxy(argv: Sequence[str]) -> int:
    from plnt.bench import proxy

    return proxy.main(argv)


def _shadow(argv: Sequence[str]) -> int:
    from plnt.bench import shadow

    return shadow.main(argv)


def _saga(argv: Sequence[str]) -> int:
    from plnt.bench import saga_command

    return saga_command.main(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "agents": _agents,
    "apiserver": _apiserver,
    "saga": _saga,
    "deploys": _deploys,
    "invocations": _invocations,
    "proxy": _proxy,
    "shadow": _shadow,
    "harness": _harness,
    "model": _model,
    "overload": _overload,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(USAGE, file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
