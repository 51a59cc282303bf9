"""The default `--workers`: affinity, limited by a cgroup v2 quota (rounded up), capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plnt.processes import cpus


def _cpu_max(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpu.max"
    path.write_text(text)
    return path


def test_no_quota_means_every_core_up_to_the_cap(tmp_path: Path) -> None:
    cpu_max = _cpu_max(tmp_path, "max 100000\n")
    assert cpus.quota(cpu_max) is None
    assert cpus.available(cores=4, cpu_max=cpu_max) == 4
    assert cpus.available(cores=64, cpu_max=cpu_max) == cpus.CAP


def test_a_quota_limits_the_cores_rounded_up(tmp_path: Path) -> None:
    assert cpus.available(cores=16, cpu_max=_cpu_max(tmp_path, "200000 100000\n")) == 2
    assert cpus.available(cores=16, cpu_max=_cpu_max(tmp_path, "150000 100000\n")) == 2
    assert cpus.available(cores=16, cpu_max=_cpu_max(tmp_path, "50000 100000\n")) == 1


def test_affinity_wins_over_a_larger_quota(tmp_path: Path) -> None:
    assert cpus.available(cores=3, cpu_max=_cpu_max(tmp_path, "800000 100000\n")) == 3


@pytest.mark.parametrize("text", ["", "garbage", "0 100000", "-1 100000", "100 0", "a b"])
def test_an_unusable_file_is_no_quota(tmp_path: Path, text: str) -> None:
    assert cpus.quota(_cpu_max(tmp_path, text)) is None
    assert cpus.available(cores=5, cpu_max=_cpu_max(tmp_path, text)) == 5


def test_a_missing_file_is_no_quota(tmp_path: Path) -> None:
    assert cpus.quota(tmp_path / "absent") is None


def test_this_process_counts_its_affinity() -> None:
    assert cpus.affinity() == len(os.sched_getaffinity(0))
    assert 1 <= cpus.available() <= cpus.CAP
