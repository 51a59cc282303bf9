"""Wire types of plnt's API: pydantic models and JSON helpers, no I/O.

Everything here describes bytes on the wire (objects, lists, Status, Table,
Scale); behaviour lives in the layers above.
"""
