"""Which requests are long-running: the one predicate every part of the server asks.

A long-running request lasts as long as its client or its upstream wants, not as long
as the server needs to compute an answer, so it must not hold one of the few slots
`inflight` hands out (a hundred open watches would otherwise lock every client out),
and its duration says nothing about the server's latency. kube-apiserver's
`BasicLongRunningRequestCheck` decides this from the request info: the `watch` and
`proxy` verbs, and a set of subresources. plnt's long-running subresources are the
runtime ones that wait on runners or models:

* `invoke` — any invocation, streamed or not: it waits as long as the workflow runs
  (up to the invoke timeout), however little the server itself does;
* `proxy` — the OpenAI-compatible relay, streamed when the model streams;
* `bench` — a benchmark of a run's runners, seconds to minutes;
* `invocationlog` (and `invocations`, its deprecated name) when watched (`?watch=true`):
  it streams until the client leaves.
"""

from __future__ import annotations

from multidict import MultiMapping

from plnt.apiserver.requestinfo import RequestInfo

LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"invoke", "proxy", "bench"})
WATCHABLE_SUBRESOURCES = frozenset({"invocationlog", "invocations"})


def _watching(query: MultiMapping[str]) -> bool:
    """`?watch=` as kube reads it: any value but "false" or "0" is a watch."""
    values = query.getall("watch", [])
    return bool(values) and values[0].lower() not in ("false", "0")


def is_long_running(info: RequestInfo, query: MultiMapping[str]) -> bool:
    """True for watches, proxies, invocations, benchmarks and watched invocation logs."""
    if info.verb in LONG_RUNNING_VERBS:
        return True
    if not info.is_resource_request:
        return False
    if info.subresource in LONG_RUNNING_SUBRESOURCES:
        return True
    return info.subresource in WATCHABLE_SUBRESOURCES and _watching(query)
