"""core/v1 Event in the API server: nothing beyond the generic machinery.

Events are served by the generic store and handlers (`kubectl get events`); the recorder
that writes them for every kind with transition rules is generic
(`plnt.registry.events`), and the kind's rules are `plnt.registry.coreevents`.
"""
