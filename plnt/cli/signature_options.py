"""The signature policy `plnt serve`, `plnt worker` and `plnt up` share: whom they trust.

`--trusted-signer NAME=PEM` names a signer (an EC public key, or a CA whose identity
`--signer-identity NAME=ID` gives) that runs may require by name (`spec.workflow.verify.
signer`); `--require-signatures NS` (repeatable, `*` for all) makes every run in NS name one,
refused at admission by the server and at the pull by the worker. One option group, so the
three commands cannot drift apart; docs/security.md says what this protects.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from plnt.cli import exits, option_groups
from plnt.workflowspec import signers


@dataclasses.dataclass(frozen=True, slots=True)
class SignatureOptions:
    """Trusted signers and where signatures are required; `policy()` is what the server and
    worker take."""

    trusted_signer: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-signer",
            envvar="PLNT_TRUSTED_SIGNER",
            help="NAME=PEM: a public key or CA runs may name in spec.workflow.verify.signer "
            "(repeatable).",
            show_default=False,
        ),
    ] = None
    signer_identity: Annotated[
        list[str] | None,
        typer.Option(
            "--signer-identity",
            envvar="PLNT_SIGNER_IDENTITY",
            help="NAME=ID: the e-mail, URI or DNS name a CA signer's certificates must carry.",
            show_default=False,
        ),
    ] = None
    require_signatures: Annotated[
        list[str] | None,
        typer.Option(
            "--require-signatures",
            envvar="PLNT_REQUIRE_SIGNATURES",
            help="Namespace whose runs must be signed by a trusted signer ('*': every one; "
            "repeatable).",
            show_default=False,
        ),
    ] = None

    def policy(self) -> signers.SignaturePolicy | None:
        """The policy (None when no signer is trusted); exits 2 naming a bad entry."""
        if not self.trusted_signer and not self.require_signatures:
            return None
        identities: dict[str, str] = {}
        for entry in self.signer_identity or []:
            name, sep, identity = entry.partition("=")
            if not sep or not name or not identity:
                exits.fail(f"--signer-identity {entry!r}: expected NAME=ID", exits.Code.USAGE)
            identities[name] = identity
        try:
            return signers.SignaturePolicy.from_files(
                self.trusted_signer or [],
                required_in=self.require_signatures or None,
                identities=identities,
            )
        except ValueError as error:
            exits.fail(f"--trusted-signer: {error}", exits.Code.USAGE)


with_signature_options = option_groups.takes("signatures", SignatureOptions)
"""`command(..., signatures: SignatureOptions)` as typer sees it: one `--option` per field."""
