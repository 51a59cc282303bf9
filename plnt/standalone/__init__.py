"""Standalone plnt (`plnt up`): the composition that supervises every part on one machine.

It starts etcd and (unless given an address) Temporal as child processes, and with
`--model` a model server, serves the API server with its PKI and writes a kubeconfig,
and runs the deploy worker in process; with `--workers N`, N-1 more API server
processes on the same port (`apiprocess`). It sits above `apiserver` and `sagas` because it
wires both; the API server itself reaches sagas only through
`plnt.sagas.control.DeployControl`.
"""
