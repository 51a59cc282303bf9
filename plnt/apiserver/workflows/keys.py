"""The AppKeys of Workflow's runtime (set by its install's store, read by its context)."""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver.workflows import refreshing

CATALOG = web.AppKey("workflow_catalog", refreshing.Catalog)
"""The catalog's refresher, created with the kind's store at start-up."""
