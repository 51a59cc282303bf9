"""charts/plnt's RBAC (the API server's delegation, the aggregated user roles, the
worker) and its etcd (StatefulSet members, certificates, or external servers)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography import x509

from tests.charts import rendering
from tests.charts.rendering import NAMESPACE, READ, WRITE, Rendered, aggregated, rbac_allows, role

Render = Callable[[str], Rendered]

GROUP = "plnt.work"
ACTIONS = ["invoke", "rollback", "abort", "promote", "retry", "bench"]
SUBRESOURCES = [
    "workflowruns/status",
    "workflowruns/scale",
    *(f"workflowruns/{a}" for a in ACTIONS),
    "workflowruns/proxy",
    "workflowruns/invocationlog",
    "workflowruns/invocations",
    "workflowruns/shadow",
    "plntbackends/status",
]


def bound_to(r: Rendered, role_name: str, *, kind: str = "ClusterRoleBinding") -> list[str]:
    """ServiceAccounts (namespace/name) bound to `role_name` by bindings of `kind`."""
    return [
        f"{s['namespace']}/{s['name']}"
        for b in r.all(kind)
        if b["roleRef"]["name"] == role_name
        for s in b["subjects"]
        if s["kind"] == "ServiceAccount"
    ]


# -- the API server's own permissions -------------------------------------------------


def test_api_server_may_delegate_authn_authz_and_read_the_authentication_configmap(
    rendered: Render,
) -> None:
    r = rendered("default")
    sa = f"{NAMESPACE}/plnt-apiserver"
    assert r.one("ServiceAccount", "plnt-apiserver")
    assert sa in bound_to(r, "system:auth-delegator")
    (reader,) = [b for b in r.all("RoleBinding") if b["metadata"]["namespace"] == "kube-system"]
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    assert sa in bound_to(r, "extension-apiserver-authentication-reader", kind="RoleBinding")
    deployment = r.one("Deployment", "plnt-apiserver")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "plnt-apiserver"


def test_api_server_may_record_events_in_both_event_apis(rendered: Render) -> None:
    r = rendered("default")
    rules = role(r, "plnt-apiserver-events")
    for group in ("", "events.k8s.io"):
        for verb in ("create", "patch", "update"):
            assert rbac_allows(rules, group=group, resource="events", verb=verb), (group, verb)
    assert not rbac_allows(rules, group="", resource="events", verb="delete")
    assert f"{NAMESPACE}/plnt-apiserver" in bound_to(r, "plnt-apiserver-events")


# -- the roles users get through admin, edit and view ---------------------------------


def test_view_reads_every_kind_and_invocations_and_writes_nothing(rendered: Render) -> None:
    rules = aggregated(rendered("default"), "view")
    for resource in (
        "workflowruns",
        "plntbackends",
        "workflowruns/invocationlog",
        "workflowruns/invocations",
        "workflowruns/shadow",
    ):
        for verb in READ:
            assert rbac_allows(rules, group=GROUP, resource=resource, verb=verb), resource
    for resource in ("workflowruns", *SUBRESOURCES):
        for verb in WRITE:
            assert not rbac_allows(rules, group=GROUP, resource=resource, verb=verb)


@pytest.mark.parametrize("to", ["edit", "admin"])
def test_edit_and_admin_cover_every_subresource_with_the_verbs_kube_authorizes(
    rendered: Render, to: str
) -> None:
    rules = aggregated(rendered("default"), to)
    expected: dict[str, list[str]] = {
        "workflowruns": READ + WRITE,
        "plntbackends": READ + WRITE,
        "workflowruns/status": READ,
        "plntbackends/status": READ,
        "workflowruns/invocationlog": READ,
        "workflowruns/invocations": READ,
        "workflowruns/shadow": READ,
        "workflowruns/scale": ["get", "update", "patch"],
        "workflowruns/proxy": ["get", "create"],
        **{f"workflowruns/{a}": ["create"] for a in ACTIONS},
    }
    assert set(expected) >= set(SUBRESOURCES)
    for resource, verbs in expected.items():
        for verb in verbs:
            assert rbac_allows(rules, group=GROUP, resource=resource, verb=verb), (resource, verb)
    # Users never write status: that is the saga's.
    assert not rbac_allows(rules, group=GROUP, resource="workflowruns/status", verb="update")


def test_admin_is_edit(rendered: Render) -> None:
    r = rendered("default")
    assert aggregated(r, "admin") == aggregated(r, "edit")


# -- the worker -----------------------------------------------------------------------


def test_worker_reads_runs_writes_status_removes_its_finalizer_and_records_events(
    rendered: Render,
) -> None:
    r = rendered("default")
    rules = role(r, "plnt-worker")
    allowed = [
        *((res, v) for res in ("workflowruns", "plntbackends") for v in READ),
        *(
            (res, v)
            for res in ("workflowruns/status", "plntbackends/status")
            for v in ("patch", "update")
        ),
        ("workflowruns", "patch"),
    ]
    for resource, verb in allowed:
        assert rbac_allows(rules, group=GROUP, resource=resource, verb=verb), (resource, verb)
    for verb in ("create", "patch"):
        assert rbac_allows(rules, group="", resource="events", verb=verb)
    for resource, verb in [("workflowruns", "delete"), ("workflowruns", "create")]:
        assert not rbac_allows(rules, group=GROUP, resource=resource, verb=verb)
    assert f"{NAMESPACE}/plnt-worker" in bound_to(r, "plnt-worker")


# -- etcd -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "members"), [("default", 1), ("ha", 3)])
def test_etcd_members_find_each_other_through_the_headless_service(
    rendered: Render, name: str, members: int
) -> None:
    r = rendered(name)
    sts = r.one("StatefulSet", "plnt-etcd")
    assert sts["spec"]["replicas"] == members
    assert sts["spec"]["serviceName"] == "plnt-etcd-headless"
    headless = r.one("Service", "plnt-etcd-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "8Gi"

    f = rendering.flags(rendering.container(sts, "etcd")["args"])
    domain = f"plnt-etcd-headless.{NAMESPACE}.svc"
    cluster = dict(m.split("=", 1) for m in (f["initial-cluster"] or "").split(","))
    assert cluster == {
        f"plnt-etcd-{i}": f"https://plnt-etcd-{i}.{domain}:2380" for i in range(members)
    }
    assert f["initial-advertise-peer-urls"] == f"https://$(POD_NAME).{domain}:2380"
    assert f["client-cert-auth"] == "true" and f["peer-client-cert-auth"] == "true"
    servers = f"https://plnt-etcd-{{}}.{domain}:2379"
    serve = rendering.container(r.one("Deployment", "plnt-apiserver"), "apiserver")["args"]
    expected = ",".join(servers.format(i) for i in range(members))
    assert f"--etcd-servers={expected}" in serve
    budgets = {p["metadata"]["name"] for p in r.all("PodDisruptionBudget")}
    assert ("plnt-etcd" in budgets) is (members == 3)


def test_etcd_certificates_cover_every_member_and_share_one_ca(rendered: Render) -> None:
    r = rendered("ha")
    server = r.one("Secret", "plnt-etcd-server-tls")
    client = r.one("Secret", "plnt-etcd-client-tls")
    ca = rendering.certificate(rendering.secret_bytes(server, "ca.crt"))
    assert rendering.secret_bytes(client, "ca.crt") == rendering.secret_bytes(server, "ca.crt")
    serving = rendering.certificate(rendering.secret_bytes(server, "tls.crt"))
    client_cert = rendering.certificate(rendering.secret_bytes(client, "tls.crt"))
    serving.verify_directly_issued_by(ca)
    client_cert.verify_directly_issued_by(ca)
    for i in range(3):
        assert rendering.covers(serving, f"plnt-etcd-{i}.plnt-etcd-headless.{NAMESPACE}.svc")
    assert not rendering.covers(serving, f"plnt-etcd-0.elsewhere.{NAMESPACE}.svc")
    eku = x509.oid.ExtendedKeyUsageOID
    # Members present the one certificate both as servers and as peer clients.
    serving_usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {eku.SERVER_AUTH, eku.CLIENT_AUTH} <= set(serving_usages)
    client_usages = client_cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert eku.CLIENT_AUTH in client_usages


def test_external_etcd_uses_the_given_servers_and_secret_and_runs_no_etcd(
    rendered: Render,
) -> None:
    r = rendered("external-etcd")
    assert not r.all("StatefulSet")
    assert not [s for s in r.all("Secret") if "etcd" in s["metadata"]["name"]]
    deployment = r.one("Deployment", "plnt-apiserver")
    args = rendering.container(deployment, "apiserver")["args"]
    f = rendering.flags(args[1:])
    assert f["etcd-servers"] == ",".join(rendering.EXTERNAL_ETCD_SERVERS)
    for flag in ("etcd-cafile", "etcd-certfile", "etcd-keyfile"):
        path = f[flag]
        assert path is not None
        _, volume = rendering.mount_of(deployment, "apiserver", path)
        assert volume["secret"]["secretName"] == "etcd-client"


def test_network_policies_admit_etcd_clients_only_from_the_api_server(rendered: Render) -> None:
    r = rendered("cert-manager")
    policy = r.one("NetworkPolicy", "plnt-etcd")
    api_labels = r.one("Deployment", "plnt-apiserver")["spec"]["template"]["metadata"]["labels"]
    worker_labels = r.one("Deployment", "plnt-worker")["spec"]["template"]["metadata"]["labels"]
    client_rule = next(
        rule for rule in policy["spec"]["ingress"] if rule["ports"][0]["port"] == "client"
    )
    selectors = [peer["podSelector"]["matchLabels"] for peer in client_rule["from"]]
    assert any(s.items() <= api_labels.items() for s in selectors)
    assert not any(s.items() <= worker_labels.items() for s in selectors)
    api_policy = r.one("NetworkPolicy", "plnt-apiserver")
    (rule,) = api_policy["spec"]["ingress"]
    assert "from" not in rule, "kube-apiserver connects from the host network"
