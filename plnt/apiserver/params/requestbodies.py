"""Request bodies: read up to the limit (413 beyond), media types (415), decoding (400)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import bodies, negotiation
from plnt.registry import decoding

_DISCARD_LIMIT = 16 * 1024 * 1024


async def read_body(request: web.Request, *, limit: int) -> bytes:
    """The raw body, refused with a Status 413 beyond `limit` bytes."""
    too_large = errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")
    if request.content_length is not None and request.content_length > limit:
        await _discard(request)
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            await _discard(request)
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _discard(request: web.Request, *, at_most: int = _DISCARD_LIMIT) -> None:
    """Read and drop what a refused body still carries, so the 413 reaches the client at once.

    Beyond `at_most` the connection is left to aiohttp, which closes it after lingering.
    """
    dropped = 0
    async for chunk in request.content.iter_chunked(256 * 1024):
        dropped += len(chunk)
        if dropped > at_most:
            return


OBJECT_MEDIA_TYPES = ("", "application/json", "application/yaml", "*/*", "application/*")
"""What a create or update body may be labelled (`*/*` and `application/*`: JSON, a
documented difference from kube, which answers 415)."""


def unsupported_object_media() -> errors.UnsupportedMediaType:
    """kube's 415 for a create or update body that is not JSON or YAML (a patch type included)."""
    return errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )


def object_media(request: web.Request) -> str:
    """The media type of a create or update body; 415 for anything else, patch types too."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in OBJECT_MEDIA_TYPES:
        raise unsupported_object_media()
    return media


async def decode_data(data: bytes, *, media: str) -> tuple[Any, list[str]]:
    """Decode a body already read; 400 when empty or malformed."""
    if not data.strip():
        raise errors.BadRequest("the request body is empty; an object was expected")
    try:
        return await bodies.decode(data, content_type=media or "application/json")
    except decoding.DecodeError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error


OPTIONAL_BODY_MEDIA_TYPES = ("", "*/*", "application/json", "application/yaml")
"""What the optional body of a POST-only subresource (`/rollback`, `/bench`) may be labelled."""


async def decode_optional(request: web.Request, *, limit: int) -> Any:
    """The decoded JSON or YAML body of a subresource that may be called without one: None
    for an empty body, 415 for another media type, 400 if malformed (off the loop unless
    small JSON, as every body)."""
    data = await read_body(request, limit=limit)
    if not data.strip():
        return None
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in OPTIONAL_BODY_MEDIA_TYPES:
        raise unsupported_object_media()
    body, _ = await decode_data(data, media=media)
    return body


async def decode_object(request: web.Request, *, limit: int) -> tuple[Any, list[str]]:
    """Read and decode a JSON or YAML body (no Content-Type means JSON); 400 if malformed."""
    data = await read_body(request, limit=limit)
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in (*OBJECT_MEDIA_TYPES, *negotiation.PATCH_TYPES, negotiation.APPLY_PATCH):
        raise unsupported_object_media()
    return await decode_data(data, media=media)
