"""Loopback ports for child processes: etcd, Temporal, runners, test servers.

Why "free a moment ago" is good enough: the port is bound by a child that fails loudly
when another process took it first (etcd and the local target then retry with a new
port), so the short window between this check and the bind costs a retry or a clear
start-up error, never a connection to the wrong server.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
