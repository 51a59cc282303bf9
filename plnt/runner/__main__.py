"""`python -m plnt.runner --spec FILE ...`: the runner without the CLI layer.

Uses argparse because the runner layer may not import the CLI; `plnt runner` offers the
same options through typer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from plnt.runner import serving, settings
from plnt.workflowspec import documents


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(prog="python -m plnt.runner", description=__doc__)
    parser.add_argument("--spec", type=Path, required=True, help="Workflow spec file.")
    parser.add_argument("--backend-config", type=Path, help="Backend config (JSON or YAML).")
    parser.add_argument("--backend-type", choices=["echo", "openai", "vllm", "ollama"])
    parser.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://h:8000/v1.")
    parser.add_argument("--model", help="Default model for model steps.")
    parser.add_argument("--api-key-env", help="Environment variable holding the API key.")
    parser.add_argument("--latency-ms", type=float, help="Echo backend delay per call.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port.")
    parser.add_argument("--cache-max-entries", type=int, default=1024)
    parser.add_argument("--cache-ttl-seconds", type=float, default=600.0)
    parser.add_argument("--max-body-bytes", type=int, default=1024 * 1024)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve; exit 2 with the problems on stderr when the spec or backend config is invalid."""
    args = parse_args(argv)
    try:
        runner_settings = serving.settings_from_options(
            args.spec,
            backend_config=args.backend_config,
            backend_type=args.backend_type,
            endpoint=args.endpoint,
            model=args.model,
            api_key_env=args.api_key_env,
            latency_ms=args.latency_ms,
            host=args.host,
            port=args.port,
            cache_max_entries=args.cache_max_entries,
            cache_ttl_seconds=args.cache_ttl_seconds,
            max_body_bytes=args.max_body_bytes,
        )
        serving.serve(runner_settings)
    except (documents.SpecError, settings.BackendConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
