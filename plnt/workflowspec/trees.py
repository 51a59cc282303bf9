"""A workflow's tree of pinned sub-workflows: every spec its `kind: workflow` steps call,
down to the leaves, fetched once per digest.

Why here and not in the runner: a revision pins its whole tree, so the tree is fetched,
verified and checked when the deploy pulls the top spec, and a spec that calls a missing,
tampered, invalid, too deep or circular tree never reaches a runner. The fetching itself
is the caller's (`fetch(ref, digest)` returns bytes already held to the digest, and to a
signature when one is required); this module only walks, parses and names.

Errors, each naming the calling step's path from the top (`steps[1](id=summarise)` and, a
level down, `steps[1](id=summarise) → steps[0](id=draft)`):

* a source error from `fetch` (`DigestMismatch`, `NotFound`, a `SignatureError` …) is
  re-raised as itself, its message prefixed with that path, so the deploy maps it to the
  same condition as the top spec's and the reason says which step;
* a called spec that is not a valid workflow, a tree deeper than `max_depth`, and a cycle
  (a digest calling itself, directly or not; sha256 makes one all but impossible to build,
  but a fetcher that does not hold bytes to digests could) are `documents.SpecError`s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from plnt.workflowspec import dag, documents, model
from plnt.workflowspec import errors as source_errors

MAX_DEPTH = 4
"""Levels of calls below the top workflow, at most (a call from the top is level 1)."""

Fetch = Callable[[str, str], Awaitable[bytes]]
"""`fetch(ref, digest)`: the bytes of `digest`, pulled from `ref` and verified."""


async def resolve(
    workflow: model.Workflow,
    *,
    fetch: Fetch,
    digest: str | None = None,
    max_depth: int = MAX_DEPTH,
) -> dict[str, bytes]:
    """Every spec `workflow` (whose own digest is `digest`, when known) calls, directly or
    not, by digest (empty: it calls none)."""
    found: dict[str, bytes] = {}
    top = (digest,) if digest else ()
    await _walk(
        workflow, fetch=fetch, found=found, chain=top, level=0, path="", max_depth=max_depth
    )
    return found


async def _walk(
    workflow: model.Workflow,
    *,
    fetch: Fetch,
    found: dict[str, bytes],
    chain: tuple[str, ...],
    level: int,
    path: str,
    max_depth: int,
) -> None:
    for index, step in workflow.calls():
        where = (
            f"{path} → {dag.step_path(index, step.id)}" if path else dag.step_path(index, step.id)
        )
        if step.digest in chain:
            raise documents.SpecError(
                [dag.Problem(f"{where}.digest", f"{step.digest} calls itself (a cycle)")]
            )
        if level + 1 > max_depth:
            raise documents.SpecError(
                [
                    dag.Problem(
                        f"{where}.digest",
                        f"calls a workflow {level + 1} levels down; at most {max_depth}",
                    )
                ]
            )
        data = found.get(step.digest)
        if data is None:
            try:
                data = await fetch(step.ref, step.digest)
            except source_errors.SourceError as error:
                error.args = (f"{where}: {error.args[0] if error.args else error}",)
                raise
            found[step.digest] = data
        try:
            called = documents.parse_workflow(data)
        except documents.SpecError as error:
            raise documents.SpecError(
                [
                    dag.Problem(f"{where} ({step.digest}) {problem.path}", problem.message)
                    for problem in error.problems
                ]
            ) from error
        await _walk(
            called,
            fetch=fetch,
            found=found,
            chain=(*chain, step.digest),
            level=level + 1,
            path=where,
            max_depth=max_depth,
        )
