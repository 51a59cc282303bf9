"""The HTTP client for plnt's own API, for activities and the CLI (not written yet).

Activities will reach plnt's objects only through it, never through storage or
the registry, so a worker can run anywhere.
"""
