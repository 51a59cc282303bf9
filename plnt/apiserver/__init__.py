"""The HTTP face of plnt: an aiohttp app that speaks the Kubernetes API conventions.

Handlers are thin: decode, call the registry, encode. Only `app.py` wires concrete parts.
"""
