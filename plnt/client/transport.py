"""HTTP to plnt's API: one aiohttp session, TLS from the kubeconfig, failures made typed.

`Transport` owns the session (created on first use inside the running loop,
closed by `close()` or `async with`), so many coroutines of one event loop can
share it. `request` answers a `Response` for any 2xx and raises the
`errors` tree otherwise: this is the only place aiohttp errors and Status
bodies are translated. `watch` yields the events of a Kubernetes watch stream
(newline-delimited JSON) and turns an ERROR event into the matching
`ApiError`.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp

from plnt.api import codec
from plnt.client import errors
from plnt.client.kubeconfig import Connection

USER_AGENT = "plnt-client/0.1"
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"

Params = Mapping[str, str | int | bool]


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer: status, headers and the raw body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (None for an empty body)."""
        return codec.loads(self.body) if self.body else None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    type: str
    object: dict[str, Any]


def ssl_context(connection: Connection) -> ssl.SSLContext | bool:
    """The TLS settings of `connection` (False for plain http)."""
    if connection.server.startswith("http://"):
        return False
    context = ssl.create_default_context()
    if connection.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif connection.ca_data is not None:
        try:
            context = ssl.create_default_context(
                cadata=connection.ca_data.decode("ascii", "replace")
            )
        except ssl.SSLError as error:
            raise errors.KubeconfigError(
                f"{connection.source}: the certificate authority is not a PEM certificate: "
                f"{error.reason or error}"
            ) from error
    if connection.client_certificate_data and connection.client_key_data:
        # The ssl module loads key pairs from files only: write them to a private
        # directory just long enough to load them.
        with tempfile.TemporaryDirectory(prefix="plnt-client-") as directory:
            cert, key = Path(directory) / "client.crt", Path(directory) / "client.key"
            cert.touch(mode=0o600)
            key.touch(mode=0o600)
            cert.write_bytes(connection.client_certificate_data)
            key.write_bytes(connection.client_key_data)
            try:
                context.load_cert_chain(certfile=cert, keyfile=key)
            except ssl.SSLError as error:
                raise errors.KubeconfigError(
                    f"{connection.source}: the client certificate and key cannot be used "
                    f"together: {error.reason or error}"
                ) from error
    return context


class Transport:
    """One connection to a plnt API server, shared by every coroutine of one event loop."""

    def __init__(
        self,
        connection: Connection,
        *,
        timeout: float = 30.0,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.connection = connection
        self.timeout = timeout
        self._ssl = ssl_context(connection)
        self._headers = {"User-Agent": user_agent, "Accept": JSON}
        if connection.token:
            self._headers["Authorization"] = f"Bearer {connection.token}"
        elif connection.username is not None:
            pair = f"{connection.username}:{connection.password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self._session: aiohttp.ClientSession | None = None

    @property
    def namespace(self) -> str:
        """The namespace requests use unless told otherwise."""
        return self.connection.namespace

    def _client_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                base_url=None,
                connector=aiohttp.TCPConnector(ssl=self._ssl),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout),
            )
        return self._session

    async def close(self) -> None:
        """Close the session; the client may not be used afterwards."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Params | None = None,
        content_type: str = JSON,
        headers: Mapping[str, str] | None = None,
        request_timeout: float | None = None,
    ) -> Response:
        """Send one request; a 2xx answer comes back, anything else raises `errors.ApiError`."""
        extra = dict(headers or {})
        data: bytes | None = None
        if json is not None:
            data = codec.dumps(json)
            extra["Content-Type"] = content_type
        limit = aiohttp.ClientTimeout(
            total=self.timeout if request_timeout is None else request_timeout
        )
        try:
            async with self._client_session().request(
                method,
                self.connection.server + path,
                data=data,
                params=_query(params),
                headers=extra,
                timeout=limit,
                server_hostname=self.connection.tls_server_name,
            ) as response:
                body = await response.read()
                answer = Response(response.status, dict(response.headers), body)
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as error:
            raise _transport_error(method, path, error) from error
        if answer.status >= 300:
            raise _api_error(answer)
        return answer

    async def watch(self, path: str, *, params: Params | None = None) -> AsyncIterator[WatchEvent]:
        """Yield the events of `GET path?watch=1`; ends when the server ends the stream."""
        query = dict(_query(params) or {})
        query["watch"] = "1"
        try:
            async with self._client_session().get(
                self.connection.server + path,
                params=query,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout),
                server_hostname=self.connection.tls_server_name,
            ) as response:
                if response.status >= 300:
                    raise _api_error(
                        Response(response.status, dict(response.headers), await response.read())
                    )
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield _event(line)
                if buffer.strip():
                    yield _event(buffer)
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as error:
            raise _transport_error("GET", path, error) from error


def _query(params: Params | None) -> dict[str, str] | None:
    if params is None:
        return None
    return {
        key: ("true" if value else "false") if isinstance(value, bool) else str(value)
        for key, value in params.items()
    }


def _event(line: bytes) -> WatchEvent:
    try:
        raw = codec.loads(line)
    except ValueError as error:
        raise errors.ServerError(
            f"malformed watch event: {line[:200]!r}", code=500, reason="InternalError"
        ) from error
    kind, obj = raw.get("type"), raw.get("object")
    if not isinstance(kind, str) or not isinstance(obj, dict):
        raise errors.ServerError(f"malformed watch event: {line[:200]!r}", code=500)
    if kind == "ERROR":
        raise errors.from_status(obj, http_code=int(obj.get("code") or 500))
    return WatchEvent(kind, obj)


def _api_error(answer: Response) -> errors.ApiError:
    text = answer.body.decode("utf-8", "replace")
    try:
        body = answer.json()
    except ValueError:
        body = None
    return errors.from_response(answer.status, body, text)


def _transport_error(method: str, path: str, error: BaseException) -> errors.TransportError:
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return errors.TransportError(f"{method} {path}: timed out waiting for the server")
    detail = str(error) or type(error).__name__
    return errors.TransportError(f"{method} {path}: {detail}")
