"""The `plnt` CLI and the `kubectl plnt` plugin: parse arguments, build settings, make one call."""
