"""The workflow runner service: DAG executor, step cache, backends and the OpenAI-compatible API.

It runs one workflow spec and knows nothing of etcd or the API server.
"""
