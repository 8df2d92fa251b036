"""Time ranges and chart buckets: a chart gets at most MAX_BUCKETS points per series, whatever its range.

The aggregates are per minute; a week is 10,080 minutes per pattern, too many for
a phone's browser to draw and pointless on a 400-pixel-wide chart. The server
sums minutes into buckets of one of STEPS_MS (the smallest one that gives at
most MAX_BUCKETS buckets), so an hour is drawn minute by minute, a day in
minutes and a week in 10-minute buckets. Buckets are aligned to multiples of
their size since the epoch (UTC), so the same bucket has the same bounds
whichever range asked for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgewave.shared import clock

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

MAX_BUCKETS = 1500
"""At most this many points per series (a day at 1-minute resolution is 1,440)."""

STEPS_MS = (MINUTE_MS, 2 * MINUTE_MS, 5 * MINUTE_MS, 10 * MINUTE_MS, 15 * MINUTE_MS, 30 * MINUTE_MS,
            HOUR_MS, 2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS, 7 * DAY_MS)

PRESETS_MS = {"1h": HOUR_MS, "24h": DAY_MS, "7d": 7 * DAY_MS}
"""The range buttons: last hour, last day, last week."""

MAX_RANGE_MS = 400 * DAY_MS
"""A custom range longer than this is refused (with daily buckets it would still be drawable,
but scanning more than a year of minutes is not what an overview page should do)."""


class RangeError(ValueError):
    """A time range the dashboard cannot show; the message says why."""


@dataclass(frozen=True)
class TimeRange:
    """A half-open interval [start_ms, end_ms) of match time, cut into buckets of bucket_ms."""

    start_ms: int
    end_ms: int
    bucket_ms: int
    label: str

    @property
    def length_ms(self) -> int:
        return self.end_ms - self.start_ms

    def query(self) -> dict[str, Any]:
        """The query parameters that ask for this range again (a preset by name, else start and end)."""
        return {"range": self.label} if self.label in PRESETS_MS else {"start": self.start_ms, "end": self.end_ms}

    @property
    def bucket_starts(self) -> list[int]:
        """The start of every bucket in the range, in order (the chart's x values)."""
        return list(range(self.start_ms, self.end_ms, self.bucket_ms))

    def previous(self) -> "TimeRange":
        """The period of the same length just before this one (for "change against the previous period")."""
        return TimeRange(self.start_ms - self.length_ms, self.start_ms, self.bucket_ms, f"before {self.label}")


def bucket_size(length_ms: int, max_buckets: int = MAX_BUCKETS) -> int:
    """The smallest step of STEPS_MS that cuts ``length_ms`` into at most ``max_buckets`` buckets."""
    for step in STEPS_MS:
        if -(-length_ms // step) <= max_buckets:
            return step
    return STEPS_MS[-1]


def make_range(start_ms: int, end_ms: int, label: str = "custom", max_buckets: int = MAX_BUCKETS) -> TimeRange:
    """A range from ``start_ms`` to ``end_ms``, widened outwards to whole buckets."""
    if end_ms <= start_ms:
        raise RangeError("the end of the range must be after its start")
    if end_ms - start_ms > MAX_RANGE_MS:
        raise RangeError(f"a range may be at most {MAX_RANGE_MS // DAY_MS} days long")
    step = bucket_size(end_ms - start_ms, max_buckets)
    start = start_ms // step * step
    end = -(-end_ms // step) * step
    # Widening by at most one bucket at each end can push the count past the limit; then take the next step.
    while (end - start) // step > max_buckets and step != STEPS_MS[-1]:
        step = STEPS_MS[STEPS_MS.index(step) + 1]
        start, end = start_ms // step * step, -(-end_ms // step) * step
    return TimeRange(start, end, step, label)


def preset_range(name: str, now_ms: int | None = None) -> TimeRange:
    """``1h``, ``24h`` or ``7d`` ending now (the current, partly filled bucket included)."""
    if name not in PRESETS_MS:
        raise RangeError(f"unknown range {name!r} (one of {', '.join(PRESETS_MS)}, or custom with start and end)")
    now_ms = clock.now_ms() if now_ms is None else now_ms
    return make_range(now_ms - PRESETS_MS[name], now_ms, name)


def parse_range(params: dict[str, str], now_ms: int | None = None) -> TimeRange:
    """The range a request asks for: ``range=1h|24h|7d`` (default 24h), or ``start`` and ``end`` in epoch ms."""
    start, end = params.get("start"), params.get("end")
    if start or end:
        try:
            start_ms, end_ms = int(start or ""), int(end or "")
        except ValueError as exc:
            raise RangeError("start and end must both be given, in milliseconds since the epoch") from exc
        return make_range(start_ms, end_ms, "custom")
    return preset_range(params.get("range") or "24h", now_ms)


def series(range_: TimeRange, rows: list[tuple[str, int, int]]) -> dict[str, list[int]]:
    """(name, bucket_start_ms, count) rows as one list of counts per name over every bucket (zeros filled)."""
    index = {start: i for i, start in enumerate(range_.bucket_starts)}
    out: dict[str, list[int]] = {}
    for name, bucket, count in rows:
        values = out.setdefault(name, [0] * len(index))
        if bucket in index:
            values[index[bucket]] += count
    return dict(sorted(out.items()))
