"""When a cached prefix wakes its watchers: at once when idle, in paced rounds under load.

Why: a watch event fanned out to N watchers wakes N tasks, and each writes one TLS
record. Woken once per event, 200 watchers at 100 events/s are 20,000 task steps and
socket writes a second, and while each event's fan-out runs, the watch cache cannot
read the next event from etcd (every gRPC message takes a turn of the event loop): the
cache then falls seconds behind etcd while every watcher still writes one event at a
time. Waking the watchers in rounds instead lets each round carry every event queued
since the last one, written in one record per watcher (the watch handler already joins
what is buffered), and leaves the loop free between rounds to read etcd and serve
requests.

The rule (`WakePacer`): after a round that cost C seconds of loop time (its woken
watchers' steps, measured as the time until a callback queued behind them runs), the
next round waits until the loop has had `min(C, max_gap)` to itself. An idle server
(events further apart than their round's cost) therefore delivers every event at once;
a loaded one spends at most about half its time in fan-out, so the watch cache keeps
reading etcd and requests are served, and adds at most `max_gap` (plus one round) to
an event's delay. The more events wait, the more each round carries, so the cost per
event falls as the rate rises. Nothing here touches what is delivered: events are
queued the moment they are applied, in order; only the wake-up is paced.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_GAP = 0.025
"""Seconds: the longest the loop is left to other work between two rounds."""


@dataclass(slots=True)
class WakePacer:
    """When the next wake-up round of one prefix's watchers may start, from the last's cost."""

    max_gap: float = DEFAULT_MAX_GAP
    next_start: float = float("-inf")
    """The loop time before which no round starts."""

    def delay(self, now: float) -> float:
        """Seconds from `now` until the next round may start (0: wake at once)."""
        return max(0.0, self.next_start - now)

    def finished(self, start: float, end: float) -> None:
        """The last round ran from `start` to `end` (loop time): leave the loop as long."""
        self.next_start = end + min(self.max_gap, max(0.0, end - start))
