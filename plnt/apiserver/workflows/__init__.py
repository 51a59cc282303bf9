"""Workflow's runtime in the API server: the catalog's background refresh.

`refreshing.Catalog` reads the configured sources on an interval (never in a request),
builds the Workflows they describe and writes the differences into the catalog's own
storage, which the kind's read-only store serves (`plnt.registry.workflows`). The
composition root picks that storage and adds `refreshing.context` to the app.
"""
