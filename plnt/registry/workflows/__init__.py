"""Workflow's semantics: the catalog's read-only kind, built from what the sources hold.

Pure rules plus the one writer of its storage: `definition` (names, get/list/watch only,
printer columns, grants), `building` (scans of the sources to the objects they describe,
no I/O), `syncing` (writes those objects into a `Store`, only what changed, so a
resourceVersion moves only when its object does) and `store` (the `ResourceStore` that
serves them read-only, every write a 405). Reading the sources is the API server's
(`plnt.apiserver.workflows`); what a source file says is `sources`.
"""

from __future__ import annotations

from plnt.registry.workflows.definition import DEFINITION

__all__ = ["DEFINITION"]
