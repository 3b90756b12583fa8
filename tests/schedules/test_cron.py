"""A recurrence's firings: wall-clock time in its zone, across DST changes, and what is refused."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from calvin.schedules.cron import CronRefused, cron_check, firings_between, next_after

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def local(at: datetime, zone=NEW_YORK) -> str:
    return at.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def test_a_time_the_spring_change_skips_fires_when_the_gap_ends_and_next_day_as_usual():
    first = next_after("30 2 * * *", NEW_YORK, datetime(2026, 3, 8, 4, 0, tzinfo=UTC))  # 23:00 EST the day before
    assert local(first) == "2026-03-08 03:00 EDT"
    assert local(next_after("30 2 * * *", NEW_YORK, first)) == "2026-03-09 02:30 EDT"
    assert local(next_after("0 9 * * *", NEW_YORK, first)) == "2026-03-08 09:00 EDT"  # 9:00 stays 9:00


def test_a_time_the_autumn_change_repeats_fires_once():
    first = next_after("30 1 * * *", NEW_YORK, datetime(2026, 11, 1, 4, 0, tzinfo=UTC))
    assert local(first) == "2026-11-01 01:30 EDT"
    assert local(next_after("30 1 * * *", NEW_YORK, first)) == "2026-11-02 01:30 EST"  # not 01:30 EST on the 1st
    hourly = firings_between(
        "30 * * * *",
        NEW_YORK,
        datetime(2026, 11, 1, 4, 0, tzinfo=UTC),
        datetime(2026, 11, 1, 8, 0, tzinfo=UTC),
        newest=24,
    )
    assert [local(at) for at in hourly] == ["2026-11-01 00:30 EDT", "2026-11-01 01:30 EDT", "2026-11-01 02:30 EST"]


def test_berlin_reads_the_cron_in_berlin():
    at = next_after("0 8 * * 1-5", BERLIN, datetime(2026, 3, 27, 12, 0, tzinfo=UTC))  # a Friday, after 8:00
    assert local(at, BERLIN) == "2026-03-30 08:00 CEST" and at.hour == 6  # Monday, after the change to summer time


def test_missed_firings_are_the_newest_oldest_first():
    start, end = datetime(2026, 1, 1, 0, 0, tzinfo=UTC), datetime(2026, 1, 3, 0, 30, tzinfo=UTC)
    missed = firings_between("0 * * * *", UTC, start, end, newest=24)
    assert len(missed) == 24 and missed == sorted(missed)
    assert (missed[0], missed[-1]) == (datetime(2026, 1, 2, 1, 0, tzinfo=UTC), datetime(2026, 1, 3, 0, 0, tzinfo=UTC))
    assert firings_between("0 * * * *", UTC, start, end, newest=1) == [datetime(2026, 1, 3, 0, 0, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("* * * * *", "fires 60 s apart; at most one run every 300 s"),
        ("0,1 * * * *", "fires 60 s apart"),
        ("*/5 * * * * *", "exactly 5 fields"),
        ("0 0 30 2 *", "never fires"),
        ("61 * * * *", "not a cron expression"),
        ("0 0 * * \x00", "5 fields"),
        ("", "a cron expression"),
        ("0 " * 60, "at most 100 characters"),
        ("@reboot", "exactly 5 fields"),
    ],
)
def test_a_recurrence_that_fires_too_often_never_or_is_not_cron_is_refused(expression, says):
    with pytest.raises(CronRefused, match=".*") as refused:
        cron_check(expression, min_interval_seconds=300, zone=UTC, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert says in str(refused.value), str(refused.value)


def test_a_normal_recurrence_passes_normalised():
    assert cron_check("  */5   * * * * ", min_interval_seconds=300, zone=UTC, now=datetime(2026, 1, 1, tzinfo=UTC)) == (
        "*/5 * * * *"
    )
