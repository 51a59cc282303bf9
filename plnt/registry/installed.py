"""The kinds one server serves, in discovery order: what discovery, OpenAPI, the
long-running check and the default policy are computed from.

The list itself is the composition root's (`plnt.apiserver.app`, one line per kind): it
hands the definitions it installed to whatever needs them, so this module names no
kind. Standalone plnt serves more core/v1 kinds than `plnt serve` (Namespaces, the
empty Service list), which the cluster provides there; the root leaves those out when a
cluster is behind it. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from plnt.api import names
from plnt.registry.definitions import ResourceDefinition


@dataclass(frozen=True, slots=True)
class Served:
    """The definitions a server serves, in the order the composition root lists them."""

    definitions: tuple[ResourceDefinition, ...]

    @classmethod
    def of(cls, definitions: Iterable[ResourceDefinition]) -> Served:
        """Raises ValueError for a resource served twice: each has one store and route."""
        served = tuple(definitions)
        seen: set[tuple[str, str]] = set()
        for d in served:
            if (d.group, d.plural) in seen:
                raise ValueError(f"{d.plural}.{d.group or 'core'} is installed twice")
            seen.add((d.group, d.plural))
        return cls(served)

    def in_group(self, group: str) -> tuple[ResourceDefinition, ...]:
        """The served definitions of one API group ("" for core/v1), in order."""
        return tuple(d for d in self.definitions if d.group == group)

    @property
    def plnt(self) -> tuple[ResourceDefinition, ...]:
        """plnt's own group (`plnt.work/v1`)."""
        return self.in_group(names.GROUP)

    @property
    def core(self) -> tuple[ResourceDefinition, ...]:
        """The core/v1 resources served."""
        return self.in_group("")
