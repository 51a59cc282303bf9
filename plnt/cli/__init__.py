"""The `plnt` CLI and the `kubectl plnt` plugin: parse arguments, build settings, make one call.

Command modules hold no business logic: reading files, applying, rendering and
following live in the modules beside them, and every command exits with the one
table of codes in `exits`.
"""
