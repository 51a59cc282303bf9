"""Reading what kubectl printed: table rows, lines of a running watch, the watch gauge."""

from __future__ import annotations

import re
import subprocess

from tests.support.plnt_server import Kubectl


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def open_watches(kubectl: Kubectl) -> float:
    """The server's gauge of open WorkflowRun watches, read from /metrics."""
    metrics = kubectl.run("get", "--raw", "/metrics").stdout
    pattern = r'^plnt_apiserver_open_watches\{resource="workflowruns"\} (\S+)$'
    found = re.search(pattern, metrics, re.M)
    return float(found.group(1)) if found else 0.0


def read_lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    assert proc.stdout is not None
    return [proc.stdout.readline().rstrip("\n") for _ in range(count)]
