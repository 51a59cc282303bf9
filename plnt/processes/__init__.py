"""Child processes plnt runs beside itself: etcd, a Temporal dev server, a model server on
pinned weights (`models`, `weights`, `modelserver`), the API server's sibling API processes
of `--workers N` (`apiprocesses`, sized by `cpus`, their restarts counted by `restarts`), and
free ports; what every child starts with and how it ends: an environment built from an
allow-list (`environments`), the parent-death signal (`tethering`), a record that lets a
later start stop what outlived its run (`leftovers`);
and the lifetimes of what runs inside it: background tasks (`tasks`) and the stop signals
of a serving command (`signals`).

Why a package of its own, low in the layers: standalone (`plnt up`) runs etcd and
Temporal, the benchmarks run the same children to measure against, and the local
target (`plnt.sagas.targets.local`) picks runner ports with `ports.free_port`; none of
them may import the others. Nothing here knows plnt's objects: a child is started,
checked for health with a deadline, and always stopped and reaped. Likewise a background
task is always cancelled and awaited.
"""
