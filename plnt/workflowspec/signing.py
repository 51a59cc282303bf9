"""Signing a spec or dataset on publish: OpenSSF model-signing's format, made by its library.

Why model-signing (`model_signing` on PyPI, 1.1.x): it is the format the model supply chain
converged on (a Sigstore bundle, v0.3, carrying a DSSE envelope over an in-toto statement
whose resource is the artifact's sha256), its key and certificate modes work without any
network (no transparency log, no Fulcio), and `cosign`/`model_signing verify` read the same
bundles. plnt writes none of the format itself: this module hands the library the bytes and
the key, and stores what it returns beside the artifact (`sources.publish(signature=…)`).
docs/dependencies.md says why this library; docs/security.md what a signature protects.

The library signs files, so the bytes and the bundle pass through a private temporary
directory; the resource it records for a single file is `.` with the file's sha256, so the
name of the file does not matter to a verifier.

Errors: `SigningFailed` (a key or certificate that cannot sign), naming the file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path


class SigningFailed(ValueError):
    """The key, certificate or chain cannot sign (unreadable, unsupported, not a pair)."""


def sign(
    data: bytes,
    *,
    key: Path,
    certificate: Path | None = None,
    chain: Sequence[Path] = (),
) -> bytes:
    """The signature bundle of `data`: by the EC private key `key` (PEM), with `certificate`
    (and the intermediate/root `chain`) embedded when given, so a verifier needs only the CA.

    model-signing 1.1 insists on a non-empty chain file; a leaf issued straight by the CA
    has none, so the leaf stands in for it (a verifier builds the path to its own CA).
    """
    # Deferred: model_signing imports sigstore and OpenSSL (a third of a second).
    from model_signing import signing as model_signing

    config = model_signing.Config()  # type: ignore[no-untyped-call]
    try:
        if certificate is None:
            config.use_elliptic_key_signer(private_key=key)
        else:
            config.use_certificate_signer(
                private_key=key,
                signing_certificate=certificate,
                certificate_chain=chain or (certificate,),
            )
    except (OSError, ValueError, TypeError) as error:
        raise SigningFailed(f"cannot sign with {key}: {error}") from error
    with tempfile.TemporaryDirectory(prefix="plnt-sign-") as tmp:
        artifact, bundle = Path(tmp) / "artifact", Path(tmp) / "signature.sigstore.json"
        artifact.write_bytes(data)
        try:
            config.sign(artifact, bundle)
        except (OSError, ValueError, TypeError) as error:
            raise SigningFailed(f"cannot sign with {key}: {error}") from error
        return bundle.read_bytes()
