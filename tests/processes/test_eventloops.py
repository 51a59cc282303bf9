"""PLNT_EVENT_LOOP: uvloop by default when installed, asyncio's loop when asked or when
uvloop is missing, a clear error for anything else."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

from plnt.processes import eventloops


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_the_default_runs_on_uvloop_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloops.ENV, raising=False)
    assert eventloops.run(_loop_module()).startswith("uvloop")


def test_asyncio_runs_asyncio_s_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloops.ENV, "asyncio")
    assert eventloops.run(_loop_module()).startswith("asyncio")


def test_an_unknown_loop_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloops.ENV, "trio")
    with pytest.raises(ValueError, match=r"PLNT_EVENT_LOOP='trio'.*auto, uvloop, asyncio"):
        eventloops.run(_loop_module())


def test_without_uvloop_the_standard_loop_runs_and_a_request_for_it_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: import fails
    assert eventloops.chosen({}) == "asyncio"
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        assert eventloops.chosen({eventloops.ENV: "uvloop"}) == "asyncio"
    assert "uvloop is not installed" in caplog.text


def test_a_process_started_without_uvloop_importable_still_serves_its_main() -> None:
    """A fresh interpreter where `import uvloop` fails (a machine without the wheel)."""
    code = (
        "import sys; sys.modules['uvloop'] = None\n"
        "import asyncio\n"
        "from plnt.processes import eventloops\n"
        "async def main():\n"
        "    return type(asyncio.get_running_loop()).__module__\n"
        "print(eventloops.run(main()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip().startswith("asyncio")
