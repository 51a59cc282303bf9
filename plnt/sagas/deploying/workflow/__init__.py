"""The deploy saga's workflow side: deterministic, no I/O, no clock but `workflow.now()`.

Every module here runs in Temporal's sandbox and is replayed from history, so
import-linter forbids this package (and whatever it imports) anything that does I/O;
the deploy's side effects are activities scheduled by name (`plnt.sagas.activitynames`).
"""
