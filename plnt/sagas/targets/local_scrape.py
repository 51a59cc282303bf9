"""Prometheus file-based service discovery for the local target's runners.

Every runner process serves `/metrics`. So that a Prometheus finds them as they come and
go, the local target keeps one file per run in the scrape directory
(`STATE/prometheus/run-NAMESPACE_NAME_UID.json`, the `file_sd_configs` JSON format: a
list of target groups), rewritten from the run's replica records whenever the target
changes the run (install, scale, retire) and removed on teardown. A `plnt worker` with
`--metrics-port` names itself in `worker-PID.json` while it runs. It is written under
the run's lock, through a temporary file and a rename, so Prometheus (which re-reads a
file when it changes) never sees half a file, and two runs never write the same file.
Kubernetes names contain no underscore, so the file name is unambiguous.

Each replica is its own group, labelled with what the dashboards select on: `job`
(`plnt-runner`), `namespace`, `workflowrun`, `revision` and `replica`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from plnt.sagas.targets import interface
from plnt.sagas.targets import local_records as records

RUNNER_JOB = "plnt-runner"
WORKER_JOB = "plnt-worker"
_PREFIX = "run-"


def targets_dir(state_dir: Path) -> Path:
    """Where plnt up keeps its file SD files: `STATE/prometheus`."""
    return state_dir / "prometheus"


def file_of(scrape_dir: Path, run: interface.RunRef) -> Path:
    """The SD file of one run."""
    return scrape_dir / f"{_PREFIX}{run.namespace}_{run.name}_{run.uid}.json"


def groups(run: interface.RunRef, replicas: list[records.ReplicaRecord]) -> list[dict[str, Any]]:
    """The target groups of a run's replicas, one per replica."""
    return [
        {
            "targets": [urlsplit(record.url).netloc],
            "labels": {
                "job": RUNNER_JOB,
                "namespace": run.namespace,
                "workflowrun": run.name,
                "revision": str(record.revision),
                "replica": str(record.index),
            },
        }
        for record in replicas
    ]


def publish(scrape_dir: Path, layout: records.RunLayout) -> None:
    """Rewrite the run's SD file from its records (remove it when no replica is left).

    Call it holding the run's lock, after the records changed.
    """
    path = file_of(scrape_dir, layout.run)
    replicas = layout.records()
    if not replicas:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    document = json.dumps(groups(layout.run, replicas), indent=2, sort_keys=True)
    records.write_atomically(path, document.encode() + b"\n")


def forget(scrape_dir: Path, run: interface.RunRef) -> None:
    """Remove the run's SD file (its runners are gone)."""
    with contextlib.suppress(FileNotFoundError):
        file_of(scrape_dir, run).unlink()


def forget_all(scrape_dir: Path) -> int:
    """Remove every run's SD file (`plnt down` stopped every runner); how many there were."""
    removed = 0
    for path in scrape_dir.glob(f"{_PREFIX}*.json"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


@contextlib.contextmanager
def worker_target(scrape_dir: Path, host: str, port: int) -> Iterator[Path]:
    """While the block runs, `worker-PID.json` names a worker's own metrics port
    (`plnt worker --metrics-port`); it is removed when the worker stops."""
    address = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    path = scrape_dir / f"worker-{os.getpid()}.json"
    document = [{"targets": [f"{address}:{port}"], "labels": {"job": WORKER_JOB}}]
    records.write_atomically(path, json.dumps(document, indent=2).encode() + b"\n")
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
