"""Event, as the composition root installs it: the generic store, no more."""

from __future__ import annotations

from plnt.apiserver import kinds
from plnt.registry import coreevents

INSTALL = kinds.KindInstall(definition=coreevents.DEFINITION)
