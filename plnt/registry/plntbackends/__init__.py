"""PlntBackend's semantics: its definition and the strategy that checks what its schema cannot.

Pure data and rules, no I/O: a backend is registered once and referenced by many runs,
so admission holds its endpoint and credentials reference to what a runner can use.
"""

from __future__ import annotations

from plnt.registry.plntbackends.definition import DEFINITION

__all__ = ["DEFINITION"]
