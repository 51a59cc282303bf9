"""Which requests are long-running: the one predicate every part of the server asks.

A long-running request lasts as long as its client or its upstream wants, not as long
as the server needs to compute an answer, so it must not hold one of the few slots
`inflight` hands out (a hundred open watches would otherwise lock every client out),
and its duration says nothing about the server's latency.

kube decides this from the request info with `BasicLongRunningRequestCheck`
(k8s.io/apiserver, staging/src/k8s.io/apiserver/pkg/server/filters/longrunning.go),
given the verbs and subresources its server is composed with: kube-apiserver's are the
`watch` and `proxy` verbs and the `attach`, `exec`, `proxy`, `log` and `portforward`
subresources (pkg/controlplane/apiserver/config.go, `BuildGenericConfig`). plnt keeps
kube's rule as it is (so `proxy` is named here: plnt serves none of the others), and
adds what each kind declares of its own subresources (`Subresource.long_running`, and
`long_running_when_watched` for a GET that streams with `?watch=`), read from the
definitions of the kinds the composition root installed and handed over
(`LongRunning(definitions)`), so nothing here names a kind.
"""

from __future__ import annotations

from collections.abc import Iterable

from multidict import MultiMapping

from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry.definitions import ResourceDefinition

LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
"""kube-apiserver's long-running verbs."""
LONG_RUNNING_SUBRESOURCES = frozenset({"proxy"})
"""kube-apiserver's long-running subresources that plnt serves (of any resource)."""

_Key = tuple[str, str, str]
"""(API group, resource, subresource)."""


class LongRunning:
    """The long-running check of a server, given the definitions of the kinds it serves.

    Computed once at composition: the request path asks a set, never the definitions."""

    def __init__(self, definitions: Iterable[ResourceDefinition]) -> None:
        always: set[_Key] = set()
        watched: set[_Key] = set()
        for d in definitions:
            for sub in d.subresources:
                if sub.long_running:
                    always.add((d.group, d.plural, sub.name))
                if sub.long_running_when_watched:
                    watched.add((d.group, d.plural, sub.name))
        self._always = frozenset(always)
        self._when_watched = frozenset(watched)

    def is_long_running(self, info: RequestInfo, query: MultiMapping[str]) -> bool:
        """True for kube's long-running verbs and subresources, and for those a kind
        declares."""
        if info.verb in LONG_RUNNING_VERBS:
            return True
        if not info.is_resource_request or not info.subresource:
            return False
        if info.subresource in LONG_RUNNING_SUBRESOURCES:
            return True
        key = (info.api_group, info.resource, info.subresource)
        return key in self._always or (key in self._when_watched and _watching(query))


def _watching(query: MultiMapping[str]) -> bool:
    """`?watch=` as kube reads it: any value but "false" or "0" is a watch."""
    values = query.getall("watch", [])
    return bool(values) and values[0].lower() not in ("false", "0")
