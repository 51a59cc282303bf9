"""Reading a workflow spec file for `plnt push`: bounded in size, validated before it leaves.

A spec is refused from its size on disk before it is read (and again if it grew while
being read), so `--max-bytes` bounds memory as it bounds the store. Validation is the
runner's own loader, so what `push` accepts is what a runner will serve.
"""

from __future__ import annotations

import os
from pathlib import Path

from plnt.cli import exits
from plnt.workflowspec import errors


class UnreadableSpec(exits.UsageError):
    """The spec file cannot be opened or read: the user named the wrong file."""


def read_valid(file: Path, *, limit: int) -> bytes:
    """The bytes of `file`, checked; raises `errors.TooLarge`, `UnreadableSpec` or
    `documents.WorkflowSpecError`."""
    data = read_bounded(file, limit=limit)
    # Deferred: the spec model loads jsonschema and jinja2.
    from plnt.workflowspec import documents

    documents.parse_workflow(data)
    return data


def read_bounded(file: Path, *, limit: int) -> bytes:
    """At most `limit` bytes of `file`; larger files raise `errors.TooLarge` unread."""
    try:
        with file.open("rb") as spec:
            size = os.fstat(spec.fileno()).st_size
            if size > limit:
                raise errors.TooLarge(
                    f"{size} bytes exceeds the limit of {limit} bytes", limit=limit, size=size
                )
            data = spec.read(limit + 1)
    except OSError as error:
        raise UnreadableSpec(str(error.strerror or error)) from error
    if len(data) > limit:
        raise errors.TooLarge(f"exceeds the limit of {limit} bytes", limit=limit)
    return data
