"""What a required signature adds to a deploy's pull: `python -m plnt.bench saga` prints it.

When a run names a signer (or the worker's policy requires one), the pull activity does two
things more than a plain pull, and only those are timed here, with the same code: it fetches
the signature stored beside the spec (`sources.fetch_signature`, here from an OCI layout on
disk as `plnt up` serves specs) and checks it offline (`verifying.verify`: model-signing's
DSSE check, the key's fingerprint, the statement's digest against the bytes). The spec is
the quickstart's example; the key is made for the run. A worker's first check also imports
model-signing (once per process, about 0.3 s; here the signing before it already did), so
the first is reported on its own; the target is for every later one. Nothing here imports
the sagas: the bench reaches plnt's code only below them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from plnt.bench.apiserver import percentile
from plnt.workflowspec import signers, signing, sources, verifying

TARGET_MS = 50.0
"""The most a required signature may add to one pull of a small spec (p95, warm)."""
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fanout.workflow.yaml"


@dataclass(frozen=True, slots=True)
class SignatureCost:
    """Added pull time, in milliseconds: the first check (imports included), then the rest."""

    spec_bytes: int
    first_ms: float
    added_ms: list[float]


async def measure(directory: Path, *, rounds: int) -> SignatureCost:
    """Sign the example into a layout under `directory`, then time `rounds` checks."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = directory / "bench.key", directory / "bench.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    data = EXAMPLE.read_bytes()
    ref = f"oci-layout:{directory / 'signed'}:bench"
    pinned = await sources.publish(data, ref, signature=signing.sign(data, key=private))
    digest = str(pinned.digest)
    signer = signers.Signer.from_file("bench", public)

    async def added() -> float:
        started = time.perf_counter()
        bundle = await sources.fetch_signature(ref, digest)
        await asyncio.to_thread(verifying.verify, data, bundle, signer=signer, digest=digest)
        return (time.perf_counter() - started) * 1000

    first = await added()
    return SignatureCost(len(data), first, [await added() for _ in range(rounds)])


def report(cost: SignatureCost) -> list[str]:
    """The lines `saga` prints."""
    p50, p95 = percentile(cost.added_ms, 0.5), percentile(cost.added_ms, 0.95)
    verdict = "ok" if p95 <= TARGET_MS else "MISSED"
    return [
        f"signature check per pull ({cost.spec_bytes} B spec, {len(cost.added_ms)} pulls): "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (target <= {TARGET_MS:.0f} ms: {verdict}); "
        f"first {cost.first_ms:.0f} ms"
    ]


def as_json(cost: SignatureCost) -> dict[str, Any]:
    return {
        "signature_pull_p50_ms": round(percentile(cost.added_ms, 0.5), 2),
        "signature_pull_p95_ms": round(percentile(cost.added_ms, 0.95), 2),
        "signature_pull_first_ms": round(cost.first_ms, 1),
        "signature_pull_target_ms": TARGET_MS,
    }
