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
from collections.abc import Iterator

from plnt.registry import metavalidation
from plnt.registry.objects import Object
from plnt.registry.strategy import Strategy

KUBERNETES_FINALIZER = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"
ACTIVE, TERMINATING = "Active", "Terminating"

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

    name_rule: metavalidation.NameRule = staticmethod(metavalidation.dns_label_name)
    """kube's ValidateNamespaceName: a DNS-1123 label, not a subdomain."""

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

    def deletion_held(self, obj: Object) -> bool:
        """A namespace stays while either finalizer list is not empty (kube's
        ShouldDeleteNamespaceDuringUpdate): `spec.finalizers` is what the namespace
        controller clears once the namespace is empty."""
        return super().deletion_held(obj) or bool(spec_finalizers(obj))

    def canonicalize(self, obj: Object, canonical: Object | None = None) -> None:
        """Schema defaults, then the name label kube keeps equal to the name."""
        super().canonicalize(obj, canonical)
        meta = obj["metadata"]
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels[NAME_LABEL] = meta.get("name", "")
