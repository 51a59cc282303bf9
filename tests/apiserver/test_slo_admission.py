"""spec.slo and a backend's spec.pricing at admission: every mistake a 422 naming its field."""

from __future__ import annotations

from tests.support.api_server import BACKENDS, BASE, Api, plntbackend, workflowrun


def _fields(reply: object) -> list[str]:
    return [c.get("field", "") for c in reply.json["details"]["causes"]]  # type: ignore[attr-defined]


async def test_objectives_are_stored_with_their_defaults(api: Api) -> None:
    body = workflowrun("slo-ok")
    body["spec"]["slo"] = {
        "timeToFirstToken": {"milliseconds": 500},
        "timePerOutputToken": {"percentile": 90, "milliseconds": 40},
        "maxErrorRate": 0.01,
        "minTokensPerSecond": {"tokensPerSecond": 20},
        "maxCostPerMillionTokens": 2.5,
    }
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 201, reply.text
    slo = reply.json["spec"]["slo"]
    assert slo["timeToFirstToken"] == {"percentile": 95.0, "milliseconds": 500}
    assert slo["windowSeconds"] == 3600
    assert slo["minTokensPerSecond"]["percentile"] == 95.0


async def test_every_malformed_objective_is_named_in_one_answer(api: Api) -> None:
    body = workflowrun("slo-bad")
    body["spec"]["slo"] = {
        "timeToFirstToken": {"percentile": 100, "milliseconds": 500},
        "latency": {"milliseconds": -1},
        "maxErrorRate": 1.5,
        "windowSeconds": 10,
    }
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    fields = _fields(reply)
    for field in (
        "spec.slo.timeToFirstToken.percentile",
        "spec.slo.latency.milliseconds",
        "spec.slo.maxErrorRate",
        "spec.slo.windowSeconds",
    ):
        assert field in fields, fields
    assert (await api.call("GET", f"{BASE}/slo-bad")).status == 404


async def test_an_slo_without_objectives_is_refused_naming_spec_slo(api: Api) -> None:
    body = workflowrun("slo-empty")
    body["spec"]["slo"] = {"windowSeconds": 600}
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    assert _fields(reply) == ["spec.slo"]
    assert "at least one objective" in reply.json["details"]["causes"][0]["message"]


async def test_a_first_token_slower_than_the_whole_call_is_refused(api: Api) -> None:
    body = workflowrun("slo-impossible")
    body["spec"]["slo"] = {
        "timeToFirstToken": {"milliseconds": 900},
        "latency": {"milliseconds": 800},
    }
    reply = await api.call("POST", BASE, body=body)
    assert reply.status == 422, reply.text
    assert _fields(reply) == ["spec.slo.timeToFirstToken.milliseconds"]


async def test_backend_prices_per_token_are_accepted(api: Api) -> None:
    pricing = {"inputPerMillionTokens": 0.5, "outputPerMillionTokens": 1.5}
    body = plntbackend("priced", type="echo", pricing=pricing)
    reply = await api.call("POST", BACKENDS, body=body)
    assert reply.status == 201, reply.text
    assert reply.json["spec"]["pricing"]["currency"] == "USD"


async def test_backend_prices_both_per_token_and_per_hour_are_refused(api: Api) -> None:
    pricing = {"inputPerMillionTokens": 0.5, "perHour": 3, "currency": "usd"}
    body = plntbackend("double-priced", type="echo", pricing=pricing)
    reply = await api.call("POST", BACKENDS, body=body)
    assert reply.status == 422, reply.text
    fields = _fields(reply)
    assert "spec.pricing.currency" in fields and "spec.pricing.perHour" in fields, fields
