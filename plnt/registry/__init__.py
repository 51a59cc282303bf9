"""Resource semantics (the Kubernetes "strategy" idea): defaulting, validation, status rules.

The registry turns storage errors into API errors exactly once and never speaks HTTP.
"""
