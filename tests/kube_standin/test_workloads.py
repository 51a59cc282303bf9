"""The workload kinds and the kubelet simulator: real `plnt runner` replicas behind a Service.

Three simulated nodes (two CPU nodes, one tainted GPU node with one GPU); every test uses
its own namespace. Processes are counted by their command line (their files live under
the simulator's per-pod directories), and none may outlive the module.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.kube import kubelet, standin
from tests.support.kube.clients import session
from tests.support.processes import kill_all, live_processes
from tests.support.waiting import eventually

ADMIN = "admin-token-workloads"
IMAGE = "ghcr.io/plnt/plnt:0.1.0"
SPEC = Path(__file__).resolve().parents[2] / "examples" / "chat.workflow.yaml"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(kube: standin.KubeStandIn) -> Iterator[kubelet.Kubelet]:
    kube.add_user(ADMIN, "cluster-admin", ["system:masters"])
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    simulator = kube.start_kubelet(
        [
            kubelet.node("cpu-1", labels={"plnt.work/pool": "cpu"}),
            kubelet.node("cpu-2", labels={"plnt.work/pool": "cpu"}),
            kubelet.node("gpu-1", gpus=1, labels={"plnt.work/pool": "gpu"}, taints=[gpu_taint]),
        ]
    )
    root = str(kube.directory / "kubelet")
    try:
        yield simulator
    finally:
        kube.call(simulator.close())
        left = live_processes(root)
        kill_all(left)
        assert not left, f"processes outlived the kubelet simulator: {left}"
        assert not simulator.errors, simulator.errors


@pytest.fixture
def namespace(kube: standin.KubeStandIn, cluster: kubelet.Kubelet) -> str:
    name = f"wl-{uuid.uuid4().hex[:8]}"
    kube.add_namespace(name)
    return name


@contextlib.asynccontextmanager
async def admin(kube: standin.KubeStandIn) -> AsyncIterator[aiohttp.ClientSession]:
    async with session(kube, ADMIN) as client:
        yield client


async def call(
    client: aiohttp.ClientSession, method: str, path: str, body: Any = None, **options: Any
) -> tuple[int, Obj]:
    data = None if body is None else json.dumps(body)
    headers = {"Content-Type": options.pop("content_type", "application/json")}
    async with client.request(method, path, data=data, headers=headers, **options) as response:
        return response.status, await response.json()


def runner_processes(kube: standin.KubeStandIn, namespace: str) -> set[int]:
    return live_processes(f"{kube.directory}/kubelet/{namespace}_", "plnt", "runner")


# --- manifests -----------------------------------------------------------------------------


def spec_configmap(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "chat-spec", "namespace": namespace},
        "data": {"workflow.yaml": SPEC.read_text()},
    }


def runner_deployment(
    namespace: str, name: str = "chat", *, replicas: int = 1, **container: Any
) -> Obj:
    spec_path = container.pop("spec_path", "/etc/plnt/spec/workflow.yaml")
    main = {
        "name": "runner",
        "image": IMAGE,
        "args": ["runner", "--spec", spec_path, "--backend-type", "echo", "--port", "8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 1},
        "volumeMounts": [{"name": "spec", "mountPath": "/etc/plnt/spec", "readOnly": True}],
        **container,
    }
    pod_spec: Obj = {
        "containers": [main],
        "volumes": [{"name": "spec", "configMap": {"name": "chat-spec"}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def runner_service(namespace: str, name: str = "chat") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }


def deployments(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


async def deploy(client: aiohttp.ClientSession, namespace: str, deployment: Obj) -> None:
    code, _ = await call(
        client, "POST", f"/api/v1/namespaces/{namespace}/configmaps", spec_configmap(namespace)
    )
    assert code in (201, 409)
    code, body = await call(client, "POST", deployments(namespace), deployment)
    assert code == 201, body


async def available(client: aiohttp.ClientSession, namespace: str, name: str, replicas: int) -> Obj:
    async def check() -> Obj | None:
        _, deployment = await call(client, "GET", f"{deployments(namespace)}/{name}")
        status = deployment.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        done = (
            status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("availableReplicas", 0) == replicas
            and status.get("replicas", 0) == replicas
            and conditions.get("Available", {}).get("status") == "True"
        )
        return deployment if done else None

    return await eventually(
        check, within=60, interval=0.1, what=f"{name} with {replicas} available"
    )


async def pod_list(client: aiohttp.ClientSession, namespace: str) -> list[Obj]:
    _, listed = await call(client, "GET", pods(namespace))
    return list(listed["items"])


async def container_status(client: aiohttp.ClientSession, namespace: str, reason: str) -> Obj:
    async def check() -> Obj | None:
        for pod in await pod_list(client, namespace):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if (status.get("state") or {}).get("waiting", {}).get("reason") == reason:
                    return status
        return None

    return await eventually(check, within=60, interval=0.1, what=f"a container in {reason}")


# --- tests ----------------------------------------------------------------------------------


async def test_a_runner_deployment_becomes_available_and_its_endpointslice_reaches_the_runner(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    async with admin(kube) as client:
        await deploy(client, namespace, runner_deployment(namespace))
        code, _ = await call(
            client, "POST", f"/api/v1/namespaces/{namespace}/services", runner_service(namespace)
        )
        assert code == 201
        deployment = await available(client, namespace, "chat", 1)
        (pod,) = await pod_list(client, namespace)
        slices_path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"

        async def ready_slice() -> Obj | None:
            _, listed = await call(
                client,
                "GET",
                slices_path,
                params={"labelSelector": "kubernetes.io/service-name=chat"},
            )
            ready = [s for s in listed["items"] if s["endpoints"][0]["conditions"]["ready"]]
            return ready[0] if ready else None

        endpoint_slice = await eventually(ready_slice, within=30, what="a ready endpoint slice")
    assert deployment["status"]["updatedReplicas"] == deployment["status"]["readyReplicas"] == 1
    conditions = {c["type"]: c for c in deployment["status"]["conditions"]}
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"] == "127.0.0.1"
    assert pod["spec"]["nodeName"] in ("cpu-1", "cpu-2")  # the GPU node's taint keeps it off
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    assert pod["metadata"]["labels"]["pod-template-hash"] in pod["metadata"]["name"]
    endpoint = endpoint_slice["endpoints"][0]
    assert endpoint["addresses"] == ["127.0.0.1"]
    assert endpoint["targetRef"]["name"] == pod["metadata"]["name"]
    (port,) = endpoint_slice["ports"]
    assert port["name"] == "http" and port["port"] not in (80, 8080)
    async with aiohttp.ClientSession() as plain:
        url = f"http://{endpoint['addresses'][0]}:{port['port']}/invoke"
        async with plain.post(url, json={"inputs": {"question": "What is plnt?"}}) as response:
            answer = await response.json()
    assert response.status == 200, answer
    assert "plnt" in json.dumps(answer["output"])


async def test_scaling_one_to_three_to_one_starts_and_stops_runner_processes(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    async with admin(kube) as client:
        await deploy(client, namespace, runner_deployment(namespace))
        await available(client, namespace, "chat", 1)
        assert len(runner_processes(kube, namespace)) == 1
        scale = f"{deployments(namespace)}/chat/scale"
        code, scaled = await call(
            client,
            "PATCH",
            scale,
            {"spec": {"replicas": 3}},
            content_type="application/merge-patch+json",
        )
        assert code == 200 and scaled["spec"]["replicas"] == 3 and scaled["kind"] == "Scale"
        deployment = await available(client, namespace, "chat", 3)
        assert deployment["metadata"]["generation"] == 2
        assert len(runner_processes(kube, namespace)) == 3
        code, _ = await call(
            client,
            "PATCH",
            scale,
            {"spec": {"replicas": 1}},
            content_type="application/merge-patch+json",
        )
        await available(client, namespace, "chat", 1)
        await eventually(
            lambda: len(runner_processes(kube, namespace)) == 1, what="two runners stopped"
        )
        code, _ = await call(client, "DELETE", f"{deployments(namespace)}/chat")
        assert code == 200
        await eventually(
            lambda: not runner_processes(kube, namespace), what="the last runner stopped"
        )

        async def no_pods() -> bool:
            return not await pod_list(client, namespace)

        await eventually(no_pods, what="the deployment's pods deleted")


async def test_a_gpu_request_no_node_can_hold_stays_pending_with_kubes_message(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    gpu = runner_deployment(
        namespace,
        "big",
        resources={"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
    )
    gpu["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    untolerated = runner_deployment(namespace, "gpu-pool")
    untolerated["spec"]["template"]["spec"]["nodeSelector"] = {"plnt.work/pool": "gpu"}
    async with admin(kube) as client:
        await deploy(client, namespace, gpu)
        await deploy(client, namespace, untolerated)

        async def unschedulable() -> dict[str, str] | None:
            found = {}
            for pod in await pod_list(client, namespace):
                for condition in pod.get("status", {}).get("conditions") or []:
                    if (
                        condition["type"] == "PodScheduled"
                        and condition.get("reason") == "Unschedulable"
                    ):
                        found[pod["metadata"]["labels"]["app"]] = condition["message"]
            return found if len(found) == 2 else None

        messages = await eventually(unschedulable, within=30, what="two unschedulable pods")
        _, deployment = await call(client, "GET", f"{deployments(namespace)}/big")
    assert messages["big"] == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
        "available: 3 No preemption victims found for incoming pod."
    )
    assert messages["gpu-pool"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
        "available: 3 Preemption is not helpful for scheduling."
    )
    assert not runner_processes(kube, namespace)
    conditions = {c["type"]: c for c in deployment["status"]["conditions"]}
    assert conditions["Available"]["status"] == "False"
    assert conditions["Available"]["reason"] == "MinimumReplicasUnavailable"


async def test_an_image_marked_failing_shows_err_image_pull_then_image_pull_back_off(
    kube: standin.KubeStandIn, cluster: kubelet.Kubelet, namespace: str
) -> None:
    image = f"registry.example/plnt:{namespace}"
    await kube.call_async(cluster.fail_pull(image))
    async with admin(kube) as client:
        await deploy(client, namespace, runner_deployment(namespace, image=image))
        status = await container_status(client, namespace, "ImagePullBackOff")
    assert status["ready"] is False
    assert status["state"]["waiting"]["message"].startswith(f'Back-off pulling image "{image}"')
    assert not runner_processes(kube, namespace)


async def test_a_crashing_runner_shows_crash_loop_back_off_with_the_tail_of_its_log(
    kube: standin.KubeStandIn, cluster: kubelet.Kubelet, namespace: str
) -> None:
    async with admin(kube) as client:
        await deploy(
            client,
            namespace,
            runner_deployment(namespace, "broken", spec_path="/etc/plnt/spec/missing.yaml"),
        )
        broken = await container_status(client, namespace, "CrashLoopBackOff")
        await deploy(client, namespace, runner_deployment(namespace, "healthy"))
        await available(client, namespace, "healthy", 1)
        await kube.call_async(cluster.crash(namespace, "healthy"))

        async def crashed() -> Obj | None:
            for pod in await pod_list(client, namespace):
                if pod["metadata"]["labels"]["app"] == "healthy":
                    (status,) = pod["status"]["containerStatuses"]
                    waiting = status["state"].get("waiting", {})
                    return status if waiting.get("reason") == "CrashLoopBackOff" else None
            return None

        killed = await eventually(crashed, within=30, what="the healthy runner crash-looping")
        _, deployment = await call(client, "GET", f"{deployments(namespace)}/healthy")
        await kube.call_async(cluster.recover(namespace, "healthy"))
        await available(client, namespace, "healthy", 1)
    terminated = broken["lastState"]["terminated"]
    assert terminated["exitCode"] != 0 and terminated["reason"] == "Error"
    assert "missing.yaml" in terminated["message"]
    assert broken["state"]["waiting"]["message"].startswith("back-off ")
    assert "listening on http://127.0.0.1:" in killed["lastState"]["terminated"]["message"]
    assert {c["type"]: c["status"] for c in deployment["status"]["conditions"]}[
        "Available"
    ] == "False"


async def test_objects_a_cluster_would_reject_are_rejected_with_422(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    mismatched = runner_deployment(namespace, "mismatch")
    mismatched["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    never = runner_deployment(namespace, "never")
    never["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    unknown = runner_deployment(namespace, "unknown")
    unknown["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy2"] = "Always"
    portless = runner_service(namespace, "portless")
    del portless["spec"]["ports"]
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "both", "namespace": namespace},
        "spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }
    async with admin(kube) as client:
        answers = {}
        for name, path, obj in (
            ("mismatch", deployments(namespace), mismatched),
            ("never", deployments(namespace), never),
            ("unknown", deployments(namespace), unknown),
            ("portless", f"/api/v1/namespaces/{namespace}/services", portless),
            ("pdb", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", pdb),
        ):
            answers[name] = await call(client, "POST", path, obj)
        zero = runner_deployment(namespace, "zero", replicas=0)
        assert (await call(client, "POST", deployments(namespace), zero))[0] == 201
        zero["spec"]["selector"]["matchLabels"]["tier"] = "x"
        zero["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
        answers["immutable"] = await call(client, "PUT", f"{deployments(namespace)}/zero", zero)
    assert {name: code for name, (code, _) in answers.items()} == dict.fromkeys(answers, 422)
    assert answers["mismatch"][1]["message"] == (
        'Deployment.apps "mismatch" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"mismatch"}: `selector` does not match template `labels`'
    )
    assert answers["never"][1]["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Never": supported values: "Always"',
            "field": "spec.template.spec.restartPolicy",
        }
    ]
    assert (
        'unknown field "spec.template.spec.containers[0].imagePullPolicy2"'
        in answers["unknown"][1]["message"]
    )
    assert (
        answers["portless"][1]["message"]
        == 'Service "portless" is invalid: spec.ports: Required value'
    )
    assert "minAvailable and maxUnavailable cannot be both set" in answers["pdb"][1]["message"]
    assert answers["immutable"][1]["details"]["causes"][0]["field"] == "spec.selector"
    assert "field is immutable" in answers["immutable"][1]["message"]


async def test_status_is_written_only_through_status_and_only_spec_changes_bump_generation(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    async with admin(kube) as client:
        await deploy(client, namespace, runner_deployment(namespace, "idle", replicas=0))
        path = f"{deployments(namespace)}/idle"
        _, current = await call(client, "GET", path)
        # Unconditional (no resourceVersion): the simulated controller writes status meanwhile.
        del current["metadata"]["resourceVersion"]
        labelled = {
            **current,
            "metadata": {**current["metadata"], "labels": {"app": "idle", "x": "y"}},
            "status": {"replicas": 7},
        }
        _, relabelled = await call(client, "PUT", path, labelled)
        _, respecced = await call(
            client,
            "PATCH",
            path,
            {"spec": {"minReadySeconds": 1}},
            content_type="application/strategic-merge-patch+json",
        )
        code, status = await call(
            client,
            "PATCH",
            f"{path}/status",
            {"status": {"replicas": 7}, "spec": {"replicas": 9}},
            content_type="application/merge-patch+json",
        )
    assert relabelled["metadata"]["generation"] == 1
    assert (relabelled.get("status") or {}).get("replicas") != 7
    assert respecced["metadata"]["generation"] == 2
    assert code == 200 and status["status"]["replicas"] == 7 and status["spec"]["replicas"] == 0
    assert status["metadata"]["generation"] == 2


async def test_kubernetes_asyncio_creates_and_server_side_applies_with_kubes_conflicts(
    kube: standin.KubeStandIn, namespace: str
) -> None:
    configuration = k8s.Configuration(host=kube.url)
    configuration.ssl_ca_cert = str(kube.ca_cert)
    configuration.api_key = {"BearerToken": ADMIN}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    manifest = runner_deployment(namespace, "applied", replicas=0)
    async with k8s.ApiClient(configuration) as api_client:
        apps, core = k8s.AppsV1Api(api_client), k8s.CoreV1Api(api_client)
        created = await apps.create_namespaced_deployment(namespace, manifest, field_manager="plnt")

        async def controller_wrote_status() -> bool:
            read = await apps.read_namespaced_deployment("applied", namespace)
            return any(m.subresource == "status" for m in read.metadata.managed_fields or [])

        # The simulated controller writes status on its own schedule; the managed-fields
        # assertion below includes its entry, so the apply must come after that write.
        await eventually(controller_wrote_status, within=30, interval=0.05, what="status")
        service = await core.patch_namespaced_service(
            "applied",
            namespace,
            runner_service(namespace, "applied"),
            field_manager="plnt",
            _content_type="application/apply-patch+yaml",
        )
        applied_body = {**manifest, "spec": {**manifest["spec"], "replicas": 2}}
        applied = await apps.patch_namespaced_deployment(
            "applied",
            namespace,
            applied_body,
            field_manager="plnt",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        other = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "applied", "namespace": namespace},
            "spec": {"replicas": 0},
        }
        with pytest.raises(ApiException) as conflict:
            await apps.patch_namespaced_deployment(
                "applied",
                namespace,
                other,
                field_manager="autoscaler",
                _content_type="application/apply-patch+yaml",
            )
        forced = await apps.patch_namespaced_deployment(
            "applied",
            namespace,
            other,
            field_manager="autoscaler",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    assert created.metadata.generation == 1
    assert service.spec.ports[0].target_port == "http" and service.spec.cluster_ip
    assert [(m.manager, m.operation) for m in service.metadata.managed_fields] == [
        ("plnt", "Apply")
    ]
    assert applied.spec.replicas == 2 and applied.metadata.generation == 2
    assert {(m.manager, m.operation, m.subresource) for m in applied.metadata.managed_fields} == {
        ("plnt", "Update", None),  # the create
        ("plnt", "Apply", None),
        ("kube-controller-manager", "Update", "status"),  # the simulated controller
    }
    assert conflict.value.status == 409
    body = json.loads(conflict.value.body)
    assert body["reason"] == "Conflict"
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "plnt": .spec.replicas'
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "plnt"',
            "field": ".spec.replicas",
        }
    ]
    assert forced.spec.replicas == 0
    assert forced.spec.template.spec.containers[0].name == "runner"  # plnt still owns the rest
    owners = {m.manager: m.fields_v1 for m in forced.metadata.managed_fields}
    assert "f:replicas" in owners["autoscaler"]["f:spec"]
    assert "f:replicas" not in owners["plnt"]["f:spec"]


async def test_discovery_lists_the_workload_kinds_and_their_subresources(
    kube: standin.KubeStandIn,
) -> None:
    async with admin(kube) as client:
        _, apps = await call(client, "GET", "/apis/apps/v1")
        _, core = await call(client, "GET", "/api/v1")
        async with client.get(
            "/apis",
            headers={
                "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            },
        ) as response:
            aggregated = await response.json()
    names = {r["name"]: r for r in apps["resources"]}
    assert (
        names["deployments/scale"]["kind"] == "Scale"
        and names["deployments/scale"]["group"] == "autoscaling"
    )
    assert set(names) == {"deployments", "deployments/status", "deployments/scale"}
    assert {"pods", "pods/status", "services", "nodes", "secrets", "configmaps"} <= {
        r["name"] for r in core["resources"]
    }
    groups = {g["metadata"]["name"]: g for g in aggregated["items"]}
    assert {"apps", "discovery.k8s.io", "autoscaling", "networking.k8s.io", "policy"} <= set(groups)
    (deploy_entry,) = [
        r for r in groups["apps"]["versions"][0]["resources"] if r["resource"] == "deployments"
    ]
    assert {s["subresource"] for s in deploy_entry["subresources"]} == {"status", "scale"}
