"""What the benchmarks' reports share: a target's verdict, a phase as a table row and as
JSON, and the end of a run's output.

Every benchmark prints a human table, then (the ones a script reads) its results as one
JSON line last, optionally also written to a file; a missed target is printed as MISS,
never turned into a non-zero exit status. No I/O but `emit`'s printing and file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from plnt.bench.apiserver import PhaseStats


def verdict(ok: bool) -> str:
    """PASS when a target is met, MISS when not."""
    return "PASS" if ok else "MISS"


def phase_header(width: int) -> str:
    """The header of `phase_row`s whose labels take `width` characters."""
    return (
        f"{'phase':<{width}}{'calls/s':>10}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'errors':>8}"
    )


def phase_row(label: str, stats: PhaseStats, *, width: int) -> str:
    """One phase: its rate, latency percentiles (ms) and errors, under `phase_header`."""
    return (
        f"{label:<{width}}{stats.rate:>10.1f}{stats.percentile_ms(0.5):>10.2f}"
        f"{stats.percentile_ms(0.95):>10.2f}{stats.percentile_ms(0.99):>10.2f}"
        f"{stats.errors:>8}"
    )


def phase_json(stats: PhaseStats) -> dict[str, object]:
    """One phase in a benchmark's JSON document, with CPU per request of each process
    metered during it (`cputime`), when any was."""
    found: dict[str, object] = {
        "rate": stats.rate,
        "ops": stats.ops,
        "errors": stats.errors,
        "p50_ms": stats.percentile_ms(0.5),
        "p95_ms": stats.percentile_ms(0.95),
        "p99_ms": stats.percentile_ms(0.99),
    }
    if stats.cpu:
        found["cpu_ms_per_req"] = {name: stats.cpu_ms(name) for name in stats.cpu}
    return found


def write(lines: Iterable[str], document: Mapping[str, Any], json_file: Path | None) -> None:
    """Print the report; write the document, indented, to `json_file` when given."""
    for line in lines:
        print(line)
    if json_file is not None:
        json_file.write_text(json.dumps(document, indent=2) + "\n")


def emit(
    lines: Iterable[str], document: Mapping[str, Any], *, started: float, json_file: Path | None
) -> None:
    """`write`, with the run's length (since the monotonic `started`) after the report and,
    last, the document as one JSON line (what the command benches are read by)."""
    lines = [*lines, f"total {time.monotonic() - started:.0f}s, {os.cpu_count()} CPUs"]
    write(lines, document, json_file)
    print(json.dumps(document, separators=(",", ":")), flush=True)
