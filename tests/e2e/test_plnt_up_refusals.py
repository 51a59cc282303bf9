"""`plnt up` refuses what it cannot serve before it starts anything: a busy port and an
invalid policy file each give one `error:` line, exit 1, and leave no etcd behind.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_plnt_up_on_a_busy_port_says_so_in_one_line_and_leaves_no_etcd(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_plnt_up(tmp_path / "state", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: address already in use"
    )
    assert "Traceback" not in result.stderr
    assert not processes_mentioning(str(tmp_path / "state"))


def run_plnt_up(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`plnt up` expected to refuse to start: it must exit by itself."""
    return subprocess.run(
        [sys.executable, "-m", "plnt", "up", "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


def test_plnt_up_refuses_an_invalid_policy_file_before_starting_anything(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules:\n- groups: [x]\n  verbz: [get]\n")
    result = run_plnt_up(tmp_path / "state", "--port", "1", "--policy-file", str(policy))
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {policy} is invalid: ")
    assert "rules.0.verbz" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "etcd").exists()
