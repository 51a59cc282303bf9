"""Choosing a PlntBackend for a run: by name, or by selector, pool and headroom.

Pure functions over PlntBackend objects as the API serves them, so placement can be
tested without a server (the time is passed in). Headroom is `capacity.maxConcurrency
- status.inFlight - status.queueDepth` (the load last probed; zero where a backend
reports none). A status older than `STALE_AFTER_INTERVALS` probe intervals is stale:
its load is unknown, neither free nor full, so a stale backend is chosen only when no
freshly probed one has room. Placement never chooses a backend whose last probe found it
unreachable, nor one with headroom 0 or less; among the rest, the most headroom wins
(then the most `status.gpuHeadroom`, then the smallest name).

A run with a `timeToFirstToken` objective (`spec.slo`) ranks before headroom by what the
probes measured (`status.timeToFirstTokenMilliseconds`): backends whose TTFT meets the
objective first, then those not measured, then those that miss it, so a backend that
misses is chosen only when nothing better has room. The winner's line says how its TTFT
stands against the objective, and each backend that lost on it says its figure.

The result says why the winner won and why each other backend was passed over, in words
short enough for a timeline line ("a (unreachable), b (headroom 0)").

Errors: `NoBackend` with a message that says what was asked and why each backend that
exists was refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plnt.api.meta import parse_time

STALE_AFTER_INTERVALS = 3
"""A status older than this many probe intervals no longer says what the backend does."""

DEFAULT_PROBE_INTERVAL = 30.0
"""Seconds between a worker's probes of every PlntBackend (`plnt worker --probe-interval`)."""

_LISTED = 6  # names listed in an explanation before "and N more"


class NoBackend(Exception):
    """No PlntBackend satisfies the run's selection."""


@dataclass(frozen=True)
class Placement:
    """The chosen backend, its headroom (None: load unknown), and who was passed over why."""

    backend: Mapping[str, Any]
    headroom: int | None
    passed_over: tuple[tuple[str, str], ...] = ()
    why: str | None = None
    """How the winner stands against the run's TTFT objective (None: no objective)."""

    @property
    def name(self) -> str:
        return _name(self.backend)

    def explanation(self) -> str | None:
        """`TTFT 120 ms meets objective 500 ms; passed over: a (unreachable), b (headroom
        0)`, or None when there is nothing to say."""
        parts = [self.why] if self.why else []
        if self.passed_over:
            parts.append("passed over: " + _listing(self.passed_over))
        return "; ".join(parts) or None


def first_token_ms(backend: Mapping[str, Any]) -> int | None:
    """The TTFT the last probe measured (None: not measured)."""
    value = (backend.get("status") or {}).get("timeToFirstTokenMilliseconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ttft_tier(backend: Mapping[str, Any], objective_ms: float | None) -> tuple[int, str]:
    """0 meets the objective, 1 not measured (or no objective), 2 misses it; and words."""
    if objective_ms is None:
        return 1, ""
    measured = first_token_ms(backend)
    target = f"objective {objective_ms:g} ms"
    if measured is None:
        return 1, f"TTFT not measured ({target})"
    if measured <= objective_ms:
        return 0, f"TTFT {measured} ms meets {target}"
    return 2, f"TTFT {measured} ms > {target}"


def matches_selector(labels: Mapping[str, str], selector: Mapping[str, Any]) -> bool:
    """metav1.LabelSelector semantics: matchLabels and matchExpressions, all must hold."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def headroom(backend: Mapping[str, Any]) -> int:
    """Declared concurrency less what the backend reports running and waiting."""
    spec = backend.get("spec") or {}
    status = backend.get("status") or {}
    capacity = (spec.get("capacity") or {}).get("maxConcurrency", 16)
    busy = int(status.get("inFlight") or 0) + int(status.get("queueDepth") or 0)
    return int(capacity) - busy


def status_age(backend: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds since the backend was last probed (None: never, or an unreadable time)."""
    stamp = (backend.get("status") or {}).get("lastProbeTime")
    if not isinstance(stamp, str):
        return None
    try:
        return max(0.0, (now - parse_time(stamp)).total_seconds())
    except ValueError:
        return None


def is_stale(age: float | None, stale_after: float | None) -> bool:
    """Whether a status of this age no longer counts (never, without a probe interval)."""
    return age is not None and stale_after is not None and stale_after > 0 and age > stale_after


def format_age(seconds: float) -> str:
    """`45s`, `4m05s`, `2h03m`: short enough for a condition or a timeline line."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def choose(
    backends: Sequence[Mapping[str, Any]],
    *,
    name: str | None,
    selector: Mapping[str, Any] | None,
    gpu_class: str | None,
    model: str | None,
    pool: str | None = None,
    now: datetime | None = None,
    stale_after: float | None = None,
    ttft_objective_ms: float | None = None,
) -> Placement:
    """The backend the run should use, and why (see the module docstring).

    `now` and `stale_after` (seconds) decide staleness; without them no status is stale.
    `ttft_objective_ms` is the run's `timeToFirstToken` objective, ranked before headroom.
    """
    if name:
        named = _by_name(backends, name, pool=pool, now=now, stale_after=stale_after)
        standing = _ttft_tier(named.backend, ttft_objective_ms)[1]
        return Placement(named.backend, named.headroom, why=standing or None)
    fresh: list[tuple[Mapping[str, Any], int]] = []
    unknown: list[tuple[Mapping[str, Any], str]] = []
    refused: list[tuple[str, str]] = []
    for backend in backends:
        why = _mismatch(backend, selector=selector, gpu_class=gpu_class, model=model, pool=pool)
        if why is not None:
            refused.append((_name(backend), why))
            continue
        age = status_age(backend, now) if now is not None else None
        if is_stale(age, stale_after):
            assert age is not None
            unknown.append((backend, f"stale {format_age(age)}"))
            continue
        if (backend.get("status") or {}).get("reachable") is False:
            refused.append((_name(backend), "unreachable"))
            continue
        room = headroom(backend)
        if room <= 0:
            refused.append((_name(backend), f"headroom {room}"))
            continue
        fresh.append((backend, room))
    placed = _best(fresh, unknown, refused, ttft_objective_ms)
    if placed is not None:
        return placed
    what = _wanted(selector=selector, gpu_class=gpu_class, model=model, pool=pool)
    reasons = f": {_listing(_ordered(refused))}" if refused else ""
    raise NoBackend(
        f"no reachable PlntBackend with headroom matches {what} ({len(backends)} exist){reasons}"
    )


SPILL_TYPES = frozenset({"openai", "vllm", "ollama"})
"""Backend types a runner calls over the OpenAI API, so a call can spill to them."""


def spill_candidates(
    backends: Sequence[Mapping[str, Any]],
    *,
    chosen: str,
    pool: str,
    model: str | None,
    gpu_class: str | None = None,
) -> list[Mapping[str, Any]]:
    """The pool's other backends a call of the run may spill to, by name (docs/slo.md).

    Every member of `pool` but the chosen one that serves the model (and GPU class) the
    run asked for, that a runner calls over the OpenAI API and that needs no credentials
    (the runner holds only its own backend's key). Reachability and measured TTFT are
    not judged here: they change after the deploy, and the API server judges them when a
    call spills."""
    found = []
    for backend in backends:
        spec = backend.get("spec") or {}
        if _name(backend) == chosen or spec.get("type") not in SPILL_TYPES:
            continue
        if not spec.get("endpoint") or spec.get("credentialsRef"):
            continue
        why = _mismatch(backend, selector=None, gpu_class=gpu_class, model=model, pool=pool)
        if why is None:
            found.append(backend)
    return sorted(found, key=_name)


def _wanted(
    *,
    selector: Mapping[str, Any] | None,
    gpu_class: str | None,
    model: str | None,
    pool: str | None,
) -> str:
    """What the run asked for, for the NoBackend message."""
    parts = (
        f"selector {dict(selector)}" if selector is not None else "",
        f"pool {pool}" if pool else "",
        f"gpuClass {gpu_class}" if gpu_class else "",
        f"model {model}" if model else "",
    )
    return " and ".join(part for part in parts if part) or "any PlntBackend"


def _best(
    fresh: list[tuple[Mapping[str, Any], int]],
    unknown: list[tuple[Mapping[str, Any], str]],
    refused: list[tuple[str, str]],
    ttft_objective_ms: float | None = None,
) -> Placement | None:
    """TTFT against the objective first (module docstring), then most headroom (then GPU
    headroom, then name); a backend of unknown load only when none is known to have
    room; None when nothing qualifies."""

    def rank(pair: tuple[Mapping[str, Any], int]) -> tuple[int, int, int, str]:
        tier = _ttft_tier(pair[0], ttft_objective_ms)[0]
        return (tier, -pair[1], -_gpu_headroom(pair[0]), _name(pair[0]))

    fresh.sort(key=rank)
    unknown.sort(key=lambda pair: _name(pair[0]))
    if fresh:
        winner, room = fresh[0]
        best_tier, why = _ttft_tier(winner, ttft_objective_ms)
        losers = []
        for backend, backend_room in fresh[1:]:
            tier, words = _ttft_tier(backend, ttft_objective_ms)
            losers.append(
                (_name(backend), words if tier > best_tier else f"headroom {backend_room}")
            )
        losers += [(_name(b), why) for b, why in unknown]
        return Placement(winner, room, _ordered(losers + refused), why or None)
    if unknown:
        losers = [(_name(b), why) for b, why in unknown[1:]]
        return Placement(unknown[0][0], None, _ordered(losers + refused))
    return None


def _by_name(
    backends: Sequence[Mapping[str, Any]],
    name: str,
    *,
    pool: str | None,
    now: datetime | None,
    stale_after: float | None,
) -> Placement:
    """A named backend is used whatever its headroom, unless it is known to be down."""
    for backend in backends:
        if _name(backend) != name:
            continue
        spec = backend.get("spec") or {}
        if pool and spec.get("pool") != pool:
            raise NoBackend(f'PlntBackend "{name}" is in {_pool_of(spec)}, not pool {pool}')
        status = backend.get("status") or {}
        age = status_age(backend, now) if now is not None else None
        if is_stale(age, stale_after):
            return Placement(backend, None)
        if status.get("reachable") is False:
            probe = status.get("probe") or "the last probe failed"
            raise NoBackend(f'PlntBackend "{name}" is unreachable: {probe}')
        return Placement(backend, headroom(backend))
    known = sorted(_name(b) for b in backends)
    raise NoBackend(
        f'PlntBackend "{name}" not found; the namespace has '
        + (", ".join(known) if known else "no PlntBackends")
    )


def _mismatch(
    backend: Mapping[str, Any],
    *,
    selector: Mapping[str, Any] | None,
    gpu_class: str | None,
    model: str | None,
    pool: str | None,
) -> str | None:
    """Why the backend is not what the run asked for (None: it is)."""
    spec = backend.get("spec") or {}
    labels = backend.get("metadata", {}).get("labels") or {}
    if selector is not None and not matches_selector(labels, selector):
        return "labels do not match"
    if pool and spec.get("pool") != pool:
        return _pool_of(spec)
    if gpu_class and spec.get("gpuClass") != gpu_class:
        return f"gpuClass {spec.get('gpuClass') or 'none'}"
    if model and spec.get("models") and model not in spec["models"]:
        return f"no model {model}"
    return None


def _pool_of(spec: Mapping[str, Any]) -> str:
    return f"pool {spec['pool']}" if spec.get("pool") else "no pool"


def _gpu_headroom(backend: Mapping[str, Any]) -> int:
    value = (backend.get("status") or {}).get("gpuHeadroom")
    return int(value) if isinstance(value, int) else 0


def _name(backend: Mapping[str, Any]) -> str:
    return str(backend.get("metadata", {}).get("name"))


def _ordered(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs))


def _listing(pairs: Sequence[tuple[str, str]]) -> str:
    shown = ", ".join(f"{name} ({why})" for name, why in pairs[:_LISTED])
    rest = len(pairs) - _LISTED
    return shown + (f" and {rest} more" if rest > 0 else "")
