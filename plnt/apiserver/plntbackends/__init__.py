"""PlntBackend in the API server: nothing beyond the generic machinery.

A backend has no subresources, hooks or background loops of its own, so its install
(`install.INSTALL`) is its definition alone; its rules are `plnt.registry.plntbackends`.
"""
