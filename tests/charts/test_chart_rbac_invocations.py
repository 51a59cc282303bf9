"""The chart's RBAC for Invocations, and a check that no served resource lacks a grant.

kube-apiserver authorizes `create invocations` before proxying; plnt then asks whether the
same user may `create workflowruns/invoke` on the run (admission), so the roles that may
create Invocations must also invoke. The worker reads Invocations, writes their status and
deletes them (TTL, teardown), and never creates one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plnt.apiserver.app import PLNT_RESOURCES
from tests.charts.rendering import READ, WRITE, Rendered, aggregated, rbac_allows, role

Render = Callable[[str], Rendered]

GROUP = "plnt.work"


def test_view_reads_invocations_and_the_invocation_log_and_creates_none(
    rendered: Render,
) -> None:
    rules = aggregated(rendered("default"), "view")
    for resource in ("invocations", "invocations/status", "workflowruns/invocationlog"):
        for verb in READ:
            assert rbac_allows(rules, group=GROUP, resource=resource, verb=verb), resource
    for verb in WRITE:
        assert not rbac_allows(rules, group=GROUP, resource="invocations", verb=verb), verb


@pytest.mark.parametrize("to", ["edit", "admin"])
def test_edit_and_admin_create_invocations_and_may_invoke_as_admission_requires(
    rendered: Render, to: str
) -> None:
    rules = aggregated(rendered("default"), to)
    for verb in READ + WRITE:
        assert rbac_allows(rules, group=GROUP, resource="invocations", verb=verb), verb
    assert rbac_allows(rules, group=GROUP, resource="workflowruns/invoke", verb="create")
    for verb in READ:
        assert rbac_allows(rules, group=GROUP, resource="invocations/status", verb=verb)
    assert not rbac_allows(rules, group=GROUP, resource="invocations/status", verb="patch")


def test_worker_reads_invocations_writes_their_status_and_deletes_them(
    rendered: Render,
) -> None:
    rules = role(rendered("default"), "plnt-worker")
    for verb in (*READ, "delete"):
        assert rbac_allows(rules, group=GROUP, resource="invocations", verb=verb), verb
    for verb in ("patch", "update"):
        assert rbac_allows(rules, group=GROUP, resource="invocations/status", verb=verb), verb
    assert not rbac_allows(rules, group=GROUP, resource="invocations", verb="create")


@pytest.mark.parametrize("to", ["view", "edit"])
def test_every_served_resource_and_subresource_is_granted_to_view_and_edit(
    rendered: Render, to: str
) -> None:
    """A kind or subresource added to the catalog without RBAC fails here."""
    rules = aggregated(rendered("default"), to)
    missing = []
    for definition in PLNT_RESOURCES:
        names = [
            definition.plural,
            *(f"{definition.plural}/{s.name}" for s in definition.subresources),
        ]
        for name in names:
            verbs = READ + WRITE + ["create"]
            if not any(rbac_allows(rules, group=GROUP, resource=name, verb=v) for v in verbs):
                missing.append(name)
    allowed_gaps = {
        "view": {
            # Actions only edit may take: view has no verb on them at all.
            *(f"workflowruns/{a}" for a in ("invoke", "rollback", "abort", "promote", "retry")),
            "workflowruns/proxy",
        },
        "edit": set(),
    }[to]
    assert set(missing) <= allowed_gaps, sorted(set(missing) - allowed_gaps)
