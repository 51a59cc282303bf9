"""kube's strategies and validation for the workload kinds, beyond their schemas.

Part of the kube-apiserver stand-in (a test double: no kube-apiserver runs here).

For Deployments, Services, Pods, Nodes, Secrets, EndpointSlices, HorizontalPodAutoscalers,
Ingresses and PodDisruptionBudgets, after `pkg/registry/<group>/<kind>/strategy.go` and
`pkg/apis/<group>/validation`:

* `strategy(kind)` prepares a write (create: `old` is None): a kind with a status
  subresource drops the status a create or update sends (Nodes keep it on create, as a
  kubelet registers with status; Pods start `Pending`); `metadata.generation` starts at
  1 and grows when the spec changes (Deployments: or their annotations, which kube copies
  to ReplicaSets); a small set of defaults (Deployment replicas, strategy, history and
  progress deadline; the pod template's restartPolicy, dnsPolicy, schedulerName,
  termination message fields and protocols; a Service's type, clusterIP from
  10.96.0.0/12, ports' protocol and targetPort; Secret `stringData` folded into base64
  `data` and type Opaque). Other defaults a cluster adds are absent here.
* `checks(kind)` are kube's validation rules the schema cannot express: object names
  (RFC 1123 subdomain; DNS-1035 label for Services), a Deployment's non-empty selector
  that must match its template's labels and may not change, restartPolicy Always in
  templates, non-negative replicas, unique container names, a Service's ports, an
  immutable clusterIP, Pod spec immutability, HPA replica bounds, PDB minAvailable xor
  maxUnavailable, Secret keys and size.

No I/O here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.support.kube import statuses

Obj = dict[str, Any]
Cause = statuses.Cause

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_TEXT = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
_DNS1035_TEXT = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
STATUS_KINDS = {
    "HTTPRoute",
    "Deployment",
    "Service",
    "Pod",
    "Node",
    "HorizontalPodAutoscaler",
    "Ingress",
    "PodDisruptionBudget",
}
# kinds whose registry counts spec changes in metadata.generation (Services and Nodes do not)
SPEC_KINDS = {
    "Deployment",
    "Pod",
    "HorizontalPodAutoscaler",
    "Ingress",
    "PodDisruptionBudget",
    "HTTPRoute",
}
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# --- selectors -----------------------------------------------------------------------------


def label_selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: a null selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def selector_text(selector: Obj) -> str:
    """metav1.FormatLabelSelector, as a Scale's `status.selector` and kubectl show it."""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        operator, key = expression["operator"], expression["key"]
        values = ",".join(sorted(expression.get("values") or []))
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }[operator]
        )
    return ",".join(terms)


def template_hash(template: Obj) -> str:
    """A pod-template-hash: stable for a template, different when it changes."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(HASH_ALPHABET[b % len(HASH_ALPHABET)] for b in digest[:10])


# --- defaults ------------------------------------------------------------------------------


def _default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        tagged = ":" in image.rpartition("/")[2] and not image.endswith(":latest")
        container.setdefault(
            "imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always"
        )
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")
        for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = container.get(probe_name)
            if probe:
                for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10),
                                   ("successThreshold", 1), ("failureThreshold", 3)):  # fmt: skip
                    probe.setdefault(key, value)
                if "httpGet" in probe:
                    probe["httpGet"].setdefault("scheme", "HTTP")


def _defaults(kind: str, obj: Obj, old: Obj | None) -> None:
    spec = obj.get("spec")
    if kind == "Deployment" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault(
            "strategy",
            {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
        )
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    elif kind == "Pod" and isinstance(spec, dict):
        _default_pod_spec(spec)
    elif kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            kept = ((old or {}).get("spec") or {}).get("clusterIP")
            spec["clusterIP"] = kept or _cluster_ip(obj["metadata"])
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
    elif kind == "HorizontalPodAutoscaler" and isinstance(spec, dict):
        spec.setdefault("minReplicas", 1)
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")


def _cluster_ip(meta: Obj) -> str:
    digest = hashlib.sha256(f"{meta.get('namespace')}/{meta.get('name')}".encode()).digest()
    return f"10.{96 + digest[0] % 16}.{digest[1]}.{max(digest[2], 1)}"


def secret_from_view(obj: Obj) -> Obj:
    """stringData is write-only: its entries are folded into base64 `data`."""
    out = dict(obj)
    string_data = out.pop("stringData", None) or {}
    if string_data:
        data = dict(out.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        out["data"] = data
    for key, value in (out.get("data") or {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError) as error:
            raise statuses.bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                f"at key {key}: {error}"
            ) from error
    return out


def strategy(kind: str) -> Callable[[Obj, Obj | None], None]:
    """Prepare a stored object for create (`old` None) or update, in place."""

    def prepare(obj: Obj, old: Obj | None) -> None:
        meta = obj.setdefault("metadata", {})
        _defaults(kind, obj, old)
        if kind in STATUS_KINDS:
            if old is not None:
                obj.pop("status", None)
                if "status" in old:
                    obj["status"] = old["status"]
            elif kind == "Pod":
                obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
            elif kind != "Node":
                obj.pop("status", None)
        if kind not in SPEC_KINDS:
            return
        if old is None:
            meta["generation"] = 1
            return
        old_meta = old.get("metadata") or {}
        changed = obj.get("spec") != old.get("spec")
        if kind == "Deployment":
            changed = changed or meta.get("annotations") != old_meta.get("annotations")
        meta["generation"] = int(old_meta.get("generation", 1)) + (1 if changed else 0)

    return prepare


def status_strategy(obj: Obj, old: Obj) -> Obj:
    """A write to `/status`: the old object with the new status (and nothing else)."""
    out = dict(old)
    out["metadata"] = dict(old["metadata"])
    out["metadata"]["resourceVersion"] = (obj.get("metadata") or {}).get("resourceVersion")
    if "status" in obj:
        out["status"] = obj["status"]
    else:
        out.pop("status", None)
    return out


def qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get(r) is not None and (req.get(r) in (None, lim.get(r)))
        for req, lim in zip(requests, limits, strict=True)
        for r in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


# --- validation ----------------------------------------------------------------------------


def _name(meta: Obj, *, dns1035: bool = False) -> list[Cause]:
    name = str(meta.get("name", ""))
    if dns1035:
        if not _DNS1035.match(name) or len(name) > 63:
            return [statuses.field_invalid("metadata.name", name, _DNS1035_TEXT)]
        return []
    if not _SUBDOMAIN.match(name) or len(name) > 253:
        return [statuses.field_invalid("metadata.name", name, _SUBDOMAIN_TEXT)]
    return []


def _go_map(labels: Mapping[str, str]) -> str:
    inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(labels.items()))
    return "map[string]string{" + inner + "}"


def _pod_spec(spec: Obj, path: str, *, template: bool) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(spec.get("containers") or []):
        name = str(container.get("name", ""))
        where = f"{path}.containers[{index}].name"
        if not _DNS1123_LABEL.match(name) or len(name) > 63:
            causes.append(
                statuses.field_invalid(
                    where,
                    name,
                    "a lowercase RFC 1123 label must "
                    "consist of lower case alphanumeric characters or '-', and must start "
                    "and end with an alphanumeric character",
                )
            )
        if name in seen:
            causes.append(
                statuses.Cause("FieldValueDuplicate", f"Duplicate value: {json.dumps(name)}", where)
            )
        seen.add(name)
    if not spec.get("containers"):
        causes.append(statuses.field_required(f"{path}.containers"))
    policy = spec.get("restartPolicy", "Always")
    if template and policy != "Always":
        causes.append(
            statuses.Cause(
                "FieldValueNotSupported",
                f'Unsupported value: {json.dumps(policy)}: supported values: "Always"',
                f"{path}.restartPolicy",
            )
        )
    return causes


def _deployment(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"])
    spec = obj.get("spec") or {}
    selector = spec.get("selector") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(
            statuses.field_invalid(
                "spec.selector", selector, "empty selector is invalid for deployment"
            )
        )
    elif not label_selector_matches(selector, labels):
        causes.append(
            statuses.Cause(
                "FieldValueInvalid",
                f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`",
                "spec.template.metadata.labels",
            )
        )
    if int(spec.get("replicas") or 0) < 0:
        causes.append(
            statuses.field_invalid(
                "spec.replicas", spec["replicas"], "must be greater than or equal to 0"
            )
        )
    causes += _pod_spec(
        (spec.get("template") or {}).get("spec") or {}, "spec.template.spec", template=True
    )
    if old is not None and selector != ((old.get("spec") or {}).get("selector") or {}):
        causes.append(statuses.field_invalid("spec.selector", selector, "field is immutable"))
    return causes


_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def _pod(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"]) + _pod_spec(obj.get("spec") or {}, "spec", template=False)
    if old is None:
        return causes

    def comparable(spec: Obj) -> Obj:
        out = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
        out["containers"] = [{**c, "image": ""} for c in spec.get("containers") or []]
        return out

    if comparable(obj.get("spec") or {}) != comparable(old.get("spec") or {}):
        causes.append(
            statuses.Cause(
                "FieldValueForbidden",
                "Forbidden: pod updates may not change "
                "fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
                "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
                "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                "if it was previously negative)",
                "spec",
            )
        )
    return causes


def _service(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"], dns1035=True)
    spec = obj.get("spec") or {}
    headless = spec.get("clusterIP") == "None"
    if spec.get("type") != "ExternalName" and not headless and not spec.get("ports"):
        causes.append(statuses.field_required("spec.ports"))
    if old is not None:
        before = (old.get("spec") or {}).get("clusterIP")
        if before and spec.get("clusterIP") != before:
            causes.append(
                statuses.field_invalid(
                    "spec.clusterIPs[0]", spec.get("clusterIP"), "may not change once set"
                )
            )
    return causes


def _hpa(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"])
    spec = obj.get("spec") or {}
    low, high = int(spec.get("minReplicas", 1)), int(spec.get("maxReplicas", 0))
    if low < 1:
        causes.append(
            statuses.field_invalid("spec.minReplicas", low, "must be greater than or equal to 1")
        )
    if high < low:
        causes.append(
            statuses.field_invalid(
                "spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"
            )
        )
    return causes


def _pdb(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"])
    spec = obj.get("spec") or {}
    if "minAvailable" in spec and "maxUnavailable" in spec:
        causes.append(
            statuses.field_invalid(
                "spec", spec, "minAvailable and maxUnavailable cannot be both set"
            )
        )
    return causes


def _secret(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = _name(obj["metadata"])
    data = obj.get("data") or {}
    for key in data:
        if not _CONFIG_KEY.match(key):
            causes.append(
                statuses.field_invalid(
                    f"data[{key}]",
                    key,
                    _CONFIG_KEY_TEXT,
                )
            )
    if sum(len(base64.b64decode(v)) for v in data.values() if v) > 1024 * 1024:
        causes.append(
            statuses.Cause("FieldValueTooLong", "Too long: must have at most 1048576 bytes", "data")
        )
    if old is not None and old.get("type") != obj.get("type"):
        causes.append(statuses.field_invalid("type", obj.get("type"), "field is immutable"))
    return causes


def _named(obj: Obj, old: Obj | None) -> list[Cause]:
    return _name(obj["metadata"])


CHECKS: dict[str, Callable[[Obj, Obj | None], list[Cause]]] = {
    "Deployment": _deployment,
    "Pod": _pod,
    "Service": _service,
    "HorizontalPodAutoscaler": _hpa,
    "PodDisruptionBudget": _pdb,
    "Secret": _secret,
}


def checks(kind: str) -> Callable[[Obj, Obj | None], list[Cause]]:
    return CHECKS.get(kind, _named)


def field_value(stored: Obj, label: str) -> str:
    """The value of a dotted field-selector label (`spec.nodeName`, `status.phase`, `type`)."""
    current: Any = stored
    for part in label.split("."):
        current = current.get(part) if isinstance(current, dict) else None
    return "" if current is None else str(current)
