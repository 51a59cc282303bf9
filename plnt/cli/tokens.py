"""`plnt token create USER [--group G]...`: a bearer token for a standalone plnt.

It adds a line to the token file `plnt up` authenticates bearer tokens with — by default
`STATE/tokens.csv` (`--state-dir`), or the file `plnt up --token-file` was given
(`--token-file`) — and prints the new token, for an OpenAI client's `api_key` or a
kubeconfig's `token`. `plnt up` re-reads the file when it changes, so the token works at
once. What the user may do is the policy's business: the default policy lets the group
`plnt:invokers` invoke runs and use their OpenAI endpoint (`workflowruns/proxy`).
In a cluster, use a ServiceAccount token instead (`kubectl create token NAME`).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from plnt.cli import exits

tokens = typer.Typer(help="Bearer tokens for a standalone plnt (`plnt up`).")


def register(app: typer.Typer) -> None:
    """Add `token create` to `app`."""
    app.add_typer(tokens, name="token")


@tokens.command(
    "create", epilog="Example: plnt token create alice --group plnt:invokers --state-dir ~/.plnt"
)
def create(
    user: Annotated[str, typer.Argument(help="The user name the token authenticates as.")],
    group: Annotated[
        list[str] | None, typer.Option("--group", help="A group of the user (repeatable).")
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="The state directory of `plnt up`.")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="The file `plnt up --token-file` reads.")
    ] = None,
) -> None:
    """Create a bearer token for USER, add it to the token file and print it."""
    # Imported here, as `plnt up` does, so other commands do not pay for the server stack.
    from plnt.apiserver import authn
    from plnt.standalone import serving as standalone

    if (state_dir is None) == (token_file is None):
        exits.fail("give exactly one of --state-dir and --token-file", exits.Code.USAGE)
    path = token_file
    if path is None:
        assert state_dir is not None
        path = standalone.token_file_of(
            standalone.StandaloneSettings(state_dir=state_dir.expanduser().resolve())
        )
    if not user.strip() or any(c in user for c in ",\n\r"):
        exits.fail(f"user {user!r} must be non-empty without commas or newlines", exits.Code.USAGE)
    groups = [g for g in group or [] if g]
    token = secrets.token_urlsafe(32)
    try:
        authn.add_token(path, token=token, user=user, groups=groups)
    except (OSError, authn.TokenFileError) as error:
        exits.fail(f"cannot add the token to {path}: {error}", exits.Code.FAILED)
    typer.echo(token)
