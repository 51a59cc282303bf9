"""CPU readings from /proc and the CPU-per-request rows built from them.

Nothing here asserts an amount of CPU: real processes are only checked to have used
some (a reading went up); the arithmetic is checked on made-up numbers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from plnt.bench import apiserver as harness
from plnt.bench import cputime

BUSY_CHILD = """
import sys, time
print("ready", flush=True)
start = time.process_time()
while time.process_time() - start < 0.2:
    pass
print("done", flush=True)
sys.stdin.read()
"""


def stat_line(pid: int, name: str, ppid: int, utime: int, stime: int, cutime: int = 0) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority ...
    return f"{pid} ({name}) S {ppid} 1 1 0 -1 4194304 10 0 0 0 {utime} {stime} {cutime} 3 20 0"


def test_a_stat_line_is_parsed_even_when_the_name_holds_spaces_and_parentheses() -> None:
    stat = cputime.parse_stat(stat_line(42, "we (ird) name", 7, utime=100, stime=50, cutime=5))
    assert (stat.pid, stat.name, stat.ppid) == (42, "we (ird) name", 7)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (100, 50, 5, 3)
    assert stat.seconds == pytest.approx(158 / cputime.CLOCK_TICKS)


def test_this_process_reads_as_itself_with_its_parent() -> None:
    stat = cputime.read_stat(os.getpid())
    assert stat is not None
    assert (stat.pid, stat.ppid) == (os.getpid(), os.getppid())


def test_a_process_that_is_gone_reads_as_absent() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert cputime.read_stat(child.pid) is None
    meter = cputime.Meter([cputime.Watched("gone", child.pid), cputime.Watched("never", None)])
    assert meter.snapshot() == {}


def test_descendants_are_found_through_every_generation_without_pruned_subtrees() -> None:
    stats = [
        cputime.parse_stat(stat_line(pid, "x", ppid, 1, 1))
        for pid, ppid in [(1, 0), (10, 1), (11, 10), (12, 11), (20, 1), (21, 20), (30, 99)]
    ]
    assert cputime.descendants(1, stats) == {10, 11, 12, 20, 21}
    assert cputime.descendants(1, stats, prune=[11, 20]) == {10}
    assert cputime.descendants(30, stats) == set()


def test_the_meter_sees_this_process_use_cpu_while_it_works() -> None:
    meter = cputime.Meter([cputime.Watched("me", os.getpid())])
    before = meter.snapshot()
    start = time.process_time()
    while time.process_time() - start < 0.05:  # busy work, ended by CPU used, not by a clock
        pass
    assert meter.since(before)["me"] > 0


@pytest.fixture
def busy_child() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", BUSY_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:  # closes the pipes and reaps it on the way out
        try:
            yield child
        finally:
            if child.poll() is None:
                child.kill()


def test_a_tree_counts_a_busy_child_and_a_pruned_tree_leaves_it_out(
    busy_child: subprocess.Popen[str],
) -> None:
    assert busy_child.stdout is not None and busy_child.stdin is not None
    me = os.getpid()
    meter = cputime.Meter(
        [
            cputime.Watched("child", busy_child.pid),
            cputime.Watched("tree", me, tree=True),
            cputime.Watched("pruned", me, tree=True, prune=frozenset({busy_child.pid})),
        ]
    )
    assert busy_child.stdout.readline().strip() == "ready"
    before = meter.snapshot()
    assert busy_child.stdout.readline().strip() == "done"
    used = meter.since(before)
    assert used["child"] > 0
    assert used["tree"] - used["pruned"] > 0  # the child's share, read in the same snapshot
    tree_before_exit = meter.snapshot()["tree"]
    busy_child.stdin.close()
    busy_child.wait()  # reaped by this process: its time moves to our cutime, still counted
    assert meter.snapshot()["tree"] >= tree_before_exit


def test_the_process_listening_on_a_port_is_found_by_its_socket() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert cputime.listening_pid(listener.getsockname()[1]) == os.getpid()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))  # bound, never listening
        assert cputime.listening_pid(unused.getsockname()[1]) is None


def test_cpu_per_request_counts_failed_requests_and_is_unknown_without_a_reading() -> None:
    stats = harness.PhaseStats(ops=900, errors=100, elapsed=1.0, cpu={"server": 0.5})
    assert stats.cpu_ms("server") == pytest.approx(0.5)
    assert stats.cpu_ms("etcd") is None
    assert cputime.per_request_ms({"x": 1.0}, "x", 0) is None


def test_a_row_divides_plnts_cpu_by_the_floors_and_judges_it_against_the_target() -> None:
    row = cputime.CpuRow(
        "GET",
        plnt="API server process",
        plnt_ms=0.3,
        floor="etcd per raw get",
        floor_ms=0.1,
        target=1.5,
        beside=(("etcd during plnt's phase", 0.05), ("generator", None)),
    )
    assert row.ratio == pytest.approx(3.0)
    assert row.passed is False
    line = row.line()
    assert line.startswith("cpu/req GET")
    assert "plnt 0.300 ms, floor 0.100 ms, ratio 3.00 (target <= 1.5) MISS" in line
    assert line.endswith("also etcd during plnt's phase 0.050 ms, generator - ms")
    assert row.as_json()["ratio"] == pytest.approx(3.0)
    assert row.as_json()["beside_ms"] == {"etcd during plnt's phase": 0.05, "generator": None}


def test_a_row_without_a_floor_reading_or_a_target_says_so() -> None:
    row = cputime.CpuRow("LIST", plnt="p", plnt_ms=2.0, floor="f", floor_ms=None)
    assert (row.ratio, row.passed) == (None, None)
    assert "floor - ms, ratio - (no target)" in row.line()
    passing = cputime.CpuRow("c", plnt="p", plnt_ms=1.0, floor="f", floor_ms=2.0, target=1.0)
    assert passing.passed is True and "(target <= 1) PASS" in passing.line()


def test_children_running_a_module_are_told_from_the_parents_other_children() -> None:
    module = subprocess.Popen([sys.executable, "-m", "timeit", "-n", "1000000000", "pass"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        deadline = time.monotonic() + 30  # until the child has exec'd its module
        while module.pid not in (found := cputime.children_running(os.getpid(), "timeit")):
            assert time.monotonic() < deadline, "the timeit child never showed its module"
        assert other.pid not in found, found
        assert cputime.children_running(os.getpid(), "json.tool") == []
    finally:
        for child in (module, other):
            child.kill()
            child.wait()
