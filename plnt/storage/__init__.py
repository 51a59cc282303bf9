"""The only code that talks to etcd.

Storage speaks keys, bytes and revisions through the `Store` protocol in
`interface`; its errors (in `errors`) are about keys, never about resources.
"""
