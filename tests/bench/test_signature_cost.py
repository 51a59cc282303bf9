"""The saga bench's signature cost: what a required signature adds to one pull, measured
with the pull's own code on a real signed layout, and reported against its target."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.bench import saga_command, signatures


async def test_the_signature_cost_is_measured_per_pull_and_reported_against_the_target(
    tmp_path: Path,
) -> None:
    cost = await signatures.measure(tmp_path, rounds=3)

    assert len(cost.added_ms) == 3 and all(ms > 0 for ms in cost.added_ms)
    assert cost.spec_bytes == signatures.EXAMPLE.stat().st_size
    (line,) = signatures.report(cost)
    assert line.startswith("signature check per pull") and "target <= 50 ms" in line
    document = signatures.as_json(cost)
    assert document["signature_pull_p95_ms"] >= document["signature_pull_p50_ms"] > 0


def test_the_saga_bench_refuses_to_do_nothing() -> None:
    with pytest.raises(SystemExit):
        saga_command.parse_args(["--creates", "0", "--deploys", "0", "--signature-rounds", "0"])
    saga_command.parse_args(["--creates", "0", "--deploys", "0"])
