"""Namespaces over HTTP, as standalone plnt serves them (under `plnt serve` the cluster does).

`stores` builds the store set of a standalone server, with every namespaced kind behind
NamespaceLifecycle; `creating` answers `kubectl create namespace`, whose typed client
sends protobuf (`protobuf` reads it). The controller that empties a Terminating namespace
runs in the background (`plnt.apiserver.controllers.namespaces`); what a Namespace means
is `plnt.registry.namespaces`.
"""
