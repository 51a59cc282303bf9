"""`plnt serve`: the API server as an aggregated APIService in a Kubernetes cluster.

The cluster composition, beside `plnt.standalone` and above `plnt.apiserver`: external
etcd (optionally over TLS), an external Temporal, a serving certificate that is
reloaded when it changes on disk, and authentication, authorization and Events
delegated to the cluster (`plnt.kube`, `plnt.apiserver.delegation`). Nothing here
keeps state of its own: any number of replicas serve the same etcd, and within one
replica `--workers N` processes share the port.
"""
