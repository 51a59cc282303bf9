"""PlntBackend, as the composition root installs it: the generic store, no more."""

from __future__ import annotations

from plnt.apiserver import kinds
from plnt.registry import plntbackends

INSTALL = kinds.KindInstall(definition=plntbackends.DEFINITION)
