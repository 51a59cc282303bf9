"""Namespaces over HTTP and in the background, as standalone plnt serves them (under
`plnt serve` the cluster does).

`install` hands the Namespace and Service kinds to the composition root: the Namespace
store with NamespaceLifecycle for every namespaced kind, the mode's routes (`routes`:
kubectl's protobuf create, `creating`, read by `protobuf`; or, under `plnt serve`, every
namespace answered as Active) and the controller that empties a Terminating namespace
(`controller`). What a Namespace means is `plnt.registry.namespaces`.
"""
