"""metav1.Time on the wire: RFC 3339, second precision, always UTC with a Z."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from plnt.api import meta

RFC3339_SECONDS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
MOMENTS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()
)


def test_a_time_is_written_in_utc_with_a_z_and_no_fraction() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 987654, tzinfo=timezone(timedelta(hours=2)))
    assert meta.format_time(moment) == "2030-01-02T01:04:05Z"


@given(MOMENTS)
def test_a_written_time_parses_back_to_the_same_second(moment: datetime) -> None:
    text = meta.format_time(moment)
    assert RFC3339_SECONDS.match(text)
    parsed = meta.parse_time(text)
    assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0)
    assert parsed == moment.astimezone(UTC).replace(microsecond=0)


def test_parse_time_accepts_an_offset_as_well_as_z() -> None:
    assert meta.parse_time("2030-01-02T03:04:05+02:00") == meta.parse_time("2030-01-02T01:04:05Z")


def test_now_is_the_current_second_in_the_wire_format() -> None:
    before = int(time.time())
    text = meta.now_rfc3339()
    after = int(time.time())
    assert RFC3339_SECONDS.match(text)
    assert before <= meta.parse_time(text).timestamp() <= after
