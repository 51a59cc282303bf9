"""Every `AppKey` of the UI server, in one place."""

from __future__ import annotations

import jinja2
from aiohttp import web

from plnt.client import PlntClient
from plnt.ui.settings import UiSettings

SETTINGS = web.AppKey("settings", UiSettings)
CLIENT = web.AppKey("client", PlntClient)
TEMPLATES = web.AppKey("templates", jinja2.Environment)
