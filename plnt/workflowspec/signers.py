"""Whom a verifier trusts: signers, the policy of a server or worker, and a run's `verify`.

A digest pins *what* runs; a signature says *who* published it. A `Signer` is one root of
trust: an EC public key, or a CA whose certificates must name one identity. A
`SignaturePolicy` is what the operator of `plnt serve`/`plnt worker`/`plnt up` trusts
(`--trusted-signer NAME=PEM`, the chart's signers ConfigMap) and which namespaces must have
signed artifacts (`--require-signatures`). A WorkflowRun's `spec.workflow.verify` names the
signer its spec must be signed by: one of the policy's by name (`signer`), or, where no
policy binds the namespace, a key or CA file of its own.

Why a run under the policy may only name the policy's signers: the policy protects the
cluster from whoever may write WorkflowRuns; a run that brought its own key would sign its
own permission slip. `admission_causes` refuses such a run at the write (422, naming
`spec.workflow.verify`); `required` says at the pull which signer must have signed.

Pure, apart from `Signer.from_file`/`SignaturePolicy.from_files`, which read PEM files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from plnt.workflowspec import errors

VERIFY_FIELD = "spec.workflow.verify"
"""The WorkflowRun field that names the required signer (admission names it in errors)."""


@dataclass(frozen=True)
class Signer:
    """One root of trust: `public_key` (PEM), or `ca` (PEM certificates) with `identity`,
    the e-mail, URI, DNS name or common name the signing certificate must carry."""

    name: str
    public_key: bytes | None = field(default=None, repr=False)
    ca: bytes | None = field(default=None, repr=False)
    identity: str | None = None

    def __post_init__(self) -> None:
        if (self.public_key is None) == (self.ca is None):
            raise ValueError(f"signer {self.name!r}: give a public key or a CA, exactly one")
        if self.ca is not None and not self.identity:
            raise ValueError(f"signer {self.name!r}: a CA needs the identity it must certify")

    @classmethod
    def from_pem(cls, name: str, pem: bytes, *, identity: str | None = None) -> Signer:
        """A signer from PEM text: certificates make a CA (then `identity` is required),
        a public key a key signer. `ValueError` naming the signer when it is neither."""
        if b"-----BEGIN CERTIFICATE-----" in pem:
            try:
                x509.load_pem_x509_certificates(pem)
            except ValueError as error:
                raise ValueError(f"signer {name!r}: not a PEM certificate: {error}") from error
            return cls(name, ca=pem, identity=identity)
        try:
            serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"signer {name!r}: neither a PEM public key nor PEM certificates"
            ) from error
        return cls(name, public_key=pem)

    @classmethod
    def from_file(cls, name: str, path: Path, *, identity: str | None = None) -> Signer:
        """`from_pem` of a file (`ValueError` naming the file when it cannot be read)."""
        try:
            pem = path.read_bytes()
        except OSError as error:
            raise ValueError(f"signer {name!r}: cannot read {path}: {error}") from error
        return cls.from_pem(name, pem, identity=identity)

    @property
    def key_id(self) -> str | None:
        """The key's fingerprint as model-signing bundles name it (sha256 of its PEM)."""
        if self.public_key is None:
            return None
        pem = serialization.load_pem_public_key(self.public_key).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return hashlib.sha256(pem).hexdigest()

    def describe(self) -> str:
        """How errors and the run's history name this signer."""
        if self.key_id is not None:
            return f"{self.name} (key sha256:{self.key_id[:16]})"
        return f"{self.name} ({self.identity} certified by the CA)"


@dataclass(frozen=True)
class SignaturePolicy:
    """The signers a server or worker trusts, and where signatures are required.

    `required_in`: the namespaces whose runs must have signed specs and datasets; `None`
    binds none, `"*"` (in the set) binds every namespace.
    """

    signers: Mapping[str, Signer] = field(default_factory=dict)
    required_in: frozenset[str] | None = None

    def binds(self, namespace: str) -> bool:
        """Whether runs in `namespace` must have signed artifacts."""
        return self.required_in is not None and (
            "*" in self.required_in or namespace in self.required_in
        )

    @classmethod
    def from_files(
        cls,
        signers: Iterable[str],
        *,
        required_in: Iterable[str] | None = None,
        identities: Mapping[str, str] | None = None,
    ) -> SignaturePolicy:
        """The policy of `NAME=PATH` entries (a public key or a CA file each; a CA's
        identity from `identities[NAME]`) and the namespaces it binds (`*`: all).
        `ValueError` naming the entry that is wrong."""
        found: dict[str, Signer] = {}
        for entry in signers:
            name, sep, path = entry.partition("=")
            if not sep or not name or not path:
                raise ValueError(f"trusted signer {entry!r}: expected NAME=PATH")
            found[name] = Signer.from_file(name, Path(path), identity=(identities or {}).get(name))
        required = None if required_in is None else frozenset(required_in)
        if required and not found:
            raise ValueError("signatures are required but no trusted signer is configured")
        return cls(signers=found, required_in=required)


def admission_causes(
    verify: Any, *, namespace: str, policy: SignaturePolicy | None
) -> list[tuple[str, str]]:
    """(field, message) of every reason a run's `verify` cannot be satisfied here.

    Only where the policy binds the namespace: the run must name a trusted signer. Elsewhere
    the schema's rules are all (a file named by the run is read by the worker at the pull).
    """
    if policy is None or not policy.binds(namespace):
        return []
    trusted = ", ".join(sorted(policy.signers)) or "none configured"
    if not isinstance(verify, dict) or not verify:
        return [
            (
                VERIFY_FIELD,
                f"Required value: signed workflow specs are required in namespace "
                f"{namespace!r}: name a trusted signer in {VERIFY_FIELD}.signer "
                f"(trusted: {trusted})",
            )
        ]
    name = verify.get("signer")
    if not isinstance(name, str) or name not in policy.signers:
        given = f"{name!r} is not trusted" if name else "no trusted signer is named"
        return [
            (
                f"{VERIFY_FIELD}.signer",
                f"Invalid value: {given}; in namespace {namespace!r} only the server's "
                f"trusted signers may sign (trusted: {trusted})",
            )
        ]
    return []


def required(
    verify: Mapping[str, Any] | None,
    *,
    namespace: str | None,
    policy: SignaturePolicy | None,
    digest: str,
    ref: str = "",
) -> Signer | None:
    """The signer whose signature the artifact at `digest` must carry, or None (unsigned
    artifacts are fine: no policy binds the namespace and the run names none).

    `errors.SignerUntrusted` when the policy binds the namespace and the run names none of
    its signers (a run admitted before the policy), or when a named signer is unknown or its
    file cannot be read: the deploy fails for good, as for a bad signature.
    """
    bound = policy is not None and namespace is not None and policy.binds(namespace)
    if not verify:
        if not bound:
            return None
        raise errors.SignerUntrusted(
            f"{ref or digest}: signatures are required in namespace {namespace!r} and the run "
            f"names no trusted signer ({VERIFY_FIELD}); {digest} was not installed",
            digest=digest,
            expected="a trusted signer",
            ref=ref,
        )
    name = verify.get("signer")
    if name is not None:
        signer = policy.signers.get(str(name)) if policy is not None else None
        if signer is None:
            raise errors.SignerUntrusted(
                f"{ref or digest}: {VERIFY_FIELD}.signer {name!r} is not a signer this "
                f"worker trusts; {digest} was not installed",
                digest=digest,
                expected=str(name),
                ref=ref,
            )
        return signer
    if bound:
        raise errors.SignerUntrusted(
            f"{ref or digest}: in namespace {namespace!r} only the worker's trusted signers "
            f"may sign ({VERIFY_FIELD}.signer); {digest} was not installed",
            digest=digest,
            expected="a trusted signer",
            ref=ref,
        )
    return _own_signer(verify, digest=digest, ref=ref)


def _own_signer(verify: Mapping[str, Any], *, digest: str, ref: str) -> Signer:
    """The key or CA file a run names itself (standalone: a path on the worker)."""
    key = (verify.get("publicKey") or {}).get("file")
    ca = (verify.get("ca") or {}).get("file")
    source = key or ca
    try:
        if not source:
            raise ValueError(f"{VERIFY_FIELD} names no signer, key or CA")
        return Signer.from_file(
            str(source), Path(str(source)), identity=verify.get("identity") if ca else None
        )
    except ValueError as error:
        raise errors.SignerUntrusted(
            f"{ref or digest}: {error}; {digest} was not installed",
            digest=digest,
            expected=str(source or "a signer"),
            ref=ref,
        ) from error
