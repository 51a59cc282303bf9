"""WorkflowRun admission: a spec reference the pull could never resolve is a 422 naming it."""

from __future__ import annotations

from tests.support.api_server import BASE, DIGEST, Api, workflowrun


async def test_an_unparseable_reference_is_refused_naming_spec_workflow_ref(api: Api) -> None:
    body = workflowrun("bad-ref")
    body["spec"]["workflow"]["ref"] = "ftp://example/wf"
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    causes = reply.json["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.workflow.ref"]
    assert 'Invalid value: "ftp://example/wf": unknown reference' in causes[0]["message"]
    assert (await api.call("GET", f"{BASE}/bad-ref")).status == 404


async def test_a_reference_pinned_to_another_digest_than_the_spec_is_refused(api: Api) -> None:
    other = "sha256:" + "ab" * 32
    body = workflowrun("two-digests")
    body["spec"]["workflow"]["ref"] = f"oci://r.example/wf:1@{other}"
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    message = reply.json["details"]["causes"][0]["message"]
    assert other in message and DIGEST in message


async def test_a_reference_pinned_to_the_same_digest_is_accepted(api: Api) -> None:
    body = workflowrun("pinned")
    body["spec"]["workflow"]["ref"] = f"oci-layout:examples:fanout@{DIGEST}"
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 201, reply.text


async def test_a_route_on_local_runners_is_refused_naming_spec_route(api: Api) -> None:
    body = workflowrun("routed-local")
    body["spec"]["route"] = {"gateway": {"name": "public"}}
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    causes = reply.json["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.route"]
    assert "spec.route needs spec.target: kubernetes" in causes[0]["message"]


async def test_a_route_with_a_host_name_the_gateway_api_refuses_is_refused(api: Api) -> None:
    body = workflowrun("routed-bad-host")
    body["spec"].update(target="kubernetes", route={"hostnames": ["Not A Host"]})
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    assert "spec.route.hostnames[0]" in [c["field"] for c in reply.json["details"]["causes"]]


async def test_a_route_on_kubernetes_runners_is_accepted_as_written(api: Api) -> None:
    body = workflowrun("routed")
    route = {"gateway": {"name": "public", "sectionName": "https"}, "hostnames": ["*.example.com"]}
    body["spec"].update(target="kubernetes", route=route)
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 201, reply.text
    assert reply.json["spec"]["route"] == {"enabled": True, **route}


async def test_a_fallback_that_is_the_backend_itself_is_refused_naming_spec_fallback_name(
    api: Api,
) -> None:
    body = workflowrun("self-fallback")
    body["spec"].update(backend={"name": "llama"}, fallback={"name": "llama"})
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    causes = reply.json["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.fallback.name"]
    assert "another PlntBackend than spec.backend.name" in causes[0]["message"]
    assert (await api.call("GET", f"{BASE}/self-fallback")).status == 404


async def test_a_fallback_without_a_name_is_refused_naming_spec_fallback_name(api: Api) -> None:
    body = workflowrun("nameless-fallback")
    body["spec"].update(backend={"name": "llama"}, fallback={"model": "small"})
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    assert "spec.fallback.name" in [c["field"] for c in reply.json["details"]["causes"]]


async def test_a_fallback_naming_another_backend_is_accepted_as_written(api: Api) -> None:
    body = workflowrun("with-fallback")
    body["spec"].update(backend={"name": "llama"}, fallback={"name": "echo", "model": "tiny"})
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 201, reply.text
    assert reply.json["spec"]["fallback"] == {"name": "echo", "model": "tiny"}
