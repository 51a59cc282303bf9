"""OCI distribution registries, through `oras` run in a worker thread.

oras brings the distribution protocol: repository URLs, the blob upload session
(POST, then PUT with `?digest=`), manifest upload and the bearer-token request. Around it this
module adds what a pinned, bounded pull needs and oras does not do:

* one `do_request` replacing oras's: a per-request timeout, no hidden retry loop (oras sleeps
  up to minutes and retries even authentication failures), and challenge-driven auth — a 401
  with `WWW-Authenticate: Basic` is answered with the configured credentials, one with
  `Bearer realm=…,service=…,scope=…` with a token fetched for *that* scope (oras would reuse a
  token granted for another scope);
* streamed, size-limited reads of the manifest and the spec blob, verified by digest;
* translation of requests/oras failures into `errors` exactly once; 429/5xx/connection
  failures become `errors.Unavailable`, which `retrying.call` retries a bounded number of times.

A pull by digest fetches the blob directly (`GET /v2/<repo>/blobs/<digest>`): the digest is
the spec's, not the manifest's. A pull by tag fetches the manifest (OCI Accept headers),
finds the single spec layer, then fetches and verifies that blob. The catalog lists a
repository's tags (`GET /v2/<repo>/tags/list`, every page its `Link` header names) and
resolves a tag to its spec digest from the manifest alone (`resolve`), so a spec it has
already read is not fetched again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import oras.auth.utils
import oras.container
import oras.provider
import requests

from plnt.workflowspec import digests, errors, references
from plnt.workflowspec.sources import artifacts, retrying, settings

DEFAULT_TAG = "latest"


class OciRegistrySource:
    """Publish to and fetch from OCI distribution registries."""

    def __init__(self, registry: settings.RegistrySettings, limits: settings.Limits) -> None:
        self._settings = registry
        self._limits = limits

    async def fetch(self, ref: references.OciRef, *, digest: digests.Digest | None) -> bytes:
        """The spec's bytes: by `digest` straight from the blob store, else through the tag."""
        return await retrying.call(
            lambda: asyncio.to_thread(self._fetch, ref, digest),
            limits=self._limits,
            what=f"pulling {ref}",
        )

    async def publish(
        self, data: bytes, ref: references.OciRef, *, kind: artifacts.Kind = artifacts.WORKFLOW
    ) -> references.OciRef:
        """Push the spec (or dataset) as a plnt artifact under `ref`'s tag; return it pinned."""
        if len(data) > self._limits.max_bytes:
            raise errors.TooLarge(
                f"{ref}: {len(data)} bytes exceeds the limit of {self._limits.max_bytes} bytes",
                limit=self._limits.max_bytes,
                size=len(data),
                ref=str(ref),
            )
        await retrying.call(
            lambda: asyncio.to_thread(self._publish, data, ref, kind),
            limits=self._limits,
            what=f"pushing {ref}",
        )
        return references.OciRef(
            host=ref.host,
            repository=ref.repository,
            tag=ref.tag or DEFAULT_TAG,
            digest=digests.compute(data),
        )

    async def attach_signature(self, ref: references.OciRef, bundle: bytes) -> None:
        """Push `bundle` as the signature of the pinned `ref` (artifacts' module docstring)."""
        await retrying.call(
            lambda: asyncio.to_thread(self._attach, ref, bundle),
            limits=self._limits,
            what=f"pushing the signature of {ref}",
        )

    async def fetch_signature(self, ref: references.OciRef, digest: digests.Digest) -> bytes | None:
        """The signature pushed for `digest` beside `ref`, or None."""
        return await retrying.call(
            lambda: asyncio.to_thread(self._fetch_signature, ref, digest),
            limits=self._limits,
            what=f"pulling the signature of {ref}",
        )

    async def tags(self, ref: references.OciRef) -> list[str]:
        """Every tag of `ref`'s repository, as the registry lists them (all pages)."""
        return await retrying.call(
            lambda: asyncio.to_thread(self._tags, ref),
            limits=self._limits,
            what=f"listing the tags of {ref}",
        )

    async def resolve(self, ref: references.OciRef) -> artifacts.Descriptor:
        """The layer `ref`'s tag names (its digest and media type: a spec's or a dataset's),
        from the manifest alone (no blob is read)."""
        return await retrying.call(
            lambda: asyncio.to_thread(self._resolve, ref),
            limits=self._limits,
            what=f"resolving {ref}",
        )

    def _client(self, ref: references.OciRef) -> _Registry:
        plain_http = self._settings.plain_http
        if plain_http is None:
            plain_http = _is_loopback(ref.hostname)
        return _Registry(
            ref.host,
            settings=self._settings,
            timeout=self._limits.timeout,
            plain_http=plain_http,
            ref=str(ref),
        )

    def _tags(self, ref: references.OciRef) -> list[str]:
        text = str(ref)
        registry = self._client(ref)
        found: list[str] = []
        try:
            container = registry.get_container(_container_name(ref, tag_only=True))
            url: str | None = f"{registry.prefix}://{container.tags_url(N=1000)}"
            while url is not None:
                page = registry.read_limited(
                    url,
                    accept="application/json",
                    limit=self._limits.max_manifest_bytes,
                    ref=text,
                    missing=f"repository {ref.repository}",
                    keep_link=True,
                )
                found += _tag_names(page.data, ref=text)
                url = _next_page(url, page.link)
        finally:
            registry.session.close()
        return found

    def _resolve(self, ref: references.OciRef) -> artifacts.Descriptor:
        registry = self._client(ref)
        try:
            container = registry.get_container(_container_name(ref, tag_only=True))
            return self._spec_layer(registry, container, ref)
        finally:
            registry.session.close()

    def _tag_manifest(self, registry: _Registry, container: Any, ref: references.OciRef) -> bytes:
        """The bytes of the manifest `ref`'s tag names, within the manifest size limit."""
        return registry.read_limited(
            f"{registry.prefix}://{container.manifest_url()}",
            accept=artifacts.ACCEPT,
            limit=self._limits.max_manifest_bytes,
            ref=str(ref),
            missing=f"tag {ref.tag or DEFAULT_TAG!r} of {ref.repository}",
        ).data

    def _spec_layer(
        self, registry: _Registry, container: Any, ref: references.OciRef
    ) -> artifacts.Descriptor:
        """The spec layer of the manifest `ref`'s tag names, within the size limit."""
        text = str(ref)
        manifest = self._tag_manifest(registry, container, ref)
        layer = artifacts.spec_layer(manifest, ref=text)
        if layer.size > self._limits.max_bytes:
            raise errors.TooLarge(
                f"{text}: the spec layer is {layer.size} bytes, over the limit of "
                f"{self._limits.max_bytes} bytes",
                limit=self._limits.max_bytes,
                size=layer.size,
                ref=text,
            )
        return layer

    def _fetch(self, ref: references.OciRef, digest: digests.Digest | None) -> bytes:
        text = str(ref)
        registry = self._client(ref)
        try:
            container = registry.get_container(_container_name(ref))
            if digest is None:
                digest = self._spec_layer(registry, container, ref).digest
            blob_url = f"{registry.prefix}://{container.get_blob_url(digest)}"
            data = registry.read_limited(
                blob_url,
                accept="*/*",
                limit=self._limits.max_bytes,
                ref=text,
                missing=f"blob {digest} in {ref.repository}",
            ).data
        finally:
            registry.session.close()
        digests.verify(data, digest, ref=text)
        return data

    def _attach(self, ref: references.OciRef, bundle: bytes) -> None:
        text = str(ref)
        assert ref.digest is not None, "a signature is attached to a pinned reference"
        registry = self._client(ref)
        try:
            container = registry.get_container(_container_name(ref, tag_only=True))
            # The subject is the manifest as the registry stores it (its bytes, its digest).
            subject = self._tag_manifest(registry, container, ref)
            described = artifacts.Descriptor(
                artifacts.MANIFEST_MEDIA_TYPE, digests.compute(subject), len(subject)
            )
            layer = artifacts.signature_descriptor(bundle)
            _upload_blobs(registry, container, layer, bundle, ref=text)
            signature = registry.get_container(
                f"{ref.host}/{ref.repository}:{artifacts.signature_tag(ref.digest)}"
            )
            response = registry.upload_manifest(
                artifacts.signature_manifest(bundle, described), signature
            )
            _expect_success(response, ref=text, what="uploading the signature manifest")
        except (ValueError, KeyError) as exc:
            raise errors.ProtocolError(
                f"{text}: the registry refused the signature: {exc}", ref=text
            ) from exc
        finally:
            registry.session.close()

    def _fetch_signature(self, ref: references.OciRef, digest: digests.Digest) -> bytes | None:
        text = str(ref)
        registry = self._client(ref)
        limit = self._limits.max_manifest_bytes
        try:
            container = registry.get_container(
                f"{ref.host}/{ref.repository}:{artifacts.signature_tag(digest)}"
            )
            try:
                manifest = registry.read_limited(
                    f"{registry.prefix}://{container.manifest_url()}",
                    accept=artifacts.ACCEPT,
                    limit=limit,
                    ref=text,
                    missing=f"the signature of {digest}",
                ).data
            except errors.NotFound:
                return None
            layer = artifacts.signature_layer(manifest, ref=text)
            bundle = registry.read_limited(
                f"{registry.prefix}://{container.get_blob_url(layer.digest)}",
                accept="*/*",
                limit=limit,
                ref=text,
                missing=f"blob {layer.digest} in {ref.repository}",
            ).data
        finally:
            registry.session.close()
        digests.verify(bundle, layer.digest, ref=text)
        return bundle

    def _publish(self, data: bytes, ref: references.OciRef, kind: artifacts.Kind) -> None:
        text = str(ref)
        registry = self._client(ref)
        try:
            container = registry.get_container(_container_name(ref, tag_only=True))
            _upload_blobs(
                registry, container, artifacts.spec_descriptor(data, kind), data, ref=text
            )
            response = registry.upload_manifest(artifacts.manifest_for(data, kind), container)
            _expect_success(response, ref=text, what="uploading the manifest")
        except (ValueError, KeyError) as exc:
            # oras raises ValueError when an upload session URL is missing, among others.
            raise errors.ProtocolError(
                f"{text}: the registry refused the push: {exc}", ref=text
            ) from exc
        finally:
            registry.session.close()


class _Registry(oras.provider.Registry):  # type: ignore[misc]
    """oras's registry client with a timeout, no retry loop, and challenge-driven auth."""

    def __init__(
        self,
        host: str,
        *,
        settings: settings.RegistrySettings,
        timeout: float,
        plain_http: bool,
        ref: str,
    ) -> None:
        super().__init__(
            hostname=host,
            insecure=plain_http,
            tls_verify=settings.tls_verify,
            auth_backend="token",
        )
        self._timeout = timeout
        self._has_credentials = bool(settings.username)
        if settings.username:
            self.auth.set_basic_auth(settings.username, settings.password or "")
        self._authorization: str | None = None
        self._ref = ref

    def do_request(
        self,
        url: str,
        method: str = "GET",
        data: dict[str, Any] | bytes | None = None,
        headers: dict[str, str] | None = None,
        json: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> requests.Response:
        """Send once; on 401 answer the challenge and send once more; map failures."""
        headers = dict(headers or {})
        if self._authorization:
            headers["Authorization"] = self._authorization
        response = self._send(method, url, data=data, headers=headers, json=json, stream=stream)
        if response.status_code == 401:
            challenge = response.headers.get("WWW-Authenticate", "")
            response.close()
            self._authorization = self._answer(challenge, url=url)
            headers["Authorization"] = self._authorization
            response = self._send(method, url, data=data, headers=headers, json=json, stream=stream)
        if response.status_code in (401, 403):
            response.close()
            raise errors.AuthenticationFailed(
                self._auth_message(response.status_code, url), ref=self._ref
            )
        if response.status_code == 429 or response.status_code >= 500:
            response.close()
            raise errors.Unavailable(
                f"{self._ref}: {method} {url}: HTTP {response.status_code}", ref=self._ref
            )
        return response

    def read_limited(
        self, url: str, *, accept: str, limit: int, ref: str, missing: str, keep_link: bool = False
    ) -> _Read:
        """GET `url` and return at most `limit` bytes; refuse more before reading them all."""
        response = self.do_request(url, "GET", headers={"Accept": accept}, stream=True)
        link = response.headers.get("Link") if keep_link else None
        with response:
            if response.status_code == 404:
                raise errors.NotFound(f"{ref}: {missing} was not found", ref=ref)
            _expect_success(response, ref=ref, what=f"GET {url}")
            announced = response.headers.get("Content-Length")
            if announced is not None and announced.isdigit() and int(announced) > limit:
                raise errors.TooLarge(
                    f"{ref}: {announced} bytes exceeds the limit of {limit} bytes",
                    limit=limit,
                    size=int(announced),
                    ref=ref,
                )
            try:
                data: bytes = response.raw.read(limit + 1, decode_content=True)
            except (requests.RequestException, OSError) as exc:
                raise errors.Unavailable(f"{ref}: reading {url} failed: {exc}", ref=ref) from exc
        if len(data) > limit:
            raise errors.TooLarge(
                f"{ref}: the content exceeds the limit of {limit} bytes", limit=limit, ref=ref
            )
        return _Read(data, link)

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        try:
            response: requests.Response = self.session.request(
                method, url, timeout=self._timeout, verify=self._tls_verify, **kwargs
            )
            return response
        except requests.exceptions.SSLError as exc:
            raise errors.ProtocolError(
                f"{self._ref}: {method} {url}: TLS failed: {exc}", ref=self._ref
            ) from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise errors.Unavailable(
                f"{self._ref}: {method} {url}: {_reason(exc)}", ref=self._ref
            ) from exc

    def _answer(self, challenge: str, *, url: str) -> str:
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if not self._has_credentials:
                raise errors.AuthenticationFailed(
                    f"{self._ref}: the registry requires credentials and none were given",
                    ref=self._ref,
                )
            return f"Basic {self.auth._basic_auth}"
        if scheme == "bearer":
            header = oras.auth.utils.parse_auth_header(challenge)
            try:
                token = self.auth.request_token(header)
            except (requests.ConnectionError, requests.Timeout) as exc:
                raise errors.Unavailable(
                    f"{self._ref}: token service {header.realm}: {_reason(exc)}", ref=self._ref
                ) from exc
            if not token:
                raise errors.AuthenticationFailed(
                    f"{self._ref}: the token service {header.realm} refused "
                    + ("the credentials" if self._has_credentials else "an anonymous token"),
                    ref=self._ref,
                )
            return f"Bearer {token}"
        raise errors.AuthenticationFailed(
            f"{self._ref}: unsupported authentication challenge {challenge!r}", ref=self._ref
        )

    def _auth_message(self, status: int, url: str) -> str:
        if status == 403:
            return f"{self._ref}: access denied to {url} (HTTP 403)"
        if self._has_credentials:
            return f"{self._ref}: the registry rejected the credentials (HTTP 401 from {url})"
        return f"{self._ref}: the registry requires credentials and none were given (HTTP 401)"


class _Read:
    """A bounded read: the body, and the `Link` header when a page of a list was asked for."""

    __slots__ = ("data", "link")

    def __init__(self, data: bytes, link: str | None) -> None:
        self.data = data
        self.link = link


def _tag_names(page: bytes, *, ref: str) -> list[str]:
    """The `tags` of one page of a tag list (`null` when the repository has none)."""
    try:
        document = json.loads(page)
    except ValueError as exc:
        raise errors.ProtocolError(f"{ref}: the tag list is not JSON", ref=ref) from exc
    tags = document.get("tags") if isinstance(document, dict) else None
    if tags is None:
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise errors.ProtocolError(f"{ref}: the tag list has no list of tags", ref=ref)
    return list(tags)


def _next_page(url: str, link: str | None) -> str | None:
    """The next page the distribution spec's `Link: <…>; rel="next"` names, if any."""
    if not link or 'rel="next"' not in link:
        return None
    target = link.split(";", 1)[0].strip().strip("<>")
    return urllib.parse.urljoin(url, target)


def _container_name(ref: references.OciRef, *, tag_only: bool = False) -> str:
    name = f"{ref.host}/{ref.repository}:{ref.tag or DEFAULT_TAG}"
    return name if tag_only or ref.digest is None else f"{name}@{ref.digest}"


def _upload_blobs(
    registry: _Registry,
    container: Any,
    layer: artifacts.Descriptor,
    content: bytes,
    *,
    ref: str,
) -> None:
    """Upload an artifact's one layer and the empty config its manifest names (oras uploads
    blobs from files, so each passes through a private temporary directory)."""
    with tempfile.TemporaryDirectory(prefix="plnt-push-") as tmp:
        for descriptor, data in (
            (layer, content),
            (artifacts.config_descriptor(), artifacts.EMPTY_CONFIG),
        ):
            path = Path(tmp) / digests.hex_of(descriptor.digest)
            path.write_bytes(data)
            response = registry.upload_blob(str(path), container, descriptor.to_json())
            _expect_success(response, ref=ref, what=f"uploading blob {descriptor.digest}")


def _expect_success(response: requests.Response, *, ref: str, what: str) -> None:
    if response.status_code in (200, 201, 202):
        return
    detail = response.text[:300].strip()
    raise errors.ProtocolError(
        f"{ref}: {what}: HTTP {response.status_code} {detail}".rstrip(), ref=ref
    )


def _is_loopback(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    return text[:300]
