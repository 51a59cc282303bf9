"""CreateOptions, UpdateOptions and PatchOptions: dryRun, fieldManager, fieldValidation, force."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from multidict import MultiMapping

from plnt.api import errors
from plnt.apiserver import negotiation, queryvalues
from plnt.apiserver.params import fielderrors
from plnt.apiserver.params.fielderrors import FIELD_MANAGER_MAX
from plnt.registry.options import WriteOptions


def manager_from_user_agent(user_agent: str) -> str:
    """The printable characters before the first `/`, at most 128 bytes (kube's rule)."""
    out: list[str] = []
    size = 0
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable():
            continue
        size += len(char.encode())
        if size > FIELD_MANAGER_MAX:
            break
        out.append(char)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Written:
    """The query of a write, converted (400s already raised), not yet validated."""

    dry_run: tuple[str, ...]
    field_manager: str
    field_validation: str
    force: bool | None

    @classmethod
    def of(cls, query: MultiMapping[str]) -> _Written:
        queryvalues.pretty(query)
        return cls(
            dry_run=tuple(query.getall("dryRun", [])),
            field_manager=queryvalues.first(query, "fieldManager") or "",
            field_validation=queryvalues.first(query, "fieldValidation") or "",
            force=queryvalues.boolean(query, "force"),
        )

    def causes(self) -> list[errors.Cause]:
        return [
            *fielderrors.field_manager_causes(self.field_manager),
            *fielderrors.dry_run_causes(self.dry_run),
            *fielderrors.field_validation_causes(self.field_validation),
        ]

    def options(
        self, *, user_agent: str, duplicates: Sequence[str], is_patch: bool, force: bool = False
    ) -> WriteOptions:
        return WriteOptions(
            dry_run=bool(self.dry_run),
            field_validation=self.field_validation or "Warn",
            field_manager=self.field_manager or manager_from_user_agent(user_agent),
            duplicates=tuple(duplicates),
            is_patch=is_patch,
            force=force,
        )


def create_options(
    query: MultiMapping[str], *, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """CreateOptions: dryRun, fieldManager (default: the User-Agent's product), fieldValidation.

    Without `fieldManager` the manager is the User-Agent up to its first `/`
    (`kubectl/v1.37.1 (linux/amd64) ...` → `kubectl`), as kube-apiserver derives it.
    `force` is not a create option and is ignored, as kube ignores it.
    """
    written = _Written.of(query)
    if causes := written.causes():
        raise fielderrors.options_invalid("CreateOptions", causes)
    return written.options(user_agent=user_agent, duplicates=duplicates, is_patch=False)


def update_options(
    query: MultiMapping[str], *, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """UpdateOptions: the same parameters and rules as CreateOptions."""
    written = _Written.of(query)
    if causes := written.causes():
        raise fielderrors.options_invalid("UpdateOptions", causes)
    return written.options(user_agent=user_agent, duplicates=duplicates, is_patch=False)


def patch_options(
    query: MultiMapping[str], *, media: str, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """PatchOptions: an apply patch needs `fieldManager`; `force` is for apply patches only."""
    written = _Written.of(query)
    causes: list[errors.Cause] = []
    if media == negotiation.APPLY_PATCH:
        if not written.field_manager:
            causes.append(
                errors.Cause(
                    "FieldValueRequired",
                    "Required value: is required for apply patch",
                    "fieldManager",
                )
            )
    elif written.force is not None:
        causes.append(fielderrors.forbidden("force", "may not be specified for non-apply patch"))
    causes.extend(written.causes())
    if causes:
        raise fielderrors.options_invalid("PatchOptions", causes)
    return written.options(
        user_agent=user_agent,
        duplicates=duplicates,
        is_patch=True,
        force=bool(written.force) and media == negotiation.APPLY_PATCH,
    )


def write_options(
    query: MultiMapping[str],
    *,
    duplicates: list[str] | None = None,
    is_patch: bool = False,
    user_agent: str = "",
) -> WriteOptions:
    """Options of a write that is an update, or a patch that is not an apply (subresources)."""
    if is_patch:
        return patch_options(
            query, media=negotiation.MERGE_PATCH, user_agent=user_agent, duplicates=duplicates or ()
        )
    return update_options(query, user_agent=user_agent, duplicates=duplicates or ())


def apply_options(query: MultiMapping[str], *, duplicates: list[str] | None = None) -> WriteOptions:
    """Options of an apply patch (422 PatchOptions without `fieldManager`)."""
    return patch_options(query, media=negotiation.APPLY_PATCH, duplicates=duplicates or ())
