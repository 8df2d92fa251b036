"""The dashboard's chart buckets: any range gives a drawable number of points, aligned and complete."""
from __future__ import annotations

import pytest

from edgewave.cloud.dashboard.bucketing import (DAY_MS, HOUR_MS, MAX_BUCKETS, MINUTE_MS, RangeError, bucket_size,
                                                make_range, parse_range, preset_range, series)

NOW = 1_700_000_123_456   # not on a minute boundary


@pytest.mark.parametrize("name, bucket, at_most", [("1h", MINUTE_MS, 61), ("24h", MINUTE_MS, 1441),
                                                   ("7d", 10 * MINUTE_MS, 1009)])
def test_presets_have_the_expected_resolution_and_few_points(name, bucket, at_most):
    rng = preset_range(name, NOW)
    assert rng.bucket_ms == bucket
    assert len(rng.bucket_starts) <= at_most <= MAX_BUCKETS
    # Whole buckets, aligned to their size, covering "now".
    assert rng.start_ms % bucket == 0 and rng.end_ms % bucket == 0
    assert rng.start_ms <= NOW - {"1h": HOUR_MS, "24h": DAY_MS, "7d": 7 * DAY_MS}[name] and rng.end_ms > NOW


def test_long_custom_ranges_stay_within_the_point_budget():
    for days in (8, 30, 90, 365):
        rng = make_range(NOW - days * DAY_MS, NOW)
        assert len(rng.bucket_starts) <= MAX_BUCKETS, days
        assert rng.start_ms <= NOW - days * DAY_MS and rng.end_ms >= NOW


def test_bucket_size_is_the_smallest_step_that_fits():
    assert bucket_size(60 * MINUTE_MS) == MINUTE_MS
    assert bucket_size(1500 * MINUTE_MS) == MINUTE_MS
    assert bucket_size(1501 * MINUTE_MS) == 2 * MINUTE_MS
    assert bucket_size(7 * DAY_MS, max_buckets=100) == 2 * HOUR_MS


def test_previous_period_is_as_long_and_ends_where_this_one_starts():
    rng = preset_range("24h", NOW)
    before = rng.previous()
    assert before.end_ms == rng.start_ms and before.length_ms == rng.length_ms


def test_series_fills_every_bucket_with_zeros_where_nothing_matched():
    rng = make_range(0, 10 * MINUTE_MS)
    out = series(rng, [("fire", 2 * MINUTE_MS, 3), ("fire", 2 * MINUTE_MS, 1), ("intrusion", 9 * MINUTE_MS, 5),
                       ("fire", 99 * MINUTE_MS, 7)])   # outside the range: ignored
    assert out == {"fire": [0, 0, 4, 0, 0, 0, 0, 0, 0, 0], "intrusion": [0] * 9 + [5]}


def test_parse_range_from_request_parameters():
    assert parse_range({}, NOW).label == "24h"
    assert parse_range({"range": "1h"}, NOW).bucket_ms == MINUTE_MS
    custom = parse_range({"start": str(NOW - 3 * HOUR_MS), "end": str(NOW)})
    assert custom.label == "custom" and custom.start_ms <= NOW - 3 * HOUR_MS
    for bad in ({"range": "2y"}, {"start": "1"}, {"start": "x", "end": "2"}, {"start": "5", "end": "5"},
                {"start": "0", "end": str(500 * DAY_MS)}):
        with pytest.raises(RangeError):
            parse_range(bad, NOW)
