"""Verifying a pulled spec's or dataset's signature, offline, before anything runs.

The check of the signature itself is model-signing's (`model_signing.verifying`, the
library that made it, see `signing`): the DSSE signature over the in-toto statement, the
statement's resource against the bytes' sha256, and for certificates the chain up to the
trusted CA. Around it this module adds what a deploy needs and the library leaves to its
caller:

* *which* signer: a key bundle names its key's fingerprint, which must be the trusted
  key's; a certificate must name the identity the signer requires (its e-mail, URI or DNS
  name, else its common name);
* *now*: model-signing checks a certificate chain at the moment the leaf was issued (a
  keyless signature's time comes from a transparency log, and there is none offline), so a
  leaf or CA that has expired, or is not valid yet, is refused here against the clock;
* one error tree (`errors.SignatureError`), each naming the digest and the signer expected,
  so the deploy's reason says what was refused and whom it waited for.

All of it is local: no transparency log, no certificate authority, no network. The library
reads files, so the bytes, the bundle and the trust root pass through a private temporary
directory (a few milliseconds for a spec; `python -m plnt.bench saga` prints the cost).
"""

from __future__ import annotations

import base64
import binascii
import json
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import exceptions as crypto_exceptions
from cryptography import x509
from cryptography.x509.oid import NameOID

from plnt.workflowspec import errors
from plnt.workflowspec.signers import Signer


@dataclass(frozen=True)
class Verified:
    """A signature that holds: who signed (as the run's history records it) and what."""

    signer: str
    digest: str


def verify(
    data: bytes,
    bundle: bytes | None,
    *,
    signer: Signer,
    digest: str,
    ref: str = "",
    now: datetime | None = None,
) -> Verified:
    """Check that `bundle` is `signer`'s signature of `data` (whose sha256 is `digest`).

    `errors.SignatureMissing` without a bundle, `errors.SignatureInvalid` for one that is
    malformed or covers other bytes, `errors.SignerUntrusted` for one by another key, an
    uncertified or expired certificate, or another identity.
    """
    expected = signer.describe()
    where = ref or digest

    def refuse(kind: type[errors.SignatureError], why: str) -> errors.SignatureError:
        return kind(
            f"{where}: {why}; {digest} must be signed by {expected} and was not installed",
            digest=digest,
            expected=expected,
            ref=ref,
        )

    if bundle is None:
        raise refuse(errors.SignatureMissing, "no signature is stored beside the artifact")
    material = _verification_material(bundle)
    if material is None:
        raise refuse(errors.SignatureInvalid, "the stored signature is not a Sigstore bundle")
    if signer.public_key is not None:
        hint = (material.get("publicKey") or {}).get("hint")
        if not isinstance(hint, str) or hint != signer.key_id:
            found = f"key sha256:{hint[:16]}" if isinstance(hint, str) else "no key"
            raise refuse(errors.SignerUntrusted, f"signed by {found}, not the trusted key")
        identity = signer.describe()
    else:
        chain = _certificates(material)
        if not chain:
            raise refuse(errors.SignerUntrusted, "the signature carries no certificate")
        moment = now or datetime.now(UTC)
        trusted = x509.load_pem_x509_certificates(signer.ca or b"")
        for certificate in (*chain, *trusted):
            if not certificate.not_valid_before_utc <= moment <= certificate.not_valid_after_utc:
                raise refuse(
                    errors.SignerUntrusted,
                    f"certificate {_common_name(certificate)!r} is valid from "
                    f"{certificate.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} to "
                    f"{certificate.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}, not now",
                )
        names = _identities(chain[0])
        if signer.identity not in names:
            raise refuse(
                errors.SignerUntrusted,
                f"signed by {', '.join(names) or 'an unnamed certificate'}, not {signer.identity}",
            )
        identity = f"{signer.identity} (CA {signer.name})"
    _library_verify(data, bundle, signer=signer, refuse=refuse)
    return Verified(signer=identity, digest=digest)


def _library_verify(data: bytes, bundle: bytes, *, signer: Signer, refuse: Any) -> None:
    """model-signing's own check, its exceptions sorted into the error tree."""
    # Deferred: model_signing imports sigstore and OpenSSL (a third of a second, once).
    from model_signing import verifying as model_verifying
    from OpenSSL import crypto

    with tempfile.TemporaryDirectory(prefix="plnt-verify-") as tmp:
        root = Path(tmp)
        (root / "artifact").write_bytes(data)
        (root / "signature.sigstore.json").write_bytes(bundle)
        (root / "trust.pem").write_bytes(signer.public_key or signer.ca or b"")
        config = model_verifying.Config()  # type: ignore[no-untyped-call]
        if signer.public_key is not None:
            config.use_elliptic_key_verifier(public_key=root / "trust.pem")
        else:
            config.use_certificate_verifier(certificate_chain=[root / "trust.pem"])
        try:
            config.verify(root / "artifact", root / "signature.sigstore.json")
        except crypto.X509StoreContextError as error:
            raise refuse(
                errors.SignerUntrusted, f"the certificate is not certified by the CA: {error}"
            ) from error
        except crypto_exceptions.InvalidSignature as error:
            raise refuse(
                errors.SignatureInvalid, "the signature does not verify (tampered)"
            ) from error
        except (ValueError, KeyError, TypeError) as error:
            message = str(error)
            if "cannot be used for signing" in message:
                raise refuse(errors.SignerUntrusted, message) from error
            raise refuse(
                errors.SignatureInvalid, f"the signature does not cover these bytes: {message}"
            ) from error


def _verification_material(bundle: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(bundle)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("dsseEnvelope"), dict):
        return None
    material = document.get("verificationMaterial")
    return material if isinstance(material, dict) else None


def _certificates(material: dict[str, Any]) -> list[x509.Certificate]:
    """The bundle's certificate chain, leaf first (empty when it has none or it is bad)."""
    listed = (material.get("x509CertificateChain") or {}).get("certificates") or []
    chain = []
    for entry in listed:
        try:
            chain.append(x509.load_der_x509_certificate(base64.b64decode(entry["rawBytes"])))
        except (KeyError, TypeError, ValueError, binascii.Error):
            return []
    return chain


def _identities(certificate: x509.Certificate) -> list[str]:
    """The names a certificate certifies: its SANs (e-mail, URI, DNS), else its CN."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [
            *san.get_values_for_type(x509.RFC822Name),
            *san.get_values_for_type(x509.UniformResourceIdentifier),
            *san.get_values_for_type(x509.DNSName),
        ]
    except x509.ExtensionNotFound:
        names = []
    return names or [_common_name(certificate)]


def _common_name(certificate: x509.Certificate) -> str:
    found = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(found[0].value) if found else certificate.subject.rfc4514_string()
