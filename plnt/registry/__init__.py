"""Resource semantics (the Kubernetes "strategy" idea): defaulting, validation, status rules.

The registry turns storage errors into API errors exactly once and never speaks HTTP.
Each kind's rules live in its own package (`workflowruns/`, `plntbackends/`); the
generic `ResourceStore` runs them, and its one after-write hook records their Events.
"""
