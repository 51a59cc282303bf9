"""Workflow (plnt.work/v1): one workflow of the catalog, as the configured sources hold it.

Read-only: the API server writes these from what its background refresh finds in the
sources an admin configured (OCI repositories and their tags, S3 prefixes, OCI layouts),
grouped by the spec's `metadata.name`. `spec` says what the workflow is (its versions,
each pinned to a digest, and what the newest valid one describes: inputs, steps, the
backends it needs); `status` says how the last refresh went (its time, the sources that
failed, the versions that do not parse or verify). A WorkflowRun deploys a version by its
`ref` and `digest` (docs/catalog.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from plnt.api import names
from plnt.api.base import WireModel
from plnt.api.meta import ObjectMeta

KIND = names.WORKFLOW_KIND
PLURAL = names.WORKFLOWS


class WorkflowVersion(WireModel):
    """One version of the workflow at one source: where it is and which bytes it is."""

    version: str = Field(description="The spec's metadata.version, else the tag (or key).")
    tag: str = Field(description="The tag in the repository or layout, or the S3 key.")
    source: str = Field(description="The configured source it was found in.")
    ref: str = Field(
        description="The reference a WorkflowRun deploys it by, pinned to the digest when known."
    )
    digest: str | None = Field(
        default=None, description="sha256 of the spec's bytes (absent when it could not be read)."
    )
    valid: bool = Field(description="Whether it parses and verifies (else see status).")
    signed_by: str | None = Field(
        default=None,
        description="The server's trusted signer whose signature of these bytes verified.",
    )


class WorkflowStep(WireModel):
    """One step of the newest valid version, as the catalog summarises it."""

    id: str
    kind: Literal["model", "http", "transform"]
    needs: list[str] = Field(default_factory=list)
    mode: Literal["chat", "completion"] | None = Field(
        default=None, description="Model steps: chat or completion."
    )
    model: str | None = Field(default=None, description="Model steps: the model it asks for.")


class BackendRequirement(WireModel):
    """A backend the workflow needs: a model API, in one mode, for some steps."""

    kind: Literal["model"] = "model"
    mode: Literal["chat", "completion"] = Field(
        description="chat: a chat completions API; completion: a text completions API."
    )
    model: str | None = Field(
        default=None, description="The model the steps ask for; absent: the backend's own."
    )
    steps: list[str] = Field(description="The steps that call it.")


class WorkflowCatalogSpec(WireModel):
    """What the catalog found: every version, and what the newest valid one describes."""

    latest_version: str | None = Field(
        default=None, description="The newest valid version (absent when none is valid)."
    )
    versions: list[WorkflowVersion] = Field(
        default_factory=list, description="Every version found, newest first."
    )
    description: str | None = Field(default=None, description="The newest valid version's.")
    inputs: dict[str, Any] | None = Field(
        default=None, description="JSON Schema of the inputs of the newest valid version."
    )
    steps: list[WorkflowStep] | None = Field(default=None, description="Its steps.")
    backends: list[BackendRequirement] | None = Field(
        default=None, description="The backends its steps need (none: it calls no model)."
    )
    chat_input: str | None = Field(
        default=None, description="The input the OpenAI-compatible endpoint fills."
    )


class SourceError(WireModel):
    """A source the last refresh could not list; what it listed before is kept."""

    source: str
    reason: str
    message: str


class VersionError(WireModel):
    """A version that does not parse, check or verify, and why."""

    source: str
    tag: str
    digest: str | None = None
    reason: str = Field(description="InvalidSpec, DigestMismatch, NotFound, TooLarge …")
    message: str


class WorkflowCatalogStatus(WireModel):
    """How the catalog's last refresh went for this workflow's namespace."""

    last_refresh_time: str | None = Field(
        default=None, description="When the catalog last finished reading its sources."
    )
    source_errors: list[SourceError] | None = Field(
        default=None, description="Sources serving this namespace that the last refresh failed."
    )
    version_errors: list[VersionError] | None = Field(
        default=None, description="Versions listed that cannot be deployed, and why."
    )


class Workflow(WireModel):
    """A workflow of the catalog (read-only; written by the API server's refresh)."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["Workflow"] = "Workflow"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkflowCatalogSpec = Field(default_factory=WorkflowCatalogSpec)
    status: WorkflowCatalogStatus | None = None


def short_digest(digest: str | None) -> str | None:
    """`sha256:0123456789ab`: the first 12 hex digits, as image tools print them."""
    if not digest:
        return None
    algorithm, _, hex_part = digest.partition(":")
    return f"{algorithm}:{hex_part[:12]}" if hex_part else digest


def latest(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The newest valid version entry of a served Workflow, if any."""
    spec = obj.get("spec") or {}
    wanted = spec.get("latestVersion")
    for version in spec.get("versions") or []:
        if version.get("valid") and version.get("version") == wanted:
            return dict(version)
    return None


def run_manifest(
    workflow: dict[str, Any], *, version: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The WorkflowRun that deploys a catalog Workflow's version (default: the newest valid
    one), pinned to its digest: what the UI's Deploy action and `plnt catalog NAME
    --manifest` fill in. ValueError when that version is missing, invalid or unread."""
    meta = workflow.get("metadata") or {}
    versions = (workflow.get("spec") or {}).get("versions") or []
    if version is None:
        chosen = latest(workflow)
    else:
        chosen = next(
            (v for v in versions if version in (v.get("version"), v.get("tag")) and v.get("valid")),
            None,
        )
    if chosen is None or not chosen.get("digest"):
        wanted = f"version {version!r}" if version else "a valid version"
        raise ValueError(f"workflow {meta.get('name')!r} has no {wanted} to deploy")
    ref = str(chosen["ref"]).rsplit("@", 1)[0]  # the digest is its own field
    run_meta: dict[str, Any] = {"name": name or meta.get("name")}
    if meta.get("namespace"):
        run_meta["namespace"] = meta["namespace"]
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": run_meta,
        "spec": {"workflow": {"ref": ref, "digest": chosen["digest"]}, "replicas": 1},
    }
