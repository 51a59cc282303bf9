"""Variables a shell may hold for something else, each of which a child of plnt would read
as a setting if it inherited them: llama-cpp-python's server settings, etcd's flags,
the `temporal` CLI's, llama.cpp's own. Tests set them in plnt's environment (`setenv`) and
check that every child still starts where plnt says and sees none of them (`leaked`).

Every value points somewhere harmful: a port that is not the child's, an address that is
not this machine's (TEST-NET-1), a data directory elsewhere, an API key the server would
then demand."""

from __future__ import annotations

from pathlib import Path

import pytest

HOSTILE = {
    "PORT": "1",
    "HOST": "192.0.2.1",
    "MODEL": "/nonexistent/hostile.gguf",
    "MODEL_ALIAS": "hostile",
    "N_CTX": "1",
    "API_KEY": "hostile",
    "ETCD_DATA_DIR": "/nonexistent/etcd",
    "ETCD_LISTEN_CLIENT_URLS": "http://127.0.0.1:1",
    "ETCD_NAME": "hostile",
    "TEMPORAL_ADDRESS": "192.0.2.1:1",
    "TEMPORAL_NAMESPACE": "hostile",
    "LLAMA_ARG_PORT": "1",
}


def set_hostile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put every hostile variable in this process's environment (undone after the test)."""
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)


def environment_of(pid: int) -> dict[str, str]:
    """The environment process `pid` was started with (`/proc/PID/environ`)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {name.decode(): value.decode(errors="replace") for name, _, value in pairs}


def leaked(pid: int) -> set[str]:
    """The hostile variables process `pid` was started with (none, when plnt built it)."""
    return set(HOSTILE) & set(environment_of(pid))
