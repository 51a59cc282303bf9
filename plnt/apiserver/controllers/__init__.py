"""Background loops the API server runs beside its handlers.

Each is started and stopped by an aiohttp cleanup context the composition root
(`plnt.apiserver.app`) installs, after storage is ready: the namespace controller of
standalone plnt (`namespaces`) and the gauges of every run's last bench (`benchgauges`).
They work on the registry's stores or the storage protocol, never through HTTP. The
retries of deploy submissions live with the deploy hooks (`workflowruns.deployhooks`).
"""
