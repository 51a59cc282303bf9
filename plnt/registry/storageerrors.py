"""Storage errors as API errors: the one place the registry translates them.

Storage speaks of keys (`plnt.storage.errors`), the registry's callers of resources
(`plnt.api.errors`). Every call into storage runs inside `translated(definition, name)`,
which raises the API error for a storage error, with the storage error as its cause:

    KeyNotFound       404 NotFound          `<resource> "<name>" not found`
    KeyExists         409 AlreadyExists     `<resource> "<name>" already exists`
    Conflict          409 Conflict          the optimistic-lock message
    Expired           410 Expired           `too old resource version: N (M)`
    InvalidContinue   400 BadRequest        `invalid continue token: …`
    TooLargeRevision  504 Timeout           a ResourceVersionTooLarge cause, Retry-After 1
    Unavailable       503 ServiceUnavailable  Retry-After 5
    anything else     500 InternalError

Anything else raised inside the block passes through unchanged: an API error that a
`mutate` function raised to refuse a write, and errors that are not storage's.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType

from plnt.api import errors
from plnt.registry.definitions import ResourceDefinition
from plnt.storage import errors as storage_errors


def translated(definition: ResourceDefinition, name: str = "") -> AbstractContextManager[None]:
    """A block whose storage errors leave it as API errors about `name` of `definition`.

    `name` is the object the block reads or writes ("" for a list or a watch, which
    raise no error about one object).
    """
    return _Translating(definition, name)


class _Translating(AbstractContextManager[None]):
    # A class, not @contextmanager: every read enters one, and this costs no generator.
    __slots__ = ("_definition", "_name")

    def __init__(self, definition: ResourceDefinition, name: str) -> None:
        self._definition = definition
        self._name = name

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, storage_errors.StorageError):
            raise api_error(exc, self._definition, self._name) from exc


def api_error(
    error: storage_errors.StorageError, definition: ResourceDefinition, name: str = ""
) -> errors.APIError:
    """The API error for `error` (see the module's table); `translated` raises it."""
    resource = definition.group_resource
    if isinstance(error, storage_errors.KeyNotFound):
        return errors.NotFound.of(resource, name)
    if isinstance(error, storage_errors.KeyExists):
        return errors.AlreadyExists.of(resource, name)
    if isinstance(error, storage_errors.Conflict):
        return errors.Conflict.of(resource, name, errors.OPTIMISTIC_LOCK_MESSAGE)
    if isinstance(error, storage_errors.Expired):
        return errors.Expired(
            f"too old resource version: {error.revision} ({error.compacted_revision})"
        )
    if isinstance(error, storage_errors.InvalidContinue):
        return errors.BadRequest(f"invalid continue token: {error}")
    if isinstance(error, storage_errors.TooLargeRevision):
        message = f"Too large resource version: {error.revision}, current: {error.current_revision}"
        return errors.Timeout(
            message,
            causes=[errors.Cause("ResourceVersionTooLarge", message)],
            retry_after_seconds=1,
        )
    if isinstance(error, storage_errors.Unavailable):
        return errors.ServiceUnavailable(f"storage is unavailable: {error}", retry_after_seconds=5)
    return errors.InternalError.wrap(error)
