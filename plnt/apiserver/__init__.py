"""The HTTP face of plnt: an aiohttp app that speaks the Kubernetes API conventions.

Handlers are thin: decode, call the registry, encode. The modules at this level are the
generic machinery and name no kind; a kind with HTTP of its own keeps it in a package
(`workflowruns`, `invocations`, `namespaces` …) with its background loops, and hands the
server one `kinds.KindInstall`. Only `app.py` wires concrete parts and lists the kinds.
"""
