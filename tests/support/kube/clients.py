"""Clients of the stand-in for asynchronous tests: a token user's session, and a POST.

The stand-in serves from its own thread and loop; `session(kube, token)` is an aiohttp
session in the test's loop that trusts the stand-in's CA and sends the token.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from tests.support.kube import standin


@contextlib.asynccontextmanager
async def session(kube: standin.KubeStandIn, token: str) -> AsyncIterator[aiohttp.ClientSession]:
    """A client of the stand-in whose connections are all closed when it is left.

    Connections stay in the pool (no `force_close`): closing the session then aborts
    each one and waits until its socket is gone. A connection closed on release would
    instead start TLS's close_notify exchange with the stand-in's thread, which the
    test's loop may not live to finish, leaving an unclosed socket to the collector.
    """
    connector = aiohttp.TCPConnector(ssl=kube.ssl_context())
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(kube.url, connector=connector, headers=headers) as client:
        yield client


async def post(client: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with client.post(path, json=body) as response:
        return response.status, await response.json()
