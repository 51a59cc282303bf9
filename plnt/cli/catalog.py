"""`plnt catalog`: the workflow catalog (the Workflows the server found in its sources).

`plnt catalog` lists them as a table; `plnt catalog NAME` shows one (versions with their
digests, inputs, steps, backends, and what could not be read); `--manifest` prints the
WorkflowRun that deploys a version, pinned to its digest, ready for `kubectl apply -f -`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer
import yaml

from plnt.api import workflows
from plnt.cli import catalog_reports, connecting, printing
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient


def register(app: typer.Typer) -> None:
    """Add `catalog` to `app`."""
    app.command(
        "catalog",
        epilog="Examples: plnt catalog; plnt catalog summarize; "
        "plnt catalog summarize --manifest | kubectl apply -f -",
    )(catalog)


def catalog(
    name: Annotated[str | None, typer.Argument(help="One Workflow to show in full.")] = None,
    manifest: Annotated[
        bool,
        typer.Option("--manifest", help="Print the WorkflowRun that deploys it (with NAME)."),
    ] = False,
    version: Annotated[
        str | None,
        typer.Option("--version", help="With --manifest: this version or tag (default: latest)."),
    ] = None,
    output: Annotated[
        Literal["table", "json", "yaml"] | None,
        typer.Option("--output", "-o", help="json or yaml: the objects as the API serves them."),
    ] = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Every namespace's catalog.")
    ] = False,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """The workflows the server's catalog lists, with versions and digests."""
    target = connecting.Target(kubeconfig, context, namespace)
    if name is None:
        if manifest:
            raise typer.BadParameter("--manifest needs a Workflow's NAME")

        async def listing(client: PlntClient) -> list[dict[str, Any]]:
            return await client.list_workflows(all_namespaces=all_namespaces)

        def render_list(items: list[dict[str, Any]]) -> str:
            if output in ("json", "yaml"):
                return printing.document(printing.as_list(items), output)
            return catalog_reports.list_text(items, with_namespace=all_namespaces)

        connecting.show(target, listing, render_list)
        return

    async def one(client: PlntClient) -> dict[str, Any]:
        return await client.get_workflow(name)

    def render_one(obj: dict[str, Any]) -> str:
        if manifest:
            try:
                run = workflows.run_manifest(obj, version=version)
            except ValueError as error:
                raise typer.BadParameter(str(error)) from error
            if output == "json":
                return printing.document(run, "json")
            return yaml.safe_dump(run, sort_keys=False).rstrip("\n")
        if output in ("json", "yaml"):
            return printing.document(obj, output)
        return catalog_reports.workflow_text(obj)

    connecting.show(target, one, render_one)
