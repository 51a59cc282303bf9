"""One headless Chromium per test module, driven by Playwright: Debian's, never a download.

`browser` launches `/usr/bin/chromium` (the `chromium` Debian package; CI installs it)
through Playwright's sync API; tests open a fresh context (cookies, storage) each. Pages
that tests want to keep are saved with `screenshot` under pytest's tmp dir, and also in
`$PLNT_UI_SCREENSHOTS` when set (`PLNT_UI_SCREENSHOTS=docs/ui pytest tests/ui` refreshes
the committed ones).

Per module, not per session: Playwright's sync API keeps an event loop running in the
main thread while it lives, and the async tests of a later module (pytest-asyncio) cannot
run theirs beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    launched = playwright_driver.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
    )
    try:
        yield launched
    finally:
        launched.close()


def screenshot(page: Page, directory: Path, name: str) -> Path:
    """Save the whole page as `name`.png in `directory` (and in $PLNT_UI_SCREENSHOTS)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    extra = os.environ.get("PLNT_UI_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(extra) / f"{name}.png"), full_page=True)
    return path
