"""A kind reaches the server through its one install value: the composition root lists
each kind once, a cluster leaves out what it serves itself, and a kind added to the list
is served by the generic machinery (its long-running subresources, its grants, its
subresource handlers) without any generic module naming it."""

from __future__ import annotations

import dataclasses

import pytest
from aiohttp import web
from multidict import MultiDict

from plnt.api import names
from plnt.apiserver import app as app_module
from plnt.apiserver import authz, kinds, longrunning, requestinfo
from plnt.apiserver.authn import UserInfo
from plnt.apiserver.authz import Attributes, Decision
from plnt.registry import plntbackends
from plnt.registry.definitions import INVOKERS, VIEWERS, Grant, Subresource

WIDGETS = dataclasses.replace(
    plntbackends.DEFINITION,
    kind="Widget",
    plural="widgets",
    singular="widget",
    subresources=(Subresource("poke", "Widget", ("create",), long_running=True),),
    grants=(Grant(VIEWERS, ("get",), ("",)), Grant(INVOKERS, ("create",), ("poke",))),
)


async def _poke(request: web.Request, *_: object) -> web.StreamResponse:
    return web.Response(text="poked")


WIDGET = kinds.KindInstall(definition=WIDGETS, subresources={"poke": kinds.Subresource(_poke)})


def test_the_composition_root_lists_every_kind_once_in_discovery_order() -> None:
    served = kinds.served(app_module.KINDS, standalone=True)

    assert [d.plural for d in served.plnt] == [
        names.WORKFLOWRUNS,
        names.BACKENDS,
        names.INVOCATIONS,
        names.WORKFLOWS,
    ]
    assert [d.plural for d in served.core] == ["events", "namespaces", "services"]


def test_a_cluster_serves_neither_namespaces_nor_services_itself() -> None:
    served = kinds.served(app_module.KINDS, standalone=False)

    assert [d.plural for d in served.core] == ["events"]
    assert served.plnt == kinds.served(app_module.KINDS, standalone=True).plnt


def test_a_kind_installed_twice_is_refused_at_composition() -> None:
    with pytest.raises(ValueError, match=r"widgets\.plnt\.work is installed twice"):
        kinds.served((WIDGET, WIDGET), standalone=True)


def test_an_added_kind_is_served_by_the_generic_machinery_from_its_install() -> None:
    installs = (*app_module.KINDS, WIDGET)
    served = kinds.served(installs, standalone=True)
    path = "/apis/plnt.work/v1/namespaces/ns/widgets/w/poke"
    info = requestinfo.parse("POST", path, MultiDict())

    check = longrunning.LongRunning(served.definitions)
    handlers = kinds.Subresources(installs)
    policy = authz.PolicyAuthorizer(authz.default_policy(served.definitions))
    attributes = Attributes(
        user=UserInfo(name="ivan", groups=(INVOKERS,)),
        verb="create",
        resource_request=True,
        path=path,
        api_group="plnt.work",
        api_version="v1",
        namespace="ns",
        resource="widgets",
        subresource="poke",
        name="w",
    )

    assert check.is_long_running(info, MultiDict()) is True
    found = handlers.find(info)
    assert found is not None and found.handler is _poke
    assert policy.decide(attributes) == (Decision.ALLOW, "")
    without = authz.PolicyAuthorizer(authz.default_policy(app_module.STANDALONE_RESOURCES))
    assert without.decide(attributes) == (Decision.NO_OPINION, "")


def test_the_default_policy_needs_the_installed_kinds() -> None:
    with pytest.raises(ValueError, match="definitions"):
        authz.standalone_authorizer()
