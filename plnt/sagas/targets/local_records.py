"""The local target's state on disk: where a run's files live and what a replica record says.

State lives in files, not in the worker's memory, because runner processes outlive the
worker that started them: a restarted worker (or one Temporal retries an activity on)
must find them again. Layout under the target's state directory::

    runs/{namespace}/{name}-{uid}/
        .lock                      exclusive flock while a run is changed
        run.json                   the run's identity, for humans and clean-up tools
        specs/{sha256}.yaml        workflow specs, content-addressed
        backends/{sha256}.json     runner backend configs, content-addressed
        replicas/r{rev}-{i}.json   one record per replica (see `ReplicaRecord`)
        logs/r{rev}-{i}.log        stdout and stderr of the replica's current process

Every file is written to a temporary name and renamed into place, so a reader sees a
whole record or none. No I/O beyond these files happens here.

Errors: `InvalidRunKey` (a `TargetError`) when a run's namespace, name or uid would not
make one safe path segment; `interface.CredentialsMissing` when a Secret name or key
would not (`secret_path`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plnt.sagas.targets import interface

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class InvalidRunKey(interface.TargetError):
    """A run key that cannot name a directory (empty, or with a path separator)."""


@dataclass(frozen=True)
class ReplicaRecord:
    """What the target knows about one replica's current process.

    `token` is unique per process start and appears on the process's command line
    (``-X plnt-replica=TOKEN``), so a pid can be checked to really be this replica.
    `pid` is None for the short moment between writing the record and spawning the
    process; the token still finds the process if the writer died in that moment.
    `fingerprint` hashes what the process was started with (spec, backend, cache), so a
    replica started with other settings is replaced rather than adopted.
    """

    revision: int
    index: int
    token: str
    port: int
    url: str
    spec: str
    backend_config: str
    fingerprint: str
    log: str
    pid: int | None = None
    started_at: float = 0.0

    def to_json(self) -> bytes:
        """The record as the bytes of its file."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ReplicaRecord:
        """Parse a record file; ValueError (or a subclass) when it is not one."""
        document: Any = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError("a replica record is a JSON object")
        names = {item.name for item in dataclasses.fields(cls)}
        try:
            return cls(**{key: value for key, value in document.items() if key in names})
        except TypeError as error:
            raise ValueError(f"not a replica record: {error}") from error


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary sibling and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.replace(path)


def sha256_hex(data: bytes) -> str:
    """The hex sha256 of `data` (the names of content-addressed files)."""
    return hashlib.sha256(data).hexdigest()


class RunLayout:
    """The paths of one run's state, and reading and writing its records."""

    def __init__(self, state_dir: Path, run: interface.RunRef) -> None:
        for label, value in (("namespace", run.namespace), ("name", run.name), ("uid", run.uid)):
            if not _SEGMENT.match(value) or ".." in value:
                raise InvalidRunKey(f"run {label} {value!r} cannot name a directory")
        self.run = run
        self.root = runs_dir(state_dir) / run.namespace / f"{run.name}-{run.uid}"
        self.lock = self.root / ".lock"
        self.replicas_dir = self.root / "replicas"
        self.logs_dir = self.root / "logs"

    def record_path(self, revision: int, index: int) -> Path:
        """Where the record of replica `index` of `revision` lives."""
        return self.replicas_dir / f"r{revision}-{index}.json"

    def log_path(self, revision: int, index: int) -> Path:
        """Where replica `index` of `revision` writes its output."""
        return self.logs_dir / f"r{revision}-{index}.log"

    def write_identity(self) -> None:
        """Write run.json once, naming the run the directory belongs to."""
        path = self.root / "run.json"
        if not path.exists():
            write_atomically(path, json.dumps(dataclasses.asdict(self.run), indent=2).encode())

    def write_content(self, kind: str, suffix: str, data: bytes) -> Path:
        """Store `data` under `kind/` named by its digest; existing content is kept."""
        path = self.root / kind / f"{sha256_hex(data)}{suffix}"
        if not path.exists():
            write_atomically(path, data)
        return path

    def write_record(self, record: ReplicaRecord) -> None:
        """Store a replica record, replacing the previous one for its (revision, index)."""
        write_atomically(self.record_path(record.revision, record.index), record.to_json())

    def read_record(self, revision: int, index: int) -> ReplicaRecord | None:
        """The record of one replica, or None when there is none (or it is unreadable)."""
        return read_record_file(self.record_path(revision, index))

    def remove_record(self, record: ReplicaRecord) -> None:
        """Forget a replica (no error when already forgotten)."""
        with contextlib.suppress(FileNotFoundError):
            self.record_path(record.revision, record.index).unlink()

    def records(self, revision: int | None = None) -> list[ReplicaRecord]:
        """Every readable record of the run (of one revision when given), in order."""
        return [
            record
            for record in read_records(self.replicas_dir)
            if revision is None or record.revision == revision
        ]


def backend_document(
    backend: interface.BackendConfig,
    api_key_file: Path | None = None,
    *,
    fallback_api_key_file: Path | None = None,
) -> bytes:
    """The runner's backend config file for `backend` (camelCase keys, unset ones left out),
    with its fallback's under `fallback` (the fallback's key in a file of its own) and the
    backends a call may spill to under `spillover`, by name."""
    document = _backend_fields(backend, api_key_file)
    if backend.fallback is not None:
        document["fallback"] = _backend_fields(backend.fallback, fallback_api_key_file)
    # The pool's other backends a call may spill to (docs/slo.md): none holds credentials.
    spillover = {spill.name: _backend_fields(spill, None) for spill in backend.spill if spill.name}
    if spillover:
        document["spillover"] = spillover
    return json.dumps(document, indent=2, sort_keys=True).encode()


def _backend_fields(
    backend: interface.BackendConfig, api_key_file: Path | None
) -> dict[str, object]:
    fields = {
        "type": backend.type,
        "endpoint": backend.endpoint,
        "model": backend.model,
        "apiKeyEnv": backend.api_key_env,
        "apiKeyFile": None if api_key_file is None else str(api_key_file),
        "latencyMs": backend.latency_ms,
        "name": backend.name,
        "maxConcurrency": backend.max_concurrency,
    }
    return {key: value for key, value in fields.items() if value is not None}


_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def secret_path(secrets_dir: Path, name: str, key: str) -> Path:
    """`secrets_dir/NAME/KEY`, the standalone home of one Secret key.

    Admission already holds name and key to kube's rules; this refuses again anything that
    would leave `secrets_dir`, since the path is built from an object's fields.
    """
    if not _SEGMENT.match(name) or ".." in name:
        raise interface.CredentialsMissing(f"secret name {name!r} cannot name a directory")
    if not _SECRET_KEY.match(key) or key.startswith(".."):
        raise interface.CredentialsMissing(f"secret key {key!r} cannot name a file")
    return secrets_dir / name / key


def runs_dir(state_dir: Path) -> Path:
    """The directory holding every run's state."""
    return state_dir / "runs"


def read_record_file(path: Path) -> ReplicaRecord | None:
    """Parse one record file; None when missing or not a record."""
    try:
        return ReplicaRecord.from_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def read_records(replicas_dir: Path) -> list[ReplicaRecord]:
    """The readable records in one run's replicas directory, by revision then index."""
    if not replicas_dir.is_dir():
        return []
    records = [
        record
        for path in replicas_dir.glob("r*.json")
        if (record := read_record_file(path)) is not None
    ]
    return sorted(records, key=lambda record: (record.revision, record.index))


def all_record_files(state_dir: Path) -> list[Path]:
    """Every replica record file under a state directory, whatever run it belongs to."""
    return sorted(runs_dir(state_dir).glob("*/*/replicas/r*.json"))
