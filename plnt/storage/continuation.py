"""Continue tokens: how a paged list resumes at the same revision.

A token is URL-safe base64 of the JSON `{"v":"meta.k8s.io/v1","rv":N,"start":"..."}`
(the shape kube-apiserver uses): `rv` is the revision every page is read at and
`start` the first key of the next page, *relative to the listed prefix*, so a
token can never reach keys outside the prefix it is used with. The etcd store
and the watch cache issue and accept the same tokens, so a list started on one
can continue on the other.

Errors: `errors.InvalidContinue` for anything that does not decode to that shape.
"""

from __future__ import annotations

import base64
import binascii
import json

from plnt.storage import errors

_VERSION = "meta.k8s.io/v1"


def encode(*, revision: int, start: str) -> str:
    """The token for the page starting at `start` (relative to the prefix) at `revision`."""
    body = json.dumps({"v": _VERSION, "rv": revision, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode()


def decode(token: str) -> tuple[int, str]:
    """`(revision, start)` from a token; InvalidContinue when malformed."""
    try:
        raw = base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4))
        body = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeError) as exc:
        raise errors.InvalidContinue(f"continue token is not valid base64 JSON: {exc}") from exc
    if not isinstance(body, dict) or body.get("v") != _VERSION:
        raise errors.InvalidContinue("continue token has an unknown version")
    revision, start = body.get("rv"), body.get("start")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision <= 0:
        raise errors.InvalidContinue("continue token has no valid revision")
    if not isinstance(start, str) or not start:
        raise errors.InvalidContinue("continue token has no start key")
    return revision, start


def resume(prefix: str, token: str | None, revision: int) -> tuple[int, str]:
    """Where a list of `prefix` reads: `(revision, prefix)` without a token; with one, the
    token's revision and the first key of its page (InvalidContinue when malformed, or
    when `revision` is given and is another)."""
    if token is None:
        return revision, prefix
    token_revision, relative_start = decode(token)
    if revision and revision != token_revision:
        raise errors.InvalidContinue("a continue token cannot be used with a revision")
    return token_revision, prefix + relative_start


def next_start(last_key_relative: str) -> str:
    """The smallest key strictly after `last_key_relative`."""
    return last_key_relative + "\x00"


def prefix_end(prefix: str) -> str:
    """The smallest string greater than every string starting with `prefix` ("" = no bound)."""
    stripped = prefix.rstrip("\U0010ffff")
    if not stripped:
        return ""
    return stripped[:-1] + chr(ord(stripped[-1]) + 1)
