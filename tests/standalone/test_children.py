"""`plnt up`'s children across runs of one state directory: none outlives a `plnt up` killed
with SIGKILL, a start stops (and names) what an earlier run left running, and a state
directory whose `plnt up` still runs is refused without stopping anything.

`plnt up` runs as the tests' other servers do (`tests.support.plnt_server.PlntServer`),
with sagas here: Temporal and the deploy worker's fork server are children too. The
earlier run's leftovers are made as they arise, by an owner that started etcd and Temporal
in their own sessions without a parent-death signal (as a child that ignores it would
behave) and exited.
Every process is stopped by pid at the end, also after a failure."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from plnt.processes import leftovers
from tests.support.plnt_server import PlntServer, wait_for
from tests.support.processes import kill_all

CHILDREN = ("etcd.pid", "temporal.pid", "runners/forkserver.pid")
"""The records of `plnt up`'s children with sagas: etcd, Temporal, the fork server."""


def recorded(state: Path) -> dict[str, int]:
    """The running children the state directory's records name, by what they are."""
    found = {}
    for name in CHILDREN:
        try:
            document = json.loads((state / name).read_text())
        except (OSError, ValueError):
            continue
        found[document["what"]] = int(document["process"]["pid"])
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def alive(pid: int) -> bool:
    return leftovers.identity_of(pid) is not None


@pytest.fixture
def pids() -> Iterator[set[int]]:
    """Processes a test saw or made: killed by pid at the end, whatever happened."""
    seen: set[int] = set()
    try:
        yield seen
    finally:
        kill_all(seen)


def test_plnt_up_killed_with_sigkill_leaves_no_child_and_the_next_start_stops_nothing(
    tmp_path: Path, pids: set[int]
) -> None:
    state = tmp_path / "state"
    with PlntServer(state, sagas=True) as first:
        assert first.process is not None
        children = wait_for(
            lambda: (found := recorded(state)) and len(found) == len(CHILDREN) and found,
            timeout=60,
            message="etcd, Temporal and the fork server recorded",
        )
        pids.update(children.values())
        assert {parent_of(pid) for pid in children.values()} == {first.process.pid}
        first.process.kill()  # SIGKILL: plnt up stops nothing itself
        first.process.wait()
        wait_for(
            lambda: not [what for what, pid in children.items() if alive(pid)],
            timeout=30,
            message=f"{sorted(children)} to exit with plnt up",
        )

    with PlntServer(state, sagas=True) as second:
        assert not [line for line in second.output if "left by an earlier run" in line]
        pids.update(recorded(state).values())


OWNER = textwrap.dedent(
    """
    import json, subprocess, sys
    from pathlib import Path
    from plnt.processes import leftovers, ports
    from plnt.processes.etcd import EtcdProcess
    from plnt.processes.temporal import TemporalDevServer, temporal_binary

    state = Path(sys.argv[1])
    quiet = dict(
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    etcd = EtcdProcess(state / "etcd")
    etcd.client_port, etcd.peer_port = ports.free_port(), ports.free_port()
    etcd_child = subprocess.Popen(etcd.command(), **quiet)
    leftovers.record(etcd.pid_file, etcd_child.pid, what="etcd")
    temporal = TemporalDevServer(state / "temporal.db", ui_port=None)
    temporal.port, temporal.http_port = ports.free_port(), ports.free_port()
    command = temporal._command(metrics_port=ports.free_port())
    temporal_child = subprocess.Popen(command, **quiet)
    leftovers.record(temporal.pid_file, temporal_child.pid, what="Temporal")
    print(json.dumps({"etcd": etcd_child.pid, "etcd_url": etcd.endpoint,
                      "Temporal": temporal_child.pid}), flush=True)
    """
)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def test_a_start_stops_what_an_earlier_run_left_running_names_each_and_serves(
    tmp_path: Path, pids: set[int]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    owner = subprocess.run(
        [sys.executable, "-c", OWNER, str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    left = json.loads(owner.stdout)
    pids.update({left["etcd"], left["Temporal"]})
    # The leftover etcd holds the data directory, as one left by a killed plnt up would.
    wait_for(lambda: healthy(left["etcd_url"]), timeout=30, message="the leftover etcd serving")

    with PlntServer(state, sagas=True) as server:
        for what in ("etcd", "Temporal"):
            line = f"stopped {what} (pid {left[what]}) left by an earlier run of {state}"
            assert [entry for entry in server.output if line in entry], server.output
            assert not alive(left[what])
        children = recorded(state)
        pids.update(children.values())
        assert children["etcd"] != left["etcd"] and children["Temporal"] != left["Temporal"]


def test_a_state_directory_whose_plnt_up_still_runs_is_refused_and_nothing_is_stopped(
    tmp_path: Path, pids: set[int]
) -> None:
    state = tmp_path / "state"
    with PlntServer(state) as running:
        etcd = recorded(state)["etcd"]
        pids.add(etcd)
        second = subprocess.run(
            [sys.executable, "-m", "plnt", "up", "--state-dir", str(state), "--no-sagas",
             "--port", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert second.returncode == 1
        assert running.process is not None
        message = f"error: {state} is in use: its etcd (pid {etcd}) belongs to process "
        assert second.stderr.startswith(message + f"{running.process.pid}, which still runs")
        assert alive(etcd) and running.process.poll() is None
