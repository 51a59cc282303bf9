"""Workflow's runtime in the API server: the catalog's background refresh.

`refreshing.Catalog` reads the configured sources on an interval (never in a request),
builds the Workflows they describe and writes the differences into the catalog's own
storage, a `MemoryStore` of its own, which the kind's read-only store serves
(`plnt.registry.workflows`). `install.INSTALL` hands both to the composition root.
"""
