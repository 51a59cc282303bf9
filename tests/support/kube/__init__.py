"""A stand-in (test double) for kube-apiserver and kube-aggregator, for plnt's tests only.

No kube-apiserver can run where plnt is tested, so this package replaces, over real
HTTPS on 127.0.0.1, what plnt and kubectl call in a cluster: authentication of bearer
tokens and client certificates, TokenReview, SubjectAccessReview and
SelfSubjectAccessReview (decided by a per-test RBAC-like policy), the
`kube-system/extension-apiserver-authentication` ConfigMap (get, list, watch) with a
front-proxy CA it makes itself, core/v1 and events.k8s.io/v1 Events over one store,
discovery and OpenAPI, and the aggregation layer that proxies `/apis/plnt.work/v1` to a
registered backend with the front-proxy client certificate and `X-Remote-*` headers.
Like kube-apiserver it cuts every request that is not long-running at its
`--request-timeout` (60 s, configurable; `timeouts`): a 504 Timeout Status before the
answer started, a killed connection after; watches and the `proxy`, `log`, `exec`,
`attach` and `portforward` subresources run on.
For the Kubernetes target it also serves the workload kinds (Deployments with `status`
and `scale`, Services, Pods, Nodes, Secrets, EndpointSlices, HorizontalPodAutoscalers,
Ingresses, PodDisruptionBudgets, and the Gateway API's HTTPRoutes, validated against the
Gateway API's own schemas from its npm package: `gateways`) with server-side apply and
managedFields, and a kubelet
simulator (`kubelet`, started by `KubeStandIn.start_kubelet`) that schedules pods on
simulated Nodes and runs each container as a real local process on 127.0.0.1 (each pod on
a port of its own, published through one EndpointSlice per pod, where a cluster gives
pods IPs of their own and one port). There are no ReplicaSets, no kube-proxy (Services
have a clusterIP nobody answers on) and no image pulls.
Everything it accepts is validated against the real Kubernetes schemas
(`kubernetes-validate`; the Gateway API's for its kinds), so it is never laxer than a
cluster. Behaviour is read from the Kubernetes source; where it approximates, the module
docstring says so. It is not part of the `plnt` package and must never be imported by it.

Entry point: `standin.running(directory)` → `standin.KubeStandIn`.
"""
