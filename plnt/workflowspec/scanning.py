"""Scanning a source for workflow specs: every tag of an OCI repository or layout, every
key under an S3 prefix, each resolved to its digest, read, verified and parsed.

What the workflow catalog lists (`plnt.registry.workflows`). A source is named as a
reference without a tag (`oci://HOST/REPO`, `oci-layout:PATH`) or with one (only that
tag), `s3://BUCKET/PREFIX` (every `.yaml`, `.yml` or `.json` key under it), or
`oci-layout:*` (every layout directly under the layout root). A signature's tag (`sha256-….sig`) is
no version of its own. A tag that holds an
evaluation dataset (`artifacts.DATASET`, pushed beside the specs) is no workflow and is
left out; under S3, where keys carry no artifact type, keep datasets under another prefix
or name them `.jsonl`. A relative layout path is read inside the layout root and named
relative in the references found, as a WorkflowRun names it (the deploy worker resolves
it the same way).

A spec is read once per digest: a later scan resolves each tag to its digest (an OCI
manifest, a layout's index; for S3 the object's ETag names the bytes it read last) and
reads the bytes only for a digest it has not seen. Bytes are verified against the digest
before they are parsed, as a pull verifies them.

With trusted signers (the server's `--trusted-signer`), each spec's signature is looked up
beside it and checked against them once per digest: `Found.signed_by` names the first that
verifies, so the catalog lists who published each version. An unsigned or untrusted spec
is still listed (the pull, not the catalog, enforces the policy).

Errors: nothing raises out of `Scanner.scan` for a failing store or a broken spec. A
source that cannot be listed is a `SourceScan.error`; a tag that cannot be resolved,
read, verified or parsed is a `Found` with its `problem` (a reason such as
`DigestMismatch` or `InvalidSpec`, and the message), so the catalog lists it with why.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from plnt.workflowspec import digests, documents, errors, model, references, signers, verifying
from plnt.workflowspec.sources import artifacts, settings
from plnt.workflowspec.sources.oci_layout import LAYOUT_FILE, OciLayoutSource
from plnt.workflowspec.sources.oci_registry import OciRegistrySource
from plnt.workflowspec.sources.s3 import S3Source

EVERY_LAYOUT = "oci-layout:*"
"""Every layout directly under the layout root (standalone: STATE/layouts)."""
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
INVALID_SPEC = "InvalidSpec"
"""The reason of a spec that was read and verified but does not parse or check."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a source or a tag could not be listed: a CamelCase reason and a message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Found:
    """One spec at a source: where (`location`: the tag or key), which bytes, and what
    they hold or why they could not be used."""

    location: str
    ref: str
    """The reference to deploy it by: pinned (`…@sha256:…`) when the digest is known."""
    digest: str | None
    workflow: model.Workflow | None
    problem: Problem | None
    name_hint: str
    """A DNS-1123 name for it: the spec's `metadata.name` when it has a readable one, else
    derived from where it was found (repository, key or tag)."""
    signed_by: str | None = None
    """The trusted signer whose signature of the bytes verified, if any."""


@dataclass(frozen=True, slots=True)
class SourceScan:
    """What one source holds, or why it could not be listed."""

    source: str
    found: tuple[Found, ...] = ()
    error: Problem | None = None


@dataclass(frozen=True, slots=True)
class _Read:
    workflow: model.Workflow | None
    problem: Problem | None
    name: str | None
    signed_by: str | None = None


def problem_of(error: Exception) -> Problem:
    """A source or spec error as a Problem named by its class (`NotFound`, `TooLarge` …)."""
    if isinstance(error, documents.WorkflowSpecError):
        return Problem(INVALID_SPEC, str(error))
    return Problem(type(error).__name__, str(error))


class Scanner:
    """Scans sources, remembering what it read by digest (bounded) between scans."""

    def __init__(
        self,
        config: settings.SourceSettings,
        *,
        layout_root: Path | None = None,
        concurrency: int = 4,
        remembered: int = 4096,
        trusted: Sequence[signers.Signer] = (),
    ) -> None:
        self.layout_root = layout_root
        self.trusted = tuple(trusted)
        self._registry = OciRegistrySource(config.registry, config.limits)
        self._layouts = OciLayoutSource(config.limits)
        self._s3 = S3Source(config.s3, config.limits)
        self._slots = asyncio.Semaphore(concurrency)
        self._read: collections.OrderedDict[str, _Read] = collections.OrderedDict()
        self._etags: collections.OrderedDict[tuple[str, str, str], str] = collections.OrderedDict()
        self._remembered = remembered

    async def scan(self, source: str) -> SourceScan:
        """Every spec at `source` (see the module docstring); never raises a SourceError."""
        try:
            if source == EVERY_LAYOUT:
                found = await self._every_layout()
            elif source.startswith(references.S3_SCHEME):
                found = await self._s3_prefix(source)
            else:
                ref = references.parse(source)
                if isinstance(ref, references.OciRef):
                    found = await self._tagged(ref, self._registry)
                elif isinstance(ref, references.LayoutRef):
                    found = await self._tagged(ref, self._layouts)
                else:  # pragma: no cover - s3 is handled above
                    raise errors.InvalidReference(f"unsupported source {source!r}", ref=source)
        except errors.SourceError as error:
            return SourceScan(source, error=problem_of(error))
        return SourceScan(source, tuple(found))

    # -- sources ------------------------------------------------------------------------

    async def _tagged(
        self, ref: references.OciRef | references.LayoutRef, store: Any
    ) -> list[Found]:
        """Every tag of a repository or layout (or the one tag `ref` names) but datasets'."""
        readable = self._readable(ref)
        tags = [ref.tag] if ref.tag else await store.tags(readable)
        found = await asyncio.gather(
            *(
                self._tag(ref, readable, tag, store)
                for tag in tags
                if tag is not None and not artifacts.is_signature_tag(tag)
            )
        )
        return [one for one in found if one is not None]

    async def _tag(
        self,
        ref: references.OciRef | references.LayoutRef,
        readable: references.OciRef | references.LayoutRef,
        tag: str,
        store: Any,
    ) -> Found | None:
        """What `tag` holds; None for an evaluation dataset, which is no workflow to list."""
        named = dataclasses.replace(ref, tag=tag, digest=None)
        at = dataclasses.replace(readable, tag=tag, digest=None)
        hint = _location_name(ref, tag)
        try:
            async with self._slots:
                layer: artifacts.Descriptor = await store.resolve(at)
        except errors.SourceError as error:
            return Found(tag, str(named), None, None, problem_of(error), hint)
        if layer.media_type != artifacts.WORKFLOW_MEDIA_TYPE:
            return None
        digest = layer.digest
        pinned = str(references.pinned(named, digest))
        read = await self._spec(
            digest,
            lambda: store.fetch(at, digest=digest),
            lambda: store.fetch_signature(at, digest),
        )
        return Found(
            tag, pinned, digest, read.workflow, read.problem, read.name or hint, read.signed_by
        )

    async def _every_layout(self) -> list[Found]:
        root = self.layout_root
        if root is None:
            raise errors.InvalidReference(
                f"{EVERY_LAYOUT}: this server has no layout root", ref=EVERY_LAYOUT
            )
        layouts = await asyncio.to_thread(_layouts_under, root)
        found: list[Found] = []
        for name in layouts:
            ref = references.LayoutRef(path=name)
            try:
                found += await self._tagged(ref, self._layouts)
            except errors.SourceError:
                continue  # a directory torn while it was listed: the next scan sees it whole
        return found

    async def _s3_prefix(self, source: str) -> list[Found]:
        bucket, _, prefix = source[len(references.S3_SCHEME) :].partition("/")
        if not bucket:
            raise errors.InvalidReference(
                f"invalid S3 source {source!r}: expected s3://BUCKET/PREFIX", ref=source
            )
        keys = await self._s3.keys(bucket, prefix)
        return list(
            await asyncio.gather(
                *(
                    self._s3_key(bucket, key, etag)
                    for key, etag in keys
                    if key.lower().endswith(SPEC_SUFFIXES)
                )
            )
        )

    async def _s3_key(self, bucket: str, key: str, etag: str) -> Found:
        ref = references.S3Ref(bucket=bucket, key=key)
        hint = _dns_name(Path(key).stem)
        seen = self._etags.get((bucket, key, etag))
        if seen is not None and seen in self._read:
            read = self._read[seen]
            pinned = str(references.pinned(ref, seen))
            return Found(
                key, pinned, seen, read.workflow, read.problem, read.name or hint, read.signed_by
            )
        try:
            async with self._slots:
                data = await self._s3.fetch(ref, digest=None)
        except errors.SourceError as error:
            return Found(key, str(ref), None, None, problem_of(error), hint)
        digest = digests.compute(data)
        self._remember(self._etags, (bucket, key, etag), digest)
        read = await self._spec(
            digest, lambda: _ready(data), lambda: self._s3.fetch_signature(ref, digest)
        )
        pinned = str(references.pinned(ref, digest))
        return Found(
            key, pinned, digest, read.workflow, read.problem, read.name or hint, read.signed_by
        )

    # -- specs --------------------------------------------------------------------------

    async def _spec(
        self,
        digest: str,
        fetch: Callable[[], Awaitable[bytes]],
        signature: Callable[[], Awaitable[bytes | None]],
    ) -> _Read:
        """The spec of `digest`, read (and verified) once; a failed read is not remembered,
        so the next scan tries again."""
        known = self._read.get(digest)
        if known is not None:
            self._read.move_to_end(digest)
            return known
        try:
            async with self._slots:
                data = await fetch()
            digests.verify(data, digest)
        except errors.SourceError as error:
            return _Read(None, problem_of(error), None)
        read = _parsed(data)
        if self.trusted and read.workflow is not None:
            read = dataclasses.replace(read, signed_by=await self._signer(data, digest, signature))
        self._remember(self._read, digest, read)
        return read

    async def _signer(
        self, data: bytes, digest: str, signature: Callable[[], Awaitable[bytes | None]]
    ) -> str | None:
        """The first trusted signer whose signature of `data` verifies (None: unsigned,
        unreadable, or by no one trusted: the catalog lists, the pull enforces)."""
        try:
            async with self._slots:
                bundle = await signature()
        except errors.SourceError:
            return None
        if bundle is None:
            return None
        for signer in self.trusted:
            try:
                verified = await asyncio.to_thread(
                    verifying.verify, data, bundle, signer=signer, digest=digest
                )
            except errors.SignatureError:
                continue
            return verified.signer
        return None

    def _remember(self, memo: collections.OrderedDict[Any, Any], key: Any, value: Any) -> None:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > self._remembered:
            memo.popitem(last=False)

    def _readable(
        self, ref: references.OciRef | references.LayoutRef
    ) -> references.OciRef | references.LayoutRef:
        """A layout read inside the layout root when its path is relative."""
        if not isinstance(ref, references.LayoutRef) or Path(ref.path).is_absolute():
            return ref
        if self.layout_root is None or ".." in Path(ref.path).parts:
            raise errors.InvalidReference(
                f"{ref}: a relative layout path needs the server's layout root", ref=str(ref)
            )
        return references.LayoutRef(path=str(self.layout_root / ref.path), tag=ref.tag)


def _parsed(data: bytes) -> _Read:
    try:
        workflow = documents.parse_workflow(data)
    except documents.WorkflowSpecError as error:
        return _Read(None, problem_of(error), _name_in(data))
    return _Read(workflow, None, workflow.metadata.name)


async def _ready(data: bytes) -> bytes:
    return data


def _layouts_under(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / LAYOUT_FILE).is_file())


_NAME = re.compile(model.NAME_PATTERN)


def _name_in(data: bytes) -> str | None:
    """`metadata.name` of a spec that does not check, when it is there and a valid name."""
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return None
    meta = document.get("metadata") if isinstance(document, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and _NAME.fullmatch(name) else None


def _location_name(ref: references.OciRef | references.LayoutRef, tag: str) -> str:
    """A repository's last component (its tags are versions); a layout's tag (a layout
    holds many workflows, one per tag, as `make up` pushes the examples)."""
    if isinstance(ref, references.OciRef):
        return _dns_name(ref.repository.rsplit("/", 1)[-1])
    return _dns_name(tag)


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")[:63].strip("-.")
    return name or "unnamed"
