"""Content negotiation: which representation a client asked for in `Accept` and `Content-Type`.

plnt speaks JSON only. Clients often list protobuf first; we pick the first
JSON entry instead of answering 406 (KUBE-API.md §0). The `as=` parameters
select server-side Tables, PartialObjectMetadata and aggregated discovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plnt.api import errors

JSON = "application/json"
DISCOVERY_V2_PARAMS = {"g": "apidiscovery.k8s.io", "v": "v2", "as": "APIGroupDiscoveryList"}
DISCOVERY_V2_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)


@dataclass(frozen=True, slots=True)
class MediaRange:
    """One entry of an Accept header."""

    type: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def is_json(self) -> bool:
        return self.type in (JSON, "application/*", "*/*")


def parse_accept(header: str | None) -> list[MediaRange]:
    """Entries in the client's order (kube clients list preference by order, not q)."""
    if not header:
        return [MediaRange("*/*")]
    ranges: list[MediaRange] = []
    for item in header.split(","):
        pieces = [p.strip() for p in item.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        ranges.append(MediaRange(pieces[0].lower(), params))
    return ranges or [MediaRange("*/*")]


@dataclass(frozen=True, slots=True)
class Representation:
    """What to send: a plain object, a Table, or PartialObjectMetadata(List)."""

    kind: str = "Object"  # Object | Table | PartialObjectMetadata | PartialObjectMetadataList
    version: str = "v1"


def choose(header: str | None, *, allow_table: bool = True) -> Representation:
    """The first acceptable representation; 406 when nothing JSON is acceptable."""
    for media in parse_accept(header):
        if not media.is_json:
            continue
        wanted = media.params.get("as")
        if wanted is None:
            return Representation()
        group, version = media.params.get("g"), media.params.get("v", "v1")
        if group != "meta.k8s.io" or version not in ("v1", "v1beta1"):
            continue
        if wanted == "Table" and allow_table:
            return Representation("Table", version)
        if wanted in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return Representation(wanted, version)
    raise errors.NotAcceptable(
        "only the following media types are accepted: application/json, "
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    )


def wants_discovery_v2(header: str | None) -> bool | None:
    """True for the v2 aggregated document, False for legacy JSON, None if neither fits."""
    for media in parse_accept(header):
        if media.type == JSON and all(
            media.params.get(k) == v for k, v in DISCOVERY_V2_PARAMS.items()
        ):
            return True
        if media.is_json and "as" not in media.params:
            return False
    return None


def content_type(header: str | None) -> str:
    """The bare media type of a request body (parameters such as charset removed)."""
    if not header:
        return ""
    return header.split(";", 1)[0].strip().lower()
