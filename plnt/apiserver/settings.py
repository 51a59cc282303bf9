"""Settings of one API server instance (frozen: built once by the composition root).

A few fields belong to one kind (`CatalogSettings`, the Workflow catalog's;
`ServingLimits.invoke_timeout_seconds`, WorkflowRun's invoke and proxy). They stay here
because they are flags of `plnt up` and `plnt serve` and travel to the worker processes
with the rest; the kind's install reads them from `keys.SETTINGS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from plnt.processes.apiprocesses import Slot
from plnt.workflowspec.signers import SignaturePolicy

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's limit; aiohttp's 1 MiB default and plain-text 413 would be wrong."""


@dataclass(frozen=True, slots=True)
class ServingLimits:
    """How much one API server process takes on at once (see `inflight`), and how long an
    idle connection may stay open.

    kube-apiserver defaults to 400 read-only and 200 mutating requests in flight, sized
    for a multi-core Go process. plnt serves every request on one event loop, measured at
    about 3 000 consistent GETs/s and 550 creates/s (docs/benchmarks.md): 200 reads in
    flight already mean a wait of ~70 ms for the last one, 100 writes ~180 ms, and each
    admitted write may hold a body of up to 3 MiB. More in flight adds only latency and
    memory, never throughput, so past these a client is better told to come back.
    0 turns a limit off, as in kube.

    With `--workers N` each of the N API processes is such an event loop on a core of its
    own, and the flags stay the *server's* totals: each process admits `ceil(limit / N)`
    (`per_process`), so N processes together take on what one would, while each serves
    its share about N times sooner.
    """

    max_requests_inflight: int = 200
    """Read-only requests (get, list, watch verbs) served at once (`--max-requests-inflight`)."""
    max_mutating_requests_inflight: int = 100
    """Every other verb (`--max-mutating-requests-inflight`)."""
    idle_connection_timeout_seconds: float = 90.0
    """An idle keep-alive connection is closed after this long; kube's HTTP server's
    IdleTimeout is 90 s (it matches Go clients' own keep-alive). A connection serving a
    request, a watch or a stream is never idle."""
    invoke_timeout_seconds: float = 300.0
    """How long a subresource that relays to what a kind runs (a run's runners: `invoke`,
    `proxy`) waits for the whole answer, a stream included (`--invoke-timeout`). In a
    cluster, kube-apiserver's own request timeout also cuts `…/invoke` (not `…/proxy`)."""

    def per_process(self, count: int) -> ServingLimits:
        """The share of one of `count` API processes: each in-flight limit divided,
        rounded up (0 stays "no limit"); the timeouts are each process's own."""

        def share(limit: int) -> int:
            return -(-limit // count) if limit > 0 else 0

        return dataclasses.replace(
            self,
            max_requests_inflight=share(self.max_requests_inflight),
            max_mutating_requests_inflight=share(self.max_mutating_requests_inflight),
        )


@dataclass(frozen=True, slots=True)
class CatalogSettings:
    """Where the workflow catalog (`kubectl get workflows`) reads specs, and how often.

    `sources_file` is the YAML file of sources (`plnt.registry.workflows.sources`), read
    again at every refresh; without one the catalog reads `default_sources` (standalone:
    every layout under the layout root, where `make up` pushes the examples). A relative
    `oci-layout:` path is a layout under `layout_root`, as for the deploy worker.
    """

    sources_file: Path | None = None
    default_sources: tuple[str, ...] = ()
    refresh_seconds: float = 60.0
    layout_root: Path | None = None


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where to listen, where etcd is, and how to authenticate and authorize."""

    etcd_endpoints: tuple[str, ...] = ("127.0.0.1:2379",)
    etcd_prefix: str = "/registry"
    etcd_ca_file: Path | None = None
    """CA bundle that verifies etcd's serving certificate (TLS to etcd when set)."""
    etcd_cert_file: Path | None = None
    """Client certificate for etcd's `--client-cert-auth` (with `etcd_key_file`)."""
    etcd_key_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = 6443
    pki_dir: Path | None = None
    token_file: Path | None = None
    policy_file: Path | None = None
    requestheader_allowed_names: tuple[str, ...] = ("front-proxy-client",)
    watch_cache: bool = True
    max_request_body_bytes: int = MAX_REQUEST_BODY_BYTES
    min_request_timeout_seconds: int = 1800
    bookmark_interval_seconds: float = 60.0
    version: str = "v1.37.0-plnt.1"
    limits: ServingLimits = field(default_factory=ServingLimits)
    extra_sans: tuple[str, ...] = field(default=())
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    slot: Slot | None = None
    """Which of the server's API processes this one is (`--workers N`, N > 1); None: the
    only one."""
    signatures: SignaturePolicy | None = None
    """Trusted signers and the namespaces whose runs must name one (admission's check)."""
