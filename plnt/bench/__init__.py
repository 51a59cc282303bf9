"""Benchmarks that compare plnt, in one run, with the floor beneath it and print ratios.

`python -m plnt.bench apiserver|saga`. The package sits beside `plnt.standalone`, above
`apiserver`: the API server benchmark composes `apiserver.app` in a child process of its
own, as `plnt up` does. It reaches neither the sagas nor the registry directly; the
saga benchmark drives `plnt up` as a command and watches WorkflowRuns through the API.
Child processes come from `plnt.processes` and `children`; every one is always reaped.
"""
