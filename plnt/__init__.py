"""plnt: a Kubernetes-native runtime for AI workflows.

The package is layered (see docs/architecture.md); each subpackage imports only
the layers beneath it, which import-linter enforces in `make test`.
"""

__version__ = "0.1.0"
