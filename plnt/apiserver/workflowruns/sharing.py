"""A run's invocation log and shadow pairs, shared by the worker processes of one server.

With `--workers N` a client's call lands on any worker, and so does its next
`GET …/invocationlog` or `…/shadow`: whichever worker answers must answer for the whole
server. Each worker keeps its own log and pairs, and publishes what it records on a
stream of the server's private channel (`plnt.apiserver.peers`); every sibling reads it
and keeps the items as if it had recorded them, without publishing them again. So each
worker holds the whole server's last `traffic.LOG_SIZE` entries per run (oldest first
by `time`, a late sibling's entry put in its place), a watch of the log on any worker
sees each invocation as it ends, and `…/shadow` answers every worker's pairs and drops.

Recording stays off the network: publishing queues the item (`peers.Stream.publish`).
A worker that starts (or restarts) holds only what is recorded from then on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from plnt.apiserver.peers import Peers, Stream
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.apiserver.workflowruns.traffic import Forward

LOG_STREAM = "invocationlog"
SHADOW_STREAM = "shadow"


def _publisher(stream: Stream) -> Forward:
    def publish(namespace: str, name: str, item: dict[str, Any]) -> None:
        stream.publish({"namespace": namespace, "name": name, "item": item})

    return publish


def _unpack(message: Any) -> tuple[str, str, dict[str, Any]] | None:
    if not isinstance(message, dict):
        return None
    namespace, name, item = message.get("namespace"), message.get("name"), message.get("item")
    if not isinstance(namespace, str) or not isinstance(name, str) or not isinstance(item, dict):
        return None
    return namespace, name, item


def register(app: web.Application, peers: Peers) -> None:
    """Register the two streams with `peers`, and a cleanup context (to run after the
    invoker's and the shadower's, before the peers') that connects the logs to them."""

    def receive_entry(message: Any) -> None:
        if (unpacked := _unpack(message)) is not None:
            app[run_keys.INVOKER].log.receive(*unpacked)

    def receive_shadow(message: Any) -> None:
        if (unpacked := _unpack(message)) is not None:
            app[run_keys.SHADOWER].log.receive(*unpacked)

    log_stream = peers.stream(LOG_STREAM, receive_entry)
    shadow_stream = peers.stream(SHADOW_STREAM, receive_shadow)

    async def context(app: web.Application) -> AsyncIterator[None]:
        app[run_keys.INVOKER].log.forward = _publisher(log_stream)
        app[run_keys.SHADOWER].log.forward = _publisher(shadow_stream)
        yield

    app.cleanup_ctx.append(context)
