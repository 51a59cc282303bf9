"""OpenAPI v2 and v3 documents generated from the pydantic models.

kubectl needs v3 for `explain` and to know the server validates fields
(a PATCH operation with the GVK extension and an inline `fieldValidation` query
parameter); the aggregator merges v2 and v3. Strategic merge patch is accepted
but deliberately not advertised, so client-side apply sends JSON merge patches
(KUBE-API.md, plnt's decisions).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from plnt.registry.definitions import ResourceDefinition, Schema, Subresource

PATCH_CONTENT_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)
_META_DEFINITIONS = {
    "ObjectMeta",
    "OwnerReference",
    "Condition",
    "LabelSelector",
    "LabelSelectorRequirement",
}


def _definition_name(d: ResourceDefinition, model_name: str) -> str:
    if model_name in _META_DEFINITIONS:
        return f"io.k8s.apimachinery.pkg.apis.meta.v1.{model_name}"
    group = ".".join(reversed(d.group.split("."))) if d.group else "io.k8s.api.core"
    return f"{group}.{d.version}.{model_name}"


def _to_openapi(node: Any, rename: dict[str, str], ref_prefix: str) -> Any:
    """Rewrite pydantic's JSON Schema 2020-12 into the OpenAPI 3.0 / Swagger 2.0 subset."""
    if isinstance(node, list):
        return [_to_openapi(item, rename, ref_prefix) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    node.pop("title", None)
    if "$ref" in node:
        target = ref_prefix + rename[node.pop("$ref").rsplit("/", 1)[-1]]
        if node:
            out = {k: _to_openapi(v, rename, ref_prefix) for k, v in node.items()}
            out["allOf"] = [{"$ref": target}]
            return out
        return {"$ref": target}
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        options = [o for o in any_of if o != {"type": "null"}]
        if len(options) == 1:
            del node["anyOf"]
            merged = {**options[0], **node}
            return _to_openapi(merged, rename, ref_prefix)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), int | float) and not isinstance(node[bound], bool):
            # 2020-12's number is OpenAPI 3.0's (and kube-openapi's) boolean beside the limit.
            node[limit], node[bound] = node[bound], True
    if node.get("default") is None:
        node.pop("default", None)
    return {k: _to_openapi(v, rename, ref_prefix) for k, v in node.items()}


def schemas(definitions: tuple[ResourceDefinition, ...], *, ref_prefix: str) -> dict[str, Any]:
    """Named schemas of every kind and nested type; kinds carry x-kubernetes-group-version-kind."""
    out: dict[str, Any] = {}
    for d in definitions:
        raw = d.model.model_json_schema(by_alias=True, mode="validation")
        defs = raw.pop("$defs", {})
        rename = {name: _definition_name(d, name) for name in defs}
        rename[d.model.__name__] = _definition_name(d, d.model.__name__)
        for name, schema in defs.items():
            out[rename[name]] = _to_openapi(schema, rename, ref_prefix)
        top = _to_openapi(raw, rename, ref_prefix)
        top["x-kubernetes-group-version-kind"] = [
            {"group": d.group, "kind": d.kind, "version": d.version}
        ]
        top.setdefault("description", d.description)
        out[rename[d.model.__name__]] = top
    return out


STATUS_NAME = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
SCALE_NAME = "io.k8s.api.autoscaling.v1.Scale"
_OPEN_OBJECT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _sub_name(d: ResourceDefinition, sub: Subresource) -> str:
    """The schema name of a subresource's answer."""
    if sub.kind == d.kind:
        return _definition_name(d, d.model.__name__)
    if sub.kind == "Scale":
        return SCALE_NAME
    if sub.kind == "Status":
        return STATUS_NAME
    return _definition_name(d, sub.kind)


def _named_schemas(d: ResourceDefinition, schema: Schema, *, ref_prefix: str) -> dict[str, Any]:
    """A declared schema under its name in `d`'s group and version, with a model's nested
    types beside it (named as the kinds' own are)."""
    if schema.model is None:
        return {_definition_name(d, schema.name): dict(schema.json_schema or {})}
    raw = schema.model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    rename = {model: _definition_name(d, model) for model in defs}
    out = {rename[model]: _to_openapi(nested, rename, ref_prefix) for model, nested in defs.items()}
    out[_definition_name(d, schema.name)] = _to_openapi(raw, rename, ref_prefix)
    return out


def _subresource_schemas(
    definitions: tuple[ResourceDefinition, ...], *, ref_prefix: str
) -> dict[str, Any]:
    """Schemas of subresource bodies and answers that are not kinds of their own: Scale and
    Status as kube publishes them, the rest as each kind declares them."""
    out: dict[str, Any] = {}
    for d in definitions:
        for sub in d.subresources:
            if sub.kind == "Scale":
                out[SCALE_NAME] = SCALE_SCHEMA
            elif sub.kind == "Status":
                out[STATUS_NAME] = STATUS_SCHEMA
            elif sub.answer is not None:
                out.update(_named_schemas(d, sub.answer, ref_prefix=ref_prefix))
            elif sub.kind != d.kind:
                out[_sub_name(d, sub)] = _OPEN_OBJECT
            if sub.body is not None:
                out.update(_named_schemas(d, sub.body, ref_prefix=ref_prefix))
    return out


def _gvk(
    d: ResourceDefinition,
    *,
    kind: str | None = None,
    group: str | None = None,
    version: str | None = None,
) -> dict[str, str]:
    return {
        "group": d.group if group is None else group,
        "version": d.version if version is None else version,
        "kind": kind or d.kind,
    }


def _query(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": {"type": "string"}}


_WRITE_PARAMS = [
    _query("dryRun", "When present (All), modifications are not persisted."),
    _query("fieldManager", "Name of the actor making the change."),
    _query("fieldValidation", "Ignore, Warn (default) or Strict handling of unknown fields."),
]
_LIST_PARAMS = [
    _query(n, d)
    for n, d in (
        ("labelSelector", "Restrict the list by labels."),
        ("fieldSelector", "Restrict the list by fields."),
        ("limit", "Maximum number of items per page."),
        ("continue", "Token of the next page."),
        ("resourceVersion", "Where to start reading or watching."),
        ("resourceVersionMatch", "How resourceVersion applies to a list."),
        ("watch", "Stream changes."),
        ("allowWatchBookmarks", "Allow BOOKMARK events."),
        ("sendInitialEvents", "Start a watch with the current state (WatchList)."),
        ("timeoutSeconds", "End the list or watch after this many seconds."),
    )
]


def _v3_operation(
    d: ResourceDefinition,
    action: str,
    ref: str,
    *,
    gvk: dict[str, str],
    params: list[dict[str, Any]] | None = None,
    body_types: tuple[str, ...] = (),
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{d.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
        },
    }
    if params:
        op["parameters"] = params
    if body_types:
        op["requestBody"] = {
            "required": True,
            "content": {t: {"schema": {"$ref": ref}} for t in body_types},
        }
    return op


def collection_path(d: ResourceDefinition, group: str, version: str) -> str:
    """`/apis/<g>/<v>/namespaces/{namespace}/<plural>` (or the cluster-scoped form)."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if d.namespaced:
        return f"{base}/namespaces/{{namespace}}/{d.plural}"
    return f"{base}/{d.plural}"


def _path_params(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


def v3_document(
    group: str, version: str, definitions: tuple[ResourceDefinition, ...]
) -> dict[str, Any]:
    """The OpenAPI 3.0 document of one group/version."""
    prefix = "#/components/schemas/"
    components = schemas(definitions, ref_prefix=prefix)
    paths: dict[str, Any] = {}
    for d in definitions:
        ref = prefix + _definition_name(d, d.model.__name__)
        gvk = _gvk(d)
        collection = collection_path(d, group, version)
        item = collection + "/{name}"
        item_params = _path_params("namespace", "name") if d.namespaced else _path_params("name")
        coll_params = _path_params("namespace") if d.namespaced else []
        # Only the verbs the kind declares: a read-only kind publishes no write operation.
        verbs = set(d.verbs)
        collection_ops: dict[str, Any] = {"parameters": coll_params}
        if "list" in verbs:
            collection_ops["get"] = _v3_operation(d, "list", ref, gvk=gvk, params=_LIST_PARAMS)
        if "create" in verbs:
            collection_ops["post"] = _v3_operation(
                d,
                "post",
                ref,
                gvk=gvk,
                params=_WRITE_PARAMS,
                body_types=("application/json", "application/yaml"),
            )
        if "deletecollection" in verbs:
            collection_ops["delete"] = _v3_operation(
                d, "deletecollection", ref, gvk=gvk, params=_LIST_PARAMS
            )
        paths[collection] = collection_ops
        item_ops: dict[str, Any] = {"parameters": item_params}
        if "get" in verbs:
            item_ops["get"] = _v3_operation(d, "get", ref, gvk=gvk)
        if "update" in verbs:
            item_ops["put"] = _v3_operation(
                d,
                "put",
                ref,
                gvk=gvk,
                params=_WRITE_PARAMS,
                body_types=("application/json", "application/yaml"),
            )
        if "patch" in verbs:
            item_ops["patch"] = _v3_operation(
                d,
                "patch",
                ref,
                gvk=gvk,
                params=[*_WRITE_PARAMS, _query("force", "Force apply.")],
                body_types=PATCH_CONTENT_TYPES,
            )
        if "delete" in verbs:
            item_ops["delete"] = _v3_operation(
                d, "delete", ref, gvk=gvk, params=[_query("dryRun", "")]
            )
        paths[item] = item_ops
        for sub in d.subresources:
            sub_gvk = _gvk(d, kind=sub.kind, group=sub.group, version=sub.version)
            sub_ref = prefix + _sub_name(d, sub)
            ops: dict[str, Any] = {"parameters": item_params}
            if "get" in sub.verbs:
                ops["get"] = _v3_operation(d, "get", sub_ref, gvk=sub_gvk)
            if "update" in sub.verbs:
                ops["put"] = _v3_operation(
                    d,
                    "put",
                    sub_ref,
                    gvk=sub_gvk,
                    params=_WRITE_PARAMS,
                    body_types=("application/json",),
                )
            if "patch" in sub.verbs:
                ops["patch"] = _v3_operation(
                    d,
                    "patch",
                    sub_ref,
                    gvk=sub_gvk,
                    params=[*_WRITE_PARAMS, _query("force", "")],
                    body_types=PATCH_CONTENT_TYPES,
                )
            if "create" in sub.verbs:
                post = _v3_operation(d, "post", sub_ref, gvk=sub_gvk, params=[_DRY_RUN])
                if sub.body is not None:
                    body_ref = prefix + _definition_name(d, sub.body.name)
                    post["requestBody"] = {
                        "required": sub.body_required,
                        "content": {"application/json": {"schema": {"$ref": body_ref}}},
                    }
                ops["post"] = post
            paths[f"{item}/{sub.name}"] = ops
    components.update(_subresource_schemas(definitions, ref_prefix=prefix))
    return {
        "openapi": "3.0.0",
        "info": {"title": "plnt", "version": version},
        "paths": paths,
        "components": {"schemas": components},
    }


_DRY_RUN = _query("dryRun", "When present (All), modifications are not persisted.")

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Status is a return value for calls that don't return other objects.",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "status": {"type": "string"},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "code": {"type": "integer"},
        "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}],
}

SCALE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Scale represents a scaling request for a resource.",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "status": {
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}},
        },
    },
    "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}],
}


def v2_document(
    group: str, version: str, definitions: tuple[ResourceDefinition, ...]
) -> dict[str, Any]:
    """Swagger 2.0: same schemas under #/definitions, operations with `consumes`."""
    prefix = "#/definitions/"
    defs = schemas(definitions, ref_prefix=prefix)
    paths: dict[str, Any] = {}
    for d in definitions:
        ref = prefix + _definition_name(d, d.model.__name__)
        gvk = _gvk(d)
        collection = collection_path(d, group, version)

        def op(
            action: str,
            *,
            consumes: tuple[str, ...] = (),
            target: str = ref,
            op_gvk: dict[str, str] = gvk,
            kind: str = d.kind,
        ) -> dict[str, Any]:
            out: dict[str, Any] = {
                "operationId": f"{action}{kind}",
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": op_gvk,
                "produces": ["application/json"],
                "responses": {"200": {"description": "OK", "schema": {"$ref": target}}},
            }
            if consumes:
                out["consumes"] = list(consumes)
            return out

        verbs = set(d.verbs)
        collection_ops: dict[str, Any] = {}
        if "list" in verbs:
            collection_ops["get"] = op("list")
        if "create" in verbs:
            collection_ops["post"] = op("post", consumes=("application/json",))
        paths[collection] = collection_ops
        item_ops: dict[str, Any] = {}
        if "get" in verbs:
            item_ops["get"] = op("get")
        if "update" in verbs:
            item_ops["put"] = op("put", consumes=("application/json",))
        if "patch" in verbs:
            item_ops["patch"] = op("patch", consumes=PATCH_CONTENT_TYPES)
        if "delete" in verbs:
            item_ops["delete"] = op("delete")
        paths[collection + "/{name}"] = item_ops
        for sub in d.subresources:
            target = prefix + _sub_name(d, sub)
            sgvk = _gvk(d, kind=sub.kind, group=sub.group, version=sub.version)
            sub_ops: dict[str, Any] = {}
            if "get" in sub.verbs:
                sub_ops["get"] = op("get", target=target, op_gvk=sgvk)
            if "update" in sub.verbs:
                sub_ops["put"] = op(
                    "put", consumes=("application/json",), target=target, op_gvk=sgvk
                )
            if "patch" in sub.verbs:
                sub_ops["patch"] = op(
                    "patch", consumes=PATCH_CONTENT_TYPES, target=target, op_gvk=sgvk
                )
            if "create" in sub.verbs:
                sub_ops["post"] = op(
                    "post", consumes=("application/json",), target=target, op_gvk=sgvk
                )
            paths[f"{collection}/{{name}}/{sub.name}"] = sub_ops
    defs.update(_subresource_schemas(definitions, ref_prefix=prefix))
    return {
        "swagger": "2.0",
        "info": {"title": "plnt", "version": version},
        "paths": paths,
        "definitions": defs,
    }


def content_hash(document: dict[str, Any]) -> str:
    """Upper-case hex sha512 of the canonical JSON, as kube-openapi's `?hash=` uses."""
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest().upper()
