"""Per-hour and per-day sums of the minute aggregates: written with every batch, built for an older
database on open, and the dashboard's answers read through them equal those read from minute rows alone."""
from __future__ import annotations

import random
import shutil
import sqlite3

import pytest

from cloud_harness import rollup_mismatches
from edgewave.cloud import rollups
from edgewave.cloud.aggregates import BatchAggregates, apply_batch, delay_bucket, ensure_aggregate_schema
from edgewave.cloud.dashboard import queries
from edgewave.cloud.dashboard.bucketing import make_range, preset_range
from edgewave.cloud.database import open_database

MINUTE, HOUR, DAY = rollups.MINUTE_MS, rollups.HOUR_MS, rollups.DAY_MS
NOW = 1_795_967_125_132        # a Tuesday, 10:25:25.132 UTC: no range below starts or ends on an hour
PATTERNS = ("fire", "intrusion", "patient")


def random_batch(rng: random.Random, minutes: list[int]) -> BatchAggregates:
    """Matches, significant observations and delays at minutes drawn from ``minutes``."""
    matches = [(f"gw{rng.randrange(4)}", rng.choice(PATTERNS), rng.choice(minutes), rng.randint(1, 5))
               for _ in range(rng.randint(20, 60))]
    significant = [(f"gw{rng.randrange(4)}", f"ex:sensor{rng.randrange(5)}",
                    rng.choice(("sosa:Temperature", "ex:Smoke")), rng.choice(minutes), rng.randint(1, 4))
                   for _ in range(rng.randint(10, 40))]
    delays = {}
    for _ in range(rng.randint(10, 40)):
        minute, kind = rng.choice(minutes), rng.choice(("match", "significant"))
        values = [int(rng.lognormvariate(6, 1.5)) for _ in range(rng.randint(1, 6))]
        for v in values:
            key = (minute, kind, delay_bucket(v))
            c, s, lo, hi = delays.get(key, (0, 0, v, v))
            delays[key] = (c + 1, s + v, min(lo, v), max(hi, v))
    return BatchAggregates(rows=len(matches) + len(significant), matches=matches, significant=significant,
                           delays=[(m, k, b, c, s, lo, hi) for (m, k, b), (c, s, lo, hi) in delays.items()])


@pytest.fixture
def filled(tmp_path):
    """Nine days of minute rows written by 40 batches (one applied twice), as the Spark job writes them."""
    rng = random.Random(11)
    now_minute = NOW // MINUTE * MINUTE
    minutes = [now_minute - rng.randrange(9 * 1440) * MINUTE for _ in range(3000)]
    minutes += [now_minute, now_minute - MINUTE, now_minute - 7 * DAY]      # the edges of the week
    path = tmp_path / "cloud.db"
    db = open_database(path)
    try:
        ensure_aggregate_schema(db)
        for batch_id in range(40):
            batch = random_batch(rng, minutes)
            assert apply_batch(db, "q", batch_id, batch)
            if batch_id == 17:
                assert not apply_batch(db, "q", batch_id, batch)     # replayed: added once
    finally:
        db.conn.close()
    return path


def minute_rows_only(path, tmp_path):
    """A copy of the database without its rollups: the dashboard then reads every range from minute rows."""
    copy = tmp_path / "minutes-only.db"
    shutil.copy(path, copy)
    conn = sqlite3.connect(copy)
    for table in rollups.TABLES:
        conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()
    return copy


def test_the_pieces_of_a_range_cover_it_once_each_from_a_table_of_whole_periods():
    rng = random.Random(3)
    for _ in range(2000):
        start = NOW - rng.randrange(12 * DAY)
        end = start + rng.choice((1, MINUTE, HOUR, DAY)) * rng.randint(0, 200) + rng.randrange(2 * HOUR)
        coarsest = rng.choice((MINUTE, HOUR, DAY))
        pieces = rollups.segments(start, end, coarsest)
        at = start
        for period, lo, hi in pieces:
            assert lo == at < hi and period <= coarsest
            assert period == MINUTE or (lo % period == 0 and hi % period == 0)
            at = hi
        assert at == max(start, end) or not pieces and end <= start
        # a minute piece never holds a whole hour, an hour piece never a whole day
        for period, lo, hi in pieces:
            finer_than = [p for p in rollups.PERIODS if p > period and p <= coarsest]
            assert all(-(-lo // p) * p + p > hi for p in finer_than)


def test_every_batch_adds_to_the_hours_and_days_of_its_minutes(filled):
    assert rollup_mismatches(filled) == []
    conn = sqlite3.connect(filled)
    try:
        assert conn.execute("SELECT COUNT(*) FROM delay_per_day").fetchone()[0] >= 9 * 2
        assert conn.execute("SELECT COUNT(*) FROM significant_per_hour").fetchone()[0] > 100
    finally:
        conn.close()


def test_an_older_database_gets_its_rollups_when_opened(filled):
    conn = sqlite3.connect(filled)
    written = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in rollups.TABLES}
    for table in rollups.TABLES:
        if table != "delay_histogram_hour":
            conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM delay_histogram_hour WHERE hour_ms % 7200000 = 0")   # without its day: made again whole
    conn.commit()
    conn.close()
    for _ in range(2):                                    # twice: the second open has nothing to add
        db = open_database(filled)
        try:
            ensure_aggregate_schema(db)
        finally:
            db.conn.close()
    conn = sqlite3.connect(filled)
    try:
        assert {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in rollups.TABLES} == written
    finally:
        conn.close()
    assert rollup_mismatches(filled) == []



def test_a_batch_written_without_the_rollups_is_read_from_minutes_until_the_next_open_rebuilds_them(filled):
    """A job that does not keep the rollups (one of a version before them, run against this database)
    commits a batch: the rollups no longer hold every batch, so the dashboard reads minute rows (exact),
    and the next open of the job rebuilds them."""
    week = (NOW - 7 * DAY, NOW)
    with queries.Reader(filled).query() as q:
        assert q.has_rollups
        before = queries.pattern_totals(q, *week)
    conn = sqlite3.connect(filled)
    conn.execute("INSERT INTO matches_per_minute VALUES ('gw9', 'fire', ?, 1000)", (NOW - 3 * DAY,))
    conn.execute("INSERT INTO matches_per_pattern_minute VALUES (?, 'fire', 1000) "
                 "ON CONFLICT DO UPDATE SET count = count + 1000", (NOW // MINUTE * MINUTE - 3 * DAY,))
    conn.execute("INSERT INTO committed_batches (query_id, batch_id, rows, committed_ms) VALUES ('q', 99, 1, 0)")
    conn.commit()
    conn.close()
    with queries.Reader(filled).query() as q:
        assert not q.has_rollups
        assert queries.pattern_totals(q, *week) == {**before, "fire": before["fire"] + 1000}
    db = open_database(filled)
    try:
        ensure_aggregate_schema(db)
    finally:
        db.conn.close()
    assert rollup_mismatches(filled) == []
    with queries.Reader(filled).query() as q:
        assert q.has_rollups
        assert queries.pattern_totals(q, *week) == {**before, "fire": before["fire"] + 1000}

def answers(path, start_ms: int, end_ms: int, chart_ranges: list) -> tuple:
    """Everything the overview and its chart show for [start_ms, end_ms), read through the dashboard's queries."""
    with queries.Reader(path).query() as q:
        return (q.has_rollups, queries.pattern_totals(q, start_ms, end_ms),
                queries.significant_by_property(q, start_ms, end_ms), queries.delay_summary(q, start_ms, end_ms),
                [queries.match_series(q, r) for r in chart_ranges], [queries.pattern_rows(q, r) for r in chart_ranges])


def test_answers_read_through_the_rollups_equal_those_of_the_minute_rows(filled, tmp_path):
    minutes_only = minute_rows_only(filled, tmp_path)
    rng = random.Random(5)
    ranges = [(NOW - 7 * DAY, NOW), (NOW - 7 * DAY + 17 * MINUTE + 3, NOW - 41 * MINUTE - 7),
              (NOW - 50 * HOUR - 13 * MINUTE, NOW - 2 * HOUR - 59 * MINUTE), (NOW - 9 * DAY, NOW + MINUTE)]
    ranges += [(s, s + rng.randrange(HOUR, 8 * DAY)) for s in (NOW - rng.randrange(9 * DAY) for _ in range(12))]
    for start, end in ranges:
        assert start % HOUR and end % HOUR          # partial hours at both ends
        pieces = {period for period, _, _ in rollups.segments(start, end)}
        charts = [preset_range("7d", end), preset_range("24h", end), make_range(start, end),
                  make_range(start // HOUR * HOUR, end // HOUR * HOUR + HOUR, max_buckets=200),   # hour buckets
                  make_range(start, end, max_buckets=10)]                                        # day buckets
        with_rollups, from_minutes = answers(filled, start, end, charts), answers(minutes_only, start, end, charts)
        assert with_rollups[0] and not from_minutes[0]
        assert with_rollups[1:] == from_minutes[1:], (start, end, pieces)
        assert sum(with_rollups[1].values()) > 0 and with_rollups[3]
    week = rollups.segments(NOW - 7 * DAY, NOW)
    assert {p for p, _, _ in week} == {MINUTE, HOUR, DAY}       # the week reads days, hours and minutes


def test_the_week_reads_each_piece_by_a_range_of_its_key(filled):
    """Every piece is a range search on the table's time (no table scanned whole); the sums are
    WITHOUT ROWID tables keyed by time first, so the search reads the rows in place."""
    with queries.Reader(filled).query() as q:
        for rollup, columns in ((rollups.MATCHES, "minute_ms, pattern, count AS c"),
                                (rollups.SIGNIFICANT, "property, gateway, sensor, count"),
                                (rollups.DELAY_HISTOGRAM, "kind, bucket_ms, count"),
                                (rollups.DELAYS, "kind, count, sum_ms, min_ms, max_ms")):
            source, params = q.source(rollup, columns, NOW - 7 * DAY, NOW)
            plan = [row[-1] for row in q.conn.execute(f"EXPLAIN QUERY PLAN {source}", params)]
            searches = [step for step in plan if step.startswith(("SEARCH", "SCAN"))]
            assert len(searches) == 5 and all(step.startswith("SEARCH") for step in searches), plan
            for table, time_column in ((rollup.day_table, "day_ms"), (rollup.hour_table, "hour_ms")):
                assert any(f"{table} USING PRIMARY KEY ({time_column}>? AND {time_column}<?)" in step
                           for step in searches), plan
