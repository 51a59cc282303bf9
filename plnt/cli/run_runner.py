"""`plnt runner`: serve one workflow spec with the runner service (same options as
`python -m plnt.runner`). Parsing only; the runner package does the work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plnt.cli import exits


def runner(
    spec: Annotated[Path, typer.Option(help="Workflow spec file.")],
    backend_config: Annotated[
        Path | None, typer.Option(help="Backend config file (JSON or YAML).")
    ] = None,
    backend_type: Annotated[
        str | None, typer.Option(help="echo, openai, vllm or ollama (overrides the file).")
    ] = None,
    endpoint: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL.")] = None,
    model: Annotated[str | None, typer.Option(help="Default model for model steps.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key.")
    ] = None,
    latency_ms: Annotated[float | None, typer.Option(help="Echo backend delay per call.")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 8080,
    cache_max_entries: Annotated[int, typer.Option(help="Step cache size bound.")] = 1024,
    cache_ttl_seconds: Annotated[float, typer.Option(help="Step cache entry TTL.")] = 600.0,
    max_body_bytes: Annotated[int, typer.Option(help="Largest accepted request body.")] = 1048576,
) -> None:
    """Serve a workflow: POST /invoke, the OpenAI-compatible /v1 API, health and metrics."""
    # Deferred so that other `plnt` commands start without loading the runner.
    from plnt.runner import serving, settings
    from plnt.workflowspec import documents

    if backend_type is not None and backend_type not in ("echo", "openai", "vllm", "ollama"):
        raise typer.BadParameter(
            f"unknown backend type {backend_type!r}", param_hint="--backend-type"
        )
    try:
        runner_settings = serving.settings_from_options(
            spec,
            backend_config=backend_config,
            backend_type=backend_type,  # type: ignore[arg-type]  # checked above
            endpoint=endpoint,
            model=model,
            api_key_env=api_key_env,
            latency_ms=latency_ms,
            host=host,
            port=port,
            cache_max_entries=cache_max_entries,
            cache_ttl_seconds=cache_ttl_seconds,
            max_body_bytes=max_body_bytes,
        )
        serving.serve(runner_settings)
    except (documents.SpecError, settings.BackendConfigError) as error:
        # A usage error, not INVALID: the spec and config are this command's own options,
        # and `python -m plnt.runner` exits 2 for them too.
        exits.fail(str(error), exits.Code.USAGE)


def register(app: typer.Typer) -> None:
    """Add the `runner` command to `app`."""
    app.command("runner")(runner)
