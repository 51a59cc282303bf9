"""PlntBackend admission: a credentials reference must name a Secret key kube would accept.

The name and key also name a file in standalone mode, so anything that could leave the
secrets directory is refused here, with kube's own texts, and nothing is stored.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api_server import BACKENDS, Api, plntbackend


def backend(name: str, credentials: dict[str, Any]) -> dict[str, Any]:
    return plntbackend(
        name, type="openai", endpoint="http://127.0.0.1:1/v1", credentialsRef=credentials
    )


@pytest.mark.parametrize(
    ("credentials", "field", "text"),
    [
        ({"name": "../etc", "key": "token"}, "spec.credentialsRef.name", "RFC 1123 subdomain"),
        ({"name": "Upper", "key": "token"}, "spec.credentialsRef.name", "RFC 1123 subdomain"),
        ({"name": "llm", "key": "a/b"}, "spec.credentialsRef.key", "a valid config key"),
        ({"name": "llm", "key": ".."}, "spec.credentialsRef.key", "must not be '..'"),
        ({"name": "llm", "key": "..data"}, "spec.credentialsRef.key", "must not start with '..'"),
    ],
)
async def test_a_reference_kube_would_refuse_is_422_naming_the_field(
    api: Api, credentials: dict[str, Any], field: str, text: str
) -> None:
    reply = await api.call("POST", BACKENDS, body=backend("bad", credentials))
    assert reply.status == 422, reply.text
    causes = reply.json["details"]["causes"]
    assert [cause["field"] for cause in causes] == [field]
    value = credentials[field.rpartition(".")[2]]
    assert causes[0]["message"].startswith(f'Invalid value: "{value}": ')
    assert text in causes[0]["message"]
    assert (await api.call("GET", f"{BACKENDS}/bad")).status == 404


async def test_a_valid_reference_is_stored_with_the_default_key(api: Api) -> None:
    reply = await api.call("POST", BACKENDS, body=backend("good", {"name": "openai.prod"}))
    assert reply.status == 201, reply.text
    assert reply.json["spec"]["credentialsRef"] == {"name": "openai.prod", "key": "token"}
    dotted = await api.call(
        "POST", BACKENDS, body=backend("dotted", {"name": "llm", "key": ".dockerconfigjson"})
    )
    assert dotted.status == 201, dotted.text
