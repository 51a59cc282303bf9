"""The public workflow spec: its model, its digests, and pulls from OCI, S3 and OCI layouts.

Nothing here knows about the API server; a spec is bytes pinned by sha256.
"""
