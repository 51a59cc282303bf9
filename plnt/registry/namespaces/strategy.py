"""Namespace's rules, as kube's namespace strategies have them.

* create: the namespace starts `Active` with the `kubernetes` finalizer in
  `spec.finalizers`, has no generation, and is labelled
  `kubernetes.io/metadata.name=<name>` (kept true on every write);
* update: `spec.finalizers` and `status` keep their stored values (only the
  `finalize` subresource changes the former, only `status` the latter);
* the name is an RFC 1123 label, not a subdomain: it becomes part of other names.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import re
from collections.abc import Iterator

from plnt.api.errors import Cause
from plnt.registry.definitions import Object
from plnt.registry.labelnames import go_quote
from plnt.registry.strategy import Strategy

KUBERNETES_FINALIZER = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"
ACTIVE, TERMINATING = "Active", "Terminating"

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL_FMT)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    f"regex used for validation is '{_LABEL_FMT}')"
)
_MAX_LABEL = 63

_finalizing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "namespace_finalizing", default=False
)


@contextlib.contextmanager
def finalizing() -> Iterator[None]:
    """Within this block (one task), an update may change `spec.finalizers`: the
    `finalize` subresource, the only way kube offers to release a namespace."""
    token = _finalizing.set(True)
    try:
        yield
    finally:
        _finalizing.reset(token)


def phase(obj: Object) -> str:
    status = obj.get("status")
    value = status.get("phase") if isinstance(status, dict) else None
    return value if isinstance(value, str) else ACTIVE


def spec_finalizers(obj: Object) -> list[str]:
    spec = obj.get("spec")
    finalizers = spec.get("finalizers") if isinstance(spec, dict) else None
    return [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []


class NamespaceStrategy(Strategy):
    """kube's namespaceStrategy, namespaceStatusStrategy and namespaceFinalizeStrategy."""

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        meta = obj["metadata"]
        meta.pop("generation", None)
        meta.pop("namespace", None)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        finalizers = spec.get("finalizers")
        if not isinstance(finalizers, list):
            spec["finalizers"] = [KUBERNETES_FINALIZER]
        elif KUBERNETES_FINALIZER not in finalizers:
            finalizers.append(KUBERNETES_FINALIZER)
        obj["status"] = {"phase": ACTIVE}

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_update(obj, old)
        meta = obj["metadata"]
        meta.pop("generation", None)
        meta.pop("namespace", None)
        if not _finalizing.get():
            old_spec = old.get("spec")
            if isinstance(old_spec, dict):
                obj["spec"] = copy.deepcopy(old_spec)
            else:
                obj.pop("spec", None)

    def validate(self, obj: Object) -> list[Cause]:
        """Every error; a bad name is told once, by the label rule (kube's
        ValidateNamespaceName) rather than also by the generic subdomain rule."""
        causes = super().validate(obj)
        label = [c for c in causes if c.field == "metadata.name" and "RFC 1123 label" in c.message]
        if not label and not any("must be no more than 63" in c.message for c in causes):
            return causes
        return [
            c
            for c in causes
            if c.field != "metadata.name"
            or c.reason != "FieldValueInvalid"
            or c in label
            or "63" in c.message
        ]

    def validate_semantics(self, obj: Object) -> list[Cause]:
        name = obj.get("metadata", {}).get("name")
        if not isinstance(name, str) or not name:
            return []
        problems = []
        if len(name) > _MAX_LABEL:
            problems.append(f"must be no more than {_MAX_LABEL} characters")
        if not _LABEL_RE.fullmatch(name):
            problems.append(_LABEL_MESSAGE)
        return [
            Cause("FieldValueInvalid", f"Invalid value: {go_quote(name)}: {p}", "metadata.name")
            for p in problems
        ]

    def canonicalize(self, obj: Object) -> None:
        """Schema defaults, then the name label kube keeps equal to the name."""
        super().canonicalize(obj)
        meta = obj["metadata"]
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels[NAME_LABEL] = meta.get("name", "")
