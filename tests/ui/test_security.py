"""The launch token, its cookie, the Host check, and CSRF and Origin on state changes."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from plnt.client import Connection, PlntClient
from plnt.processes.ports import free_port
from plnt.ui import app, security
from plnt.ui.settings import UiSettings


async def _client() -> tuple[TestClient[object, object], UiSettings]:
    # The API is never reached: every request here is decided by the guard.
    api = PlntClient(Connection(server="http://127.0.0.1:9"))
    settings = UiSettings(port=free_port())
    server = TestServer(app.build_app(settings, api), host="127.0.0.1", port=settings.port)
    await server.start_server()
    return TestClient(server), settings


async def test_the_token_becomes_a_strict_httponly_cookie_and_leaves_the_url() -> None:
    client, settings = await _client()
    async with client:
        answer = await client.get(f"/ns/a/runs?x=1&token={settings.token}", allow_redirects=False)
        assert answer.status == 303
        assert answer.headers["Location"] == "/ns/a/runs?x=1"
        cookie = answer.headers["Set-Cookie"]
        assert f"{security.cookie_name(settings.port)}={settings.session}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


async def test_a_post_needs_our_origin_and_the_csrf_token() -> None:
    client, settings = await _client()
    async with client:
        await client.get(f"/?token={settings.token}", allow_redirects=False)
        origin = f"http://127.0.0.1:{settings.port}"
        path = "/act/ns/a/runs/r/abort"
        wrong_origin = await client.post(
            path, headers={"Origin": "http://evil.test", "X-CSRF-Token": settings.csrf_token}
        )
        assert wrong_origin.status == 403
        no_token = await client.post(path, headers={"Origin": origin})
        assert no_token.status == 403
        allowed = await client.post(
            path, headers={"Origin": origin, "X-CSRF-Token": settings.csrf_token}, json={}
        )
        assert allowed.status == 502  # past the guard: the API at port 9 does not answer


async def test_a_request_for_another_host_is_refused() -> None:
    client, settings = await _client()
    async with client:
        answer = await client.get(
            f"/?token={settings.token}", headers={"Host": "evil.test"}, allow_redirects=False
        )
        assert answer.status == 403
        assert "Set-Cookie" not in answer.headers
