"""The only code that talks to etcd.

Storage speaks keys, bytes and revisions through the `Store` protocol in
`interface`; its errors (in `errors`) are about keys, never about resources.
Implementations: `etcd.EtcdStore` (etcd itself), `cache.CachedStore` (reads and
watches from memory, writes through etcd) and `memory.MemoryStore` (no etcd at all,
for tests and embedding). Only the composition root picks one; everything else sees
the protocol. Running etcd as a child process is not storage's
job: `plnt.processes.etcd` does that.
"""
