"""What one `plnt ui` launch is: where its API is, where it listens, its secrets."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"


def new_secret() -> str:
    """A fresh random URL-safe secret (32 bytes of entropy)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class UiSettings:
    """The launch's settings; the token and the CSRF secret are new for every launch.

    `host` is loopback only: the server holds the user's credentials, so nothing but
    the user's own machine may reach it (and the token keeps other local users out).
    `invoke_timeout_seconds` is how long the invoke form and the chat panel wait for a
    workflow's answer (`plnt ui --request-timeout`, as `plnt invoke`'s), not the client's
    30 s for everything else: a workflow may run for minutes.
    """

    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None
    port: int = 0
    host: str = LOOPBACK
    invoke_timeout_seconds: float = 300.0
    token: str = field(default_factory=new_secret, repr=False)
    csrf_token: str = field(default_factory=new_secret, repr=False)
    session: str = field(default_factory=new_secret, repr=False)
