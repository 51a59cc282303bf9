"""The cluster's own API (kube-apiserver), as plnt needs it when it runs aggregated.

The only code that talks to kube-apiserver: TokenReview and SubjectAccessReview for
delegated authentication and authorization, the `kube-system/extension-apiserver-
authentication` ConfigMap, and Events. Through kubernetes-asyncio, on the event loop.
Errors: `errors.ClusterError` and its subclasses; nothing here decides who may do what.
"""
