"""core/v1 Event as plnt stores it: the kind's definition, strategy and printer columns.

Standalone, plnt keeps Events in its own store, so `kubectl get events` and `kubectl
describe` read them as kube-apiserver serves them; under `plnt serve` they go to the
cluster. The recorder that writes them, for every kind with transition rules, is generic
(`plnt.registry.events`) and names no kind. Pure data and rules, no I/O.
"""

from __future__ import annotations

from plnt.registry.coreevents.definition import COLUMNS, DEFINITION, EventStrategy

__all__ = ["COLUMNS", "DEFINITION", "EventStrategy"]
