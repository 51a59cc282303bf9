"""Entry points: `plnt` and `kubectl-plnt`.

Each command lives in its own module exposing `register(app)`; this module only
assembles them, so adding a command never touches another command's code.
"""

from __future__ import annotations

import typer

from plnt.cli import (
    catalog,
    deploying,
    inspecting,
    invocation_objects,
    invoke,
    operations,
    push,
    run_runner,
    runs,
    serve,
    tokens,
    ui,
    up,
    worker,
)

app = typer.Typer(
    no_args_is_help=True, add_completion=True, help="plnt: AI workflows on Kubernetes."
)
for module in (
    up,
    serve,
    push,
    run_runner,
    worker,
    runs,
    deploying,
    inspecting,
    invoke,
    invocation_objects,
    catalog,
    operations,
    tokens,
    ui,
):
    module.register(app)


def main() -> None:
    """Run the `plnt` CLI."""
    app()


def kubectl_plugin_main() -> None:
    """Run as `kubectl plnt ...` (kubectl finds `kubectl-plnt` on PATH)."""
    app(prog_name="kubectl plnt")
