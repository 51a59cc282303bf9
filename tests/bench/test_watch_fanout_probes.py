"""The watch benchmark's lean line reader finds every probe, whatever the chunking."""

from __future__ import annotations

import json

from plnt.bench import apiserver as harness


def event_line(event_type: str, seq: int, sent: int) -> bytes:
    body = harness.workflowrun(f"probe-{seq}", annotations={harness.PROBE: f"{seq}:{sent}"})
    return json.dumps({"type": event_type, "object": body}, separators=(",", ":")).encode()


def test_probes_are_found_across_any_split_of_the_stream() -> None:
    stream = (
        b"\n".join(
            [
                event_line("ADDED", 1, 111),
                event_line("MODIFIED", 1, 999),  # only ADDED events carry a probe
                b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}',
                event_line("ADDED", 2, 222),
                event_line("ADDED", 3, 333),
            ]
        )
        + b"\n"
    )
    for size in (1, 7, 100, 1000, len(stream)):
        found: list[tuple[int, int]] = []
        rest = b""
        for start in range(0, len(stream), size):
            got, rest = harness.probes(rest, stream[start : start + size])
            found += got
        assert found == [(1, 111), (2, 222), (3, 333)], size
        assert rest == b""


def test_an_incomplete_last_line_waits_for_the_rest() -> None:
    line = event_line("ADDED", 4, 444)
    found, rest = harness.probes(b"", line[:50])
    assert (found, rest) == ([], line[:50])
    found, rest = harness.probes(rest, line[50:] + b"\n")
    assert (found, rest) == ([(4, 444)], b"")
