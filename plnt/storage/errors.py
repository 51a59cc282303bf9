"""Storage errors: about keys and revisions, never about resources.

    StorageError
    ├── KeyNotFound        the key does not exist (or not at that revision)
    ├── KeyExists          create found the key already present
    ├── Conflict           a compare-and-swap lost: the key changed since `expected_revision`
    ├── Expired            the requested revision was compacted away (watch, list, continue)
    ├── TooLargeRevision   the requested revision is newer than anything the store has seen
    ├── InvalidContinue    a continue token that cannot be decoded or belongs to another prefix
    └── Unavailable        etcd cannot be reached or timed out

The registry translates these into API errors exactly once.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage failure."""

    def __init__(self, message: str, *, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class KeyNotFound(StorageError):
    """The key does not exist."""


class KeyExists(StorageError):
    """A create found the key already present."""


class Conflict(StorageError):
    """A compare-and-swap lost because the key was modified (or deleted) meanwhile."""

    def __init__(self, message: str, *, key: str = "", current_revision: int = 0) -> None:
        super().__init__(message, key=key)
        self.current_revision = current_revision

    @classmethod
    def stale(cls, key: str, *, current_revision: int, expected_revision: int) -> Conflict:
        """The write named a revision the key is no longer at (every store's wording)."""
        return cls(
            f"key {key!r} is at revision {current_revision}, not {expected_revision}",
            key=key,
            current_revision=current_revision,
        )


class Expired(StorageError):
    """The requested revision is older than the store's compaction point."""

    def __init__(self, message: str, *, revision: int, compacted_revision: int) -> None:
        super().__init__(message)
        self.revision = revision
        self.compacted_revision = compacted_revision


class TooLargeRevision(StorageError):
    """The requested revision is in the future of the store (or the cache has not caught up)."""

    def __init__(self, message: str, *, revision: int, current_revision: int) -> None:
        super().__init__(message)
        self.revision = revision
        self.current_revision = current_revision


class InvalidContinue(StorageError):
    """A continue token that is malformed or was issued for another prefix."""


class Unavailable(StorageError):
    """etcd could not be reached or did not answer in time."""
