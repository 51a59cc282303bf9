"""The HTTP face of plnt: an aiohttp app that speaks the Kubernetes API conventions.

Handlers are thin: decode, call the registry, encode. The modules at this level are the
generic machinery and name no kind; a kind with HTTP of its own keeps it in a package
(`workflowruns`, `namespaces`) and background loops live in `controllers`. Only `app.py`
wires concrete parts, kinds included.
"""
