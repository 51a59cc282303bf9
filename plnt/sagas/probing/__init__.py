"""Probing over HTTP, and placement by what the probes measured.

`probes` calls runners (a canary's smoke case, reachability, load, the analysis
verdict); `backend_probes` probes PlntBackends (on resolve and periodically, on each
worker) and `backend_status` writes what it found, recording the Events of the
transitions the pure `backend_transitions` finds. `placement` chooses a backend by
headroom (pure) and `activities` is the deploy's resolve activity, which probes and
chooses. Activity side only: all of it does I/O but the transitions and the choice.
"""
