"""`plnt bench NAME` (and `kubectl plnt bench NAME`): start a bench, follow it, print it.

The bench runs on the server (`POST …/workflowruns/NAME/bench`, a durable workflow), so
this command only starts it and follows `GET …/bench`: on a terminal a live progress bar
per revision with the running p50/p99 and error count, then a table of the results
(`--json`: the Bench as JSON instead). `--wait=false` prints the bench's id and returns
at once; Ctrl-C stops following, not the bench. `--compare 1,2` measures two revisions
side by side in the same window. The calls bypass the runners' step cache unless
`--cache use` says to measure the cache (a few inputs sent again and again would otherwise
measure the cache, not the model); the table's CACHE HITS column says `bypassed`.

Exit codes (`exits`): 0 when the bench succeeded; 1 when it failed (its message on
stderr); the API's errors as usual (404 → 3, 409 a bench already running or no ready
revision → 4, 422 a limit out of range → 6); 2 for bad options.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import IO, Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from plnt.api import benchattainment, names
from plnt.api.headers import CacheMode
from plnt.cli import connecting, exits, printing
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient

POLL_SECONDS = 0.5
DONE = ("Succeeded", "Failed")


CacheChoice = CacheMode
"""`--cache`: the values of a Bench's `spec.cache` (`plnt.api.bench.BenchCache`), which are
a call's `CacheMode` (`plnt.api.headers`), so the CLI offers that enum's values."""

_CACHE_WORDS = {CacheMode.BYPASS: ", step cache bypassed", CacheMode.USE: ", step cache used"}


class BenchInputError(exits.UsageError):
    """`--filename` cannot be read, or is not a JSON/YAML object or list of objects."""


def register(app: typer.Typer) -> None:
    """Add `bench` to `app`."""
    app.command(
        "bench",
        epilog=(
            "Examples: plnt bench summarize --duration 30 --rate 200;"
            " plnt bench summarize --concurrency 16 --compare 1,2 --json;"
            " plnt bench summarize --wait=false"
        ),
    )(bench)


def _truth(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    exits.fail(f"--wait takes true or false, not {value!r}", exits.Code.USAGE)


def read_inputs(filename: Path) -> Any:
    """The inputs of `-f FILE` ('-': stdin): a JSON or YAML object, or a list of objects."""
    try:
        text = sys.stdin.read() if str(filename) == "-" else filename.read_text("utf-8")
        loaded = yaml.safe_load(text)
    except OSError as error:
        raise BenchInputError(f"{filename}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        raise BenchInputError(f"{filename}: not valid JSON or YAML: {error}") from error
    items = loaded if isinstance(loaded, list) else [loaded]
    if not items or not all(isinstance(item, dict) for item in items):
        raise BenchInputError(f"{filename}: inputs must be an object or a list of objects")
    return loaded


def bench(
    name: Annotated[str, typer.Argument(help="The WorkflowRun to bench.")],
    duration: Annotated[
        float, typer.Option("--duration", help="Seconds of the measured phase (at most 3600).")
    ] = 10.0,
    warmup: Annotated[
        float, typer.Option("--warmup", help="Seconds of load before it, not recorded.")
    ] = 0.0,
    rate: Annotated[
        float | None,
        typer.Option("--rate", help="Open loop: requests per second (not with --concurrency)."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", help="Closed loop: requests in flight (default 8)."),
    ] = None,
    filename: Annotated[
        Path | None,
        typer.Option(
            "--filename",
            "-f",
            help="Inputs: a JSON/YAML object or a list cycled in order ('-': stdin)."
            " Default: the run's smoke inputs.",
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option("--revision", help="stable (default), canary, or a revision number."),
    ] = None,
    compare: Annotated[
        str | None,
        typer.Option("--compare", help="Two revisions side by side, e.g. 1,2 or stable,canary."),
    ] = None,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Per-request timeout of the load, seconds.")
    ] = 30.0,
    stream: Annotated[
        bool,
        typer.Option(
            "--stream", help="Stream each invocation: adds time to first token and tokens/s."
        ),
    ] = False,
    cache: Annotated[
        CacheChoice,
        typer.Option(
            "--cache",
            help="bypass (default): measure the model, never the runners' step cache;"
            " use: let the cache answer what it holds, to measure the cache.",
        ),
    ] = CacheChoice.BYPASS,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the Bench as JSON instead of a table.")
    ] = False,
    wait: Annotated[
        str,
        typer.Option(
            "--wait", help="--wait=false: print the bench's id and return without following."
        ),
    ] = "true",
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Load-test a WorkflowRun's revision(s) on the server and print the results."""
    follow = _truth(wait)
    spec: dict[str, Any] = {"durationSeconds": duration, "warmupSeconds": warmup}
    spec["timeoutSeconds"] = request_timeout
    spec["cache"] = cache.value
    if stream:
        spec["stream"] = True
    for key, value in (("rate", rate), ("concurrency", concurrency), ("revision", revision)):
        if value is not None:
            spec[key] = value
    if compare is not None:
        spec["compare"] = [part.strip() for part in compare.split(",")]
    if filename is not None:
        with exits.reported():
            spec["inputs"] = read_inputs(filename)
    body = {"apiVersion": names.API_VERSION, "kind": names.BENCH_KIND, "spec": spec}
    console = output_console()
    live = follow and not as_json and console.is_terminal

    async def action(
        client: PlntClient,
    ) -> tuple[dict[str, Any], list[benchattainment.Objective]]:
        """The bench (started, or followed to its end) and, to print attainment beside
        its percentiles, the run's objectives."""
        path = client.object_path(names.WORKFLOWRUNS, name, subresource="bench")
        started: dict[str, Any] = (await client.request("POST", path, json=body)).json()
        if not follow:
            return started, []
        bench_id = started["metadata"]["name"]
        if not as_json:
            console.print(f"bench {bench_id} of {printing.GROUP_RESOURCE}/{name} started")
        followed = await _follow(client, path, name, bench_id, console if live else None)
        if as_json:
            return followed, []
        run = await client.get_workflowrun(name)
        return followed, benchattainment.objectives((run.get("spec") or {}).get("slo"))

    target = connecting.Target(kubeconfig, context, namespace)
    result, objectives = connecting.call(target, action)
    if not follow:
        typer.echo(json.dumps(result, indent=2) if as_json else result["metadata"]["name"])
        return
    status = result.get("status") or {}
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print_results(console, result, objectives)
    if status.get("phase") != "Succeeded":
        exits.fail(str(status.get("message") or "the bench failed"), exits.Code.FAILED)


async def _follow(
    client: PlntClient, path: str, name: str, bench_id: str, console: Console | None
) -> dict[str, Any]:
    """Poll the bench until it is done; with `console`, draw a progress bar per revision."""
    display = _Display(console) if console is not None else None
    try:
        while True:
            current: dict[str, Any] = (await client.request("GET", path)).json()
            if current.get("metadata", {}).get("name") != bench_id:
                found = await _recorded(client, name, bench_id)
                if found is not None:
                    return found
            else:
                if display is not None:
                    display.update(current)
                if (current.get("status") or {}).get("phase") in DONE:
                    return current
            await asyncio.sleep(POLL_SECONDS)
    finally:
        if display is not None:
            display.stop()


async def _recorded(client: PlntClient, name: str, bench_id: str) -> dict[str, Any] | None:
    """Our bench from the run's `status.benchHistory` (a newer bench has started since)."""
    from plnt.api import bench as benches  # pydantic: loaded when used, not at start-up

    run = await client.get_workflowrun(name)
    for record in (run.get("status") or {}).get("benchHistory") or []:
        if record.get("id") == bench_id:
            return benches.from_record(record, namespace=run["metadata"]["namespace"])
    return None


class _Display:
    """A rich progress bar per revision: elapsed of the measured phase, p50, p99, errors."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description:>12}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}
        self.started = time.monotonic()
        self.progress.start()

    def update(self, bench: dict[str, Any]) -> None:
        spec, status = bench.get("spec") or {}, bench.get("status") or {}
        total = float(spec.get("durationSeconds") or 1.0)
        by_label = {p.get("label"): p for p in status.get("progress") or []}
        for target in status.get("targets") or []:
            label = str(target.get("label"))
            task = self.tasks.get(label)
            if task is None:
                description = _target_name(target)
                task = self.progress.add_task(description, total=total, detail="warming up")
                self.tasks[label] = task
            seen = by_label.get(label)
            if seen is None:
                phase = status.get("phase") or "Pending"
                detail = status.get("message") or phase.lower()
                self.progress.update(task, detail=str(detail))
                continue
            detail = (
                f"{int(seen.get('requests') or 0)} req  p50 {_ms(seen.get('p50Ms'))}"
                f"  p99 {_ms(seen.get('p99Ms'))}  errors {int(seen.get('errors') or 0)}"
            )
            elapsed = min(float(seen.get("elapsedSeconds") or 0.0), total)
            self.progress.update(task, completed=elapsed, detail=detail)
        if status.get("phase") in DONE:
            for task in self.tasks.values():
                self.progress.update(task, completed=total)

    def stop(self) -> None:
        self.progress.stop()


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    number = float(value)
    return f"{number:.2f} ms" if number < 10 else f"{number:.1f} ms"


def _target_name(target: dict[str, Any]) -> str:
    label, revision = str(target.get("label")), target.get("revision")
    return f"revision {revision}" if label == str(revision) else f"{label} (r{revision})"


def _rate(result: dict[str, Any]) -> str:
    achieved = float(result.get("achievedRate") or 0.0)
    requested = result.get("requestedRate")
    if requested is None:
        return f"{achieved:.1f}"
    return f"{achieved:.1f} / {float(requested):.1f}"


def _percent(value: Any, reason: Any = None) -> str:
    if value is None:
        return "n/a" if reason else "-"
    return f"{100 * float(value):.1f}%"


def _cache_cell(target: dict[str, Any], result: dict[str, Any]) -> str:
    """The step cache's share of answers, or `bypassed` when the bench asked not to use it."""
    rate = _percent(result.get("cacheHitRate"), result.get("cacheReason"))
    if target.get("cache") == CacheChoice.BYPASS:
        return "bypassed" if result.get("cacheHitRate") is None else f"{rate} (bypassed)"
    return rate


def _per_call(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.1f}"


def _marked(value: Any, objective: benchattainment.Objective | None) -> str:
    """A percentile, with ✓ when it is within the objective's threshold (that share of the
    calls attained it) and ✗ when it is not."""
    within = benchattainment.within(value, objective) if objective is not None else None
    return _ms(value) if within is None else f"{_ms(value)} {'✓' if within else '✗'}"


def _objective(
    objectives: list[benchattainment.Objective], name: str
) -> benchattainment.Objective | None:
    return next((o for o in objectives if o.name == name), None)


def results_table(
    bench: dict[str, Any], objectives: list[benchattainment.Objective] | None = None
) -> Table:
    """One row per revision: throughput, latency percentiles, errors, cache, GPU; time
    to first token and tokens per second when the bench streamed (`--stream`); a tool
    loop's turns and tool calls per call when the workflow has one. With the run's
    objectives, each percentile of an objective's measure is marked ✓ or ✗ beside it:
    whether that share of the calls met the objective's threshold."""
    latency_objective = _objective(objectives or [], "latency")
    first_token_objective = _objective(objectives or [], "timeToFirstToken")
    status = bench.get("status") or {}
    results = status.get("results") or []
    streamed = any(r.get("timeToFirstToken") or r.get("tokensPerSecond") for r in results)
    agents = any(r.get("agent") for r in results)
    table = Table(title=f"bench {bench.get('metadata', {}).get('name', '')}", title_justify="left")
    headers = [
        "REVISION",
        "REQUESTS",
        "REQ/S (GOT / ASKED)",
        "P50",
        "P90",
        "P95",
        "P99",
        "MAX",
        "ERRORS",
        "CACHE HITS",
        "GPU",
    ]
    if streamed:
        headers[8:8] = ["TTFT P50", "TOK/S"]
    if agents:
        headers[3:3] = ["TURNS/CALL", "TOOL CALLS/CALL"]
    for header in headers:
        justify = "left" if header == "REVISION" else "right"
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for target, result in zip(status.get("targets") or [], results, strict=False):
        latency = result.get("latency") or {}
        errors = result.get("errors") or {}
        error_count = sum(int(n) for n in errors.values())
        cells = [
            _target_name(target),
            str(result.get("requests", 0)),
            _rate(result),
            _marked(latency.get("p50Ms"), latency_objective),
            _marked(latency.get("p90Ms"), latency_objective),
            _marked(latency.get("p95Ms"), latency_objective),
            _marked(latency.get("p99Ms"), latency_objective),
            _marked(latency.get("maxMs"), latency_objective),
            f"{error_count} ({_percent(result.get('errorRate'))})",
            _cache_cell(target, result),
            _percent(result.get("gpuUtilization"), result.get("gpuReason")),
        ]
        if streamed:
            first_token = result.get("timeToFirstToken") or {}
            rate = result.get("tokensPerSecond")
            cells[8:8] = [
                _marked(first_token.get("p50Ms"), first_token_objective),
                "-" if rate is None else f"{rate:.1f}",
            ]
        if agents:
            agent = result.get("agent") or {}
            cells[3:3] = [
                _per_call(agent.get("turnsPerCall")),
                _per_call(agent.get("toolCallsPerCall")),
            ]
        table.add_row(*cells)
    return table


UNCUT_WIDTH = 1_000
"""Columns given to output that is not a terminal: wide enough that no table is cut."""


def output_console(file: IO[str] | None = None) -> Console:
    """The console results go to: a terminal's width, or every column whole otherwise.

    rich lays a table out in 80 columns when the output is not a terminal, cutting
    headers and cells (`REV…`); a pipe or a file gets every column whole, as kubectl's
    output does. A table takes its natural width, so nothing is padded to this one.
    """
    console = Console(file=file, highlight=False, soft_wrap=True)
    if console.is_terminal:
        return console
    return Console(file=file, highlight=False, soft_wrap=True, width=UNCUT_WIDTH)


def attainment_lines(
    bench: dict[str, Any], objectives: list[benchattainment.Objective]
) -> list[str]:
    """Per objective, each revision's share of calls within it and whether it was met:
    `SLO latency ≤ 150 ms at p95: revision 2 90-95% MISSED; revision 1 100% met`."""
    status = bench.get("status") or {}
    pairs = list(zip(status.get("targets") or [], status.get("results") or [], strict=False))
    lines: list[str] = []
    for objective in objectives:
        parts = []
        for target, result in pairs:
            found = benchattainment.attainment(result, objective)
            if found is None:
                parts.append(f"{_target_name(target)} not measured")
                continue
            parts.append(
                f"{_target_name(target)} {found.share()} {'met' if found.met else 'MISSED'}"
            )
        if parts:
            threshold = f"{objective.milliseconds:g} ms at p{objective.percentile:g}"
            lines.append(f"SLO {objective.name} ≤ {threshold}: " + "; ".join(parts))
    return lines


def _print_results(
    console: Console,
    bench: dict[str, Any],
    objectives: list[benchattainment.Objective] | None = None,
) -> None:
    status = bench.get("status") or {}
    if status.get("results"):
        console.print(results_table(bench, objectives))
        for line in attainment_lines(bench, objectives or []):
            console.print(line)
        measured = [
            f"{_target_name(t)}: {t.get('url')} ({t.get('path')}, 1 of {t.get('replicas')}"
            f" ready replicas{_CACHE_WORDS.get(t.get('cache'), '')})"
            for t in status.get("targets") or []
            if t.get("url")
        ]
        for line in measured:
            console.print(f"measured {line}")
    if status.get("phase") == "Succeeded" and status.get("message"):
        console.print(str(status["message"]))
