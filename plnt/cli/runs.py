"""`plnt list` and `plnt get NAME`: WorkflowRuns as kubectl shows them, or as JSON/YAML.

The table is the server's own Table rendering (the columns `kubectl get` prints),
so both tools always agree.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from plnt.cli import connecting, printing
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient, clients

Output = Annotated[
    str,
    typer.Option("--output", "-o", help="table, wide, json, yaml or name.", show_default="table"),
]
FORMATS = ("table", "wide", "json", "yaml", "name")


def register(app: typer.Typer) -> None:
    """Add `list` and `get` to `app`."""
    app.command(
        "list",
        epilog="Example: plnt list -n team-a -o wide; plnt list -A",
    )(list_runs)
    app.command("get", epilog="Example: plnt get summarize -o yaml")(get_run)


def _check_output(output: str) -> None:
    if output not in FORMATS:
        raise typer.BadParameter(f"must be one of {', '.join(FORMATS)}", param_hint="-o")


def list_runs(
    output: Output = "table",
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="List across every namespace.")
    ] = False,
    selector: Annotated[
        str | None, typer.Option("--selector", "-l", help="Label selector, e.g. app=summarize.")
    ] = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """List WorkflowRuns (NAME, WORKFLOW, BACKEND, REPLICAS, PHASE, REVISION, AGE)."""
    _check_output(output)
    target = connecting.Target(kubeconfig, context, namespace)

    async def action(client: PlntClient) -> tuple[str, Any]:
        if output in ("table", "wide"):
            params = {"labelSelector": selector} if selector else None
            path = client.collection_path(clients.WORKFLOWRUNS, all_namespaces=all_namespaces)
            return client.namespace, await client.table(path, params=params)
        items = await client.list_workflowruns(
            all_namespaces=all_namespaces, label_selector=selector
        )
        return client.namespace, items

    ns, result = connecting.call(target, action)
    if output in ("table", "wide"):
        if not result.get("rows"):
            where = "" if all_namespaces else f" in {ns} namespace"
            typer.echo(f"No resources found{where}.", err=True)
            return
        text = printing.table_text(result, wide=output == "wide", with_namespace=all_namespaces)
        typer.echo(text)
    elif output == "name":
        for item in result:
            typer.echo(f"{printing.GROUP_RESOURCE}/{item['metadata']['name']}")
    else:
        typer.echo(printing.document(printing.as_list(result), output))  # type: ignore[arg-type]


def get_run(
    name: Annotated[str, typer.Argument(help="The WorkflowRun's name.")],
    output: Output = "table",
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Show one WorkflowRun as a table row, or in full with -o json|yaml."""
    _check_output(output)
    target = connecting.Target(kubeconfig, context, namespace)

    async def action(client: PlntClient) -> Any:
        if output in ("table", "wide"):
            return await client.table(client.object_path(clients.WORKFLOWRUNS, name))
        return await client.get_workflowrun(name)

    result = connecting.call(target, action)
    if output in ("table", "wide"):
        typer.echo(printing.table_text(result, wide=output == "wide"))
    elif output == "name":
        typer.echo(f"{printing.GROUP_RESOURCE}/{result['metadata']['name']}")
    else:
        typer.echo(printing.document(result, output))  # type: ignore[arg-type]
