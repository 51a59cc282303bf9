"""Every `plnt` command's exit codes, in one table, and the one place errors map to them.

Scripts branch on these codes, so they mean the same thing for every command: a
404 from the API server and a tag missing from a registry both exit 3. The lower
layers' exception trees (`plnt.client.errors`, `plnt.workflowspec.errors`, and
`documents.WorkflowSpecError` for a spec that fails validation) are translated
here and nowhere else, the first matching class winning. A command only says
`with exits.reported():` around its one call (`connecting.call` does), or
`exits.fail(message, Code.USAGE)` for what it checks itself.
"""

from __future__ import annotations

import sys
from enum import IntEnum
from types import TracebackType
from typing import NoReturn

import typer

from plnt.client import errors as client_errors
from plnt.workflowspec import errors as source_errors


class Code(IntEnum):
    """A documented exit code (docs/cli.md prints the same table)."""

    OK = 0
    FAILED = 1
    """Anything else: 5xx answers, kubeconfig errors, a failed `run --wait`, a store's nonsense."""
    USAGE = 2
    """Bad options or arguments, unreadable or wrong-kind files, malformed references."""
    NOT_FOUND = 3
    """404, or the tag, digest or key is not in the spec store."""
    CONFLICT = 4
    """409, including AlreadyExists."""
    DENIED = 5
    """401 or 403, or the spec store refused the credentials."""
    INVALID = 6
    """422, or a workflow spec that fails validation."""
    TOO_LARGE = 7
    """A spec over `--max-bytes`."""
    UNAVAILABLE = 8
    """No answer: connection, TLS or timeout, or a spec store that kept failing."""
    DIGEST_MISMATCH = 9
    """The bytes fetched do not hash to the pinned digest."""
    INTERRUPTED = 130
    """Ctrl-C, as shells report SIGINT."""


class UsageError(Exception):
    """What the user passed cannot be used: a file that cannot be read or is the wrong kind.

    The CLI's own helpers raise subclasses of this; everything else comes from below.
    """


# Most specific class first: the first match wins (AlreadyExists is a Conflict).
_CODES: tuple[tuple[type[Exception], Code], ...] = (
    (client_errors.NotFound, Code.NOT_FOUND),
    (client_errors.Conflict, Code.CONFLICT),
    (client_errors.Unauthorized, Code.DENIED),
    (client_errors.Forbidden, Code.DENIED),
    (client_errors.Invalid, Code.INVALID),
    (client_errors.TransportError, Code.UNAVAILABLE),
    (UsageError, Code.USAGE),
    (source_errors.InvalidReference, Code.USAGE),
    (source_errors.InvalidDigest, Code.USAGE),
    (source_errors.NotFound, Code.NOT_FOUND),
    (source_errors.AuthenticationFailed, Code.DENIED),
    (source_errors.TooLarge, Code.TOO_LARGE),
    (source_errors.Unavailable, Code.UNAVAILABLE),
    (source_errors.DigestMismatch, Code.DIGEST_MISMATCH),
)


def code_of(error: BaseException) -> Code:
    """The exit code of a failure from the client or the spec sources; FAILED if unknown."""
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    if _is_invalid_spec(error):
        return Code.INVALID
    return Code.FAILED


def _is_invalid_spec(error: BaseException) -> bool:
    # Not imported here: the spec model loads jsonschema and jinja2, which most
    # commands never need. A WorkflowSpecError can only exist once its module is loaded.
    documents = sys.modules.get("plnt.workflowspec.documents")
    return documents is not None and isinstance(error, documents.WorkflowSpecError)


def _expected(error: BaseException) -> bool:
    return isinstance(
        error, UsageError | client_errors.ClientError | source_errors.SourceError
    ) or _is_invalid_spec(error)


def message_of(error: BaseException) -> str:
    """What to print: the server's own Status message for an API error, else the error."""
    if isinstance(error, client_errors.ApiError):
        return error.message
    return str(error)


def fail(message: str, code: Code = Code.FAILED) -> NoReturn:
    """Print `error: message` on stderr and exit with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(int(code))


class reported:  # lower case: used as `with exits.reported():`, like contextlib's helpers
    """Expected failures inside become `error: [prefix]message` and their code, not a traceback.

    A class rather than `@contextmanager` so that type checkers see it never swallows an
    exception: it only replaces the expected ones with `typer.Exit`.
    """

    def __init__(self, *, prefix: str = "") -> None:
        self._prefix = prefix

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None and _expected(error):
            fail(f"{self._prefix}{message_of(error)}", code_of(error))
        if isinstance(error, KeyboardInterrupt):
            fail("interrupted", Code.INTERRUPTED)
