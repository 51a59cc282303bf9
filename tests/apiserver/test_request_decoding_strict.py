"""Create and update bodies are decoded as kube-apiserver decodes a custom resource's.

A body must say its kind (kube: 400 "Object 'Kind' is missing in '...'"), its
apiVersion and kind must be strings, and a patch media type is not an object's
(415). Nothing is written when a body is refused. A built-in kind (an Event, a
Namespace) is the exception: kube takes its missing apiVersion and kind from the URL.
Real HTTPS, real etcd.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.api_server import BASE, Api, workflowrun

UNKNOWN_FORMAT = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json, application/yaml"
)


def without_kind(name: str) -> dict[str, Any]:
    body = workflowrun(name)
    del body["kind"]
    return body


async def test_a_body_without_kind_is_refused_with_kubes_words(api: Api) -> None:
    data = json.dumps(without_kind("nokind")).encode()
    reply = await api.call("POST", BASE, data=data, headers={"Content-Type": "application/json"})
    assert reply.status == 400, reply.text
    text = data.decode()
    assert reply.json["message"] == (
        "the object provided is unrecognized (must be of type WorkflowRun): "
        f"Object 'Kind' is missing in '{text}' ({text[:30]} ...)"
    )
    ignored = await api.call(
        "POST",
        BASE,
        params={"fieldValidation": "Ignore"},
        data=data,
        headers={"Content-Type": "application/json"},
    )
    assert ignored.status == 400
    assert ignored.json["message"] == (
        'WorkflowRun in version "v1" cannot be handled as a WorkflowRun: '
        f"Object 'Kind' is missing in '{text}'"
    )
    empty_kind = await api.call("POST", BASE, body={**workflowrun("nokind"), "kind": ""})
    assert empty_kind.status == 400 and "Object 'Kind' is missing" in empty_kind.json["message"]
    assert (await api.call("GET", f"{BASE}/nokind")).status == 404


async def test_an_update_without_kind_changes_nothing(api: Api) -> None:
    created = await api.call("POST", BASE, body=workflowrun("keep"))
    assert created.status == 201
    body = without_kind("keep")
    body["spec"]["replicas"] = 3
    reply = await api.call("PUT", f"{BASE}/keep", body=body)
    assert reply.status == 400 and "Object 'Kind' is missing" in reply.json["message"]
    now = await api.call("GET", f"{BASE}/keep")
    assert now.json["metadata"]["resourceVersion"] == created.json["metadata"]["resourceVersion"]


async def test_a_yaml_body_without_kind_is_summarised_in_hex_as_kube_does(api: Api) -> None:
    data = b"apiVersion: plnt.work/v1\nmetadata: {name: y}\nspec: {}\n"
    reply = await api.call("POST", BASE, data=data, headers={"Content-Type": "application/yaml"})
    assert reply.status == 400, reply.text
    assert reply.json["message"].endswith(f"({data[:30].hex()} ...)")


async def test_type_meta_that_is_not_a_string_or_a_body_that_is_not_an_object_is_a_400(
    api: Api,
) -> None:
    cases = [
        (
            {**workflowrun("t1"), "kind": 5},
            "couldn't get version/kind; json parse error: json: cannot unmarshal number into "
            "Go struct field .kind of type string",
        ),
        (
            {**workflowrun("t2"), "apiVersion": ["plnt.work/v1"]},
            "cannot unmarshal array into Go struct field .apiVersion of type string",
        ),
        (
            {**workflowrun("t3"), "apiVersion": "plnt.work/v1/extra"},
            "unexpected GroupVersion string: plnt.work/v1/extra",
        ),
        ([workflowrun("t4")], "cannot unmarshal array into Go value of type struct {"),
    ]
    for body, says in cases:
        reply = await api.call("POST", BASE, body=body)
        assert reply.status == 400, (body, reply.text)
        message = reply.json["message"]
        assert message.startswith("the object provided is unrecognized"), message
        assert says in message, message


async def test_a_patch_media_type_on_create_or_update_is_unsupported(api: Api) -> None:
    for media in (
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "text/plain",
    ):
        data = json.dumps(workflowrun("pt")).encode()
        reply = await api.call("POST", BASE, data=data, headers={"Content-Type": media})
        assert reply.status == 415, (media, reply.text)
        assert reply.json["reason"] == "UnsupportedMediaType"
        assert reply.json["message"] == UNKNOWN_FORMAT
    assert (await api.call("GET", f"{BASE}/pt")).status == 404
    created = await api.call("POST", BASE, body=workflowrun("pt"))
    assert created.status == 201
    changed = {**created.json, "spec": {**created.json["spec"], "replicas": 2}}
    reply = await api.call(
        "PUT",
        f"{BASE}/pt",
        data=json.dumps(changed).encode(),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert reply.status == 415 and reply.json["message"] == UNKNOWN_FORMAT
    now = await api.call("GET", f"{BASE}/pt")
    assert now.json["spec"]["replicas"] == created.json["spec"]["replicas"]


async def test_the_checks_run_in_kubes_order(api: Api) -> None:
    """Create: media type before options; update: options before media type."""
    data = json.dumps(without_kind("ord")).encode()
    create = await api.call(
        "POST",
        BASE,
        params={"fieldValidation": "Nope"},
        data=data,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert create.status == 415, create.text
    update = await api.call(
        "PUT",
        f"{BASE}/ord",
        params={"fieldValidation": "Nope"},
        data=data,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert update.status == 422, update.text
    options_then_body = await api.call(
        "POST",
        BASE,
        params={"dryRun": "x"},
        data=data,
        headers={"Content-Type": "application/json"},
    )
    assert options_then_body.status == 422, options_then_body.text


async def test_a_built_in_kind_takes_a_missing_api_version_and_kind_from_the_url(
    api: Api,
) -> None:
    """kube decodes Events and Namespaces with the URL's kind as the default, as kopf and
    client-go's event recorders rely on; a custom resource must still name its kind."""
    events = "/api/v1/namespaces/default/events"
    event = {
        "metadata": {"name": "untyped"},
        "involvedObject": {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "name": "r",
            "namespace": "default",
        },
        "reason": "Seen",
        "message": "no apiVersion, no kind",
        "type": "Normal",
    }
    created = await api.call("POST", events, body=event)
    assert created.status == 201, created.text
    assert (created.json["apiVersion"], created.json["kind"]) == ("v1", "Event")
    stored = await api.call("GET", f"{events}/untyped")
    assert (stored.json["apiVersion"], stored.json["kind"]) == ("v1", "Event")
    assert stored.json["reason"] == "Seen" and stored.json["involvedObject"]["name"] == "r"

    namespace = await api.call("POST", "/api/v1/namespaces", body={"metadata": {"name": "bare"}})
    assert namespace.status == 201, namespace.text
    assert (namespace.json["apiVersion"], namespace.json["kind"]) == ("v1", "Namespace")
    stored = await api.call("GET", "/api/v1/namespaces/bare")
    assert (stored.json["apiVersion"], stored.json["kind"]) == ("v1", "Namespace")


async def test_a_custom_resource_without_api_version_and_kind_is_still_refused(
    api: Api,
) -> None:
    backends = "/apis/plnt.work/v1/namespaces/default/plntbackends"
    cases = [
        (BASE, "WorkflowRun", workflowrun("untyped")),
        (
            backends,
            "PlntBackend",
            {"metadata": {"name": "untyped"}, "spec": {"type": "echo"}},
        ),
    ]
    for path, kind, body in cases:
        body.pop("apiVersion", None)
        body.pop("kind", None)
        text = json.dumps(body)
        reply = await api.call(
            "POST", path, data=text.encode(), headers={"Content-Type": "application/json"}
        )
        assert reply.status == 400, (kind, reply.text)
        assert reply.json["reason"] == "BadRequest"
        assert reply.json["message"] == (
            f"the object provided is unrecognized (must be of type {kind}): "
            f"Object 'Kind' is missing in '{text}' ({text[:30]} ...)"
        )
        assert (await api.call("GET", f"{path}/untyped")).status == 404
