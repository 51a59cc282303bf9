"""Probing over HTTP: a canary's smoke case and analysis, and PlntBackends' health and load.

`probes` calls runners (smoke, reachability, load, the analysis verdict);
`backend_probes` probes PlntBackends (on resolve and periodically, on each worker) and
`backend_status` writes what it found, recording the Events of the transitions the pure
`backend_transitions` finds. Activity side only: all of it does I/O but the transitions.
"""
