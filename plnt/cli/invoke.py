"""`plnt invoke NAME`: run a deployed workflow once and print its output.

Parsing and printing only; `invocations` reads the inputs and the stream. The call is
`PlntClient.invoke`'s: through the run's `proxy` subresource, which kube-apiserver does
not cut at its request timeout, so a workflow may run as long as `--request-timeout`. `-v` adds,
on stderr, the revision that answered, the cache result and each Server-Timing hop.
`--stream` prints, on stderr, one line per step as it finishes (`✓ pros  100.8 ms  cache
miss`), then the output on stdout as without it, so `| jq` still sees only the output. A
stream that ends with an error line exits 1 with the runner's message. `--async` creates a
durable Invocation instead (docs/invoking.md) and prints its name at once; `plnt
invocation wait NAME` prints its output when it has finished.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from plnt.api.headers import CacheMode
from plnt.cli import connecting, exits, invoking
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import InvokeResult, PlntClient
from plnt.client import invocations as client_invocations


def register(app: typer.Typer) -> None:
    """Add `invoke` to `app`."""
    app.command(
        "invoke",
        epilog=(
            "Examples: plnt invoke summarize -f input.json -v; "
            "plnt invoke chat --input question='What is etcd?'"
        ),
    )(invoke)


def invoke(
    name: Annotated[str, typer.Argument(help="The WorkflowRun to invoke.")],
    filename: Annotated[
        Path | None,
        typer.Option("--filename", "-f", help="JSON object of inputs ('-' for stdin)."),
    ] = None,
    input_pairs: Annotated[
        list[str] | None,
        typer.Option("--input", help="An input as key=value (JSON values allowed); repeatable."),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show revision, cache, timing and usage on stderr."),
    ] = False,
    stream: Annotated[
        bool, typer.Option("--stream", help="Show each step as it finishes (on stderr).")
    ] = False,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Seconds to wait for the answer.")
    ] = 300.0,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Run every step: the runners' step cache neither answers nor keeps this call.",
        ),
    ] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--async",
            help="Create a durable Invocation and print its name (plnt invocation wait NAME).",
        ),
    ] = False,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Invoke the workflow once on its promoted revision and print the output."""
    with exits.reported():
        inputs = invoking.read_inputs(filename, input_pairs or [])
    if detach:

        async def create(client: PlntClient) -> dict[str, Any]:
            body = client_invocations.manifest(name, inputs)
            return await client_invocations.create(client, body)

        target = connecting.Target(kubeconfig, context, namespace)
        typer.echo(connecting.call(target, create)["metadata"]["name"])
        return

    cache = CacheMode.BYPASS if no_cache else CacheMode.USE

    async def action(client: PlntClient) -> InvokeResult | str:
        if stream:
            return await invoking.streamed(
                client, name, inputs, request_timeout=request_timeout, cache=cache
            )
        return await client.invoke(name, inputs, request_timeout=request_timeout, cache=cache)

    result = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    if isinstance(result, str):
        exits.fail(result, exits.Code.FAILED)
    if verbose:
        typer.echo(invoking.details_text(result), err=True)
    output = result.output
    typer.echo(output if isinstance(output, str) else json.dumps(output, indent=2))
