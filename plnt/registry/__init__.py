"""Resource semantics (the Kubernetes "strategy" idea): defaulting, validation, status rules.

The registry turns storage errors into API errors exactly once (`storageerrors`) and
never speaks HTTP. Each kind's rules live in its own package (`workflowruns/`,
`plntbackends/`); the generic `ResourceStore` runs them in one order (`admitting`), and
its one after-write step records their Events and runs the hooks its composition root
gave it (`hooks`). Its modules import one another without circles (import-linter).
"""
