"""The aggregates the Spark job keeps in SQLite for the dashboard, written exactly once per batch.

Each micro-batch of the streaming query holds only events seen for the first
time (duplicates were dropped by the query's de-duplication state, which lives
in the checkpoint). The job turns a batch into *partial* aggregates, this
batch's contribution, and ``apply_batch`` adds them to the running totals in one
SQLite transaction together with the row ``committed_batches(query_id,
batch_id)``. If the job dies after that commit but before Spark records the
batch as done, Spark replays the same batch (same files, same de-duplication
state, so the same rows); ``apply_batch`` finds the batch id and adds nothing.
If it dies before the commit, nothing of the batch was written. So every event
is counted once.

Every aggregate is therefore one that can be summed across batches:

- ``matches_per_minute(gateway, pattern, minute_ms, count)``: match events by the
  minute of their window end (the match time); ``matches_per_pattern_minute(minute_ms,
  pattern, count)`` the same over every gateway, written in the same transaction, so the
  dashboard's week of 300 gateways reads a few thousand rows instead of half a million;
- ``binding_values(pattern, variable, value, count)``: how often each value was
  bound to each variable (the view ``binding_top`` ranks them per pattern and variable);
- ``delay_histogram(minute_ms, kind, bucket_ms, count)``: delays from match time
  (window end) to ingest time, in buckets of three significant digits, from which
  ``delay_per_minute(minute_ms, kind, count, sum_ms, min_ms, max_ms, p50_ms, p95_ms)``
  is recomputed for the minutes a batch touched (percentiles are nearest-rank
  over the buckets, so within 1% below the true value; count, sum, min and max are exact);
- ``significant_per_minute(gateway, sensor, property, minute_ms, count)``;
- per-hour and per-day sums of ``matches_per_pattern_minute``, ``significant_per_minute``,
  ``delay_histogram`` and ``delay_per_minute`` (count, sum, min, max), written in the same
  transaction (cloud/rollups.py): the dashboard reads a week from them, with the minute rows only
  for the partial hours at the range's edges;
- ``instance_results(event_id, gateway, query, window_start, window_end, operator, rows,
  ingest_ms, part)``: the results of per-instance queries, one row per instance event (an instance
  of more than 500 rows comes as several, ``part`` 0, 1, ...), ``rows`` a JSON array of
  ``{variable: term}``.
  Not a sum but a store: one generic table rather than one per query, since queries come and
  go with pushed configs and their variables are not known to the cloud; keyed by the event
  id, so an instance a gateway sent again after a crash, even past the job's de-duplication
  horizon, is stored once.

Landing-zone lines that are not valid events (not UTF-8 or JSON, not of the
event's shape, a required field missing, an unknown kind) are not counted; the
same transaction stores them in ``rejected_records`` with their reason, source
file and batch, and their number in ``committed_batches.rejected``, so they are
stored exactly once too.
"""
from __future__ import annotations

import math
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

import sqlite_utils

from edgewave.shared import clock
from edgewave.shared.events import instance_event_id

from . import rollups
from .database import transaction

MINUTE_MS = 60_000
RECORD_LIMIT_BYTES = 64 * 1024
"""A rejected line is stored cut to this many bytes (``record_bytes`` keeps its length)."""


def delay_bucket(delay_ms: int) -> int:
    """The histogram bucket of a delay: the value cut to three significant digits (sign kept).

    0..999 ms are their own buckets; 1234 -> 1230; 56789 -> 56700: a bucket is
    never more than 1% below the values in it. The Spark job computes the same
    function in SQL (see job.delay_bucket_column).
    """
    magnitude = abs(int(delay_ms))
    if magnitude < 1000:
        bucket = magnitude
    else:
        scale = 10 ** (len(str(magnitude)) - 3)
        bucket = magnitude // scale * scale
    return -bucket if delay_ms < 0 else bucket


def percentile(histogram: Iterable[tuple[int, int]], q: float) -> int | None:
    """Nearest-rank percentile ``q`` (0..1) of a histogram of (bucket, count) pairs."""
    buckets = sorted((b, c) for b, c in histogram if c > 0)
    total = sum(c for _, c in buckets)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for bucket, count in buckets:
        seen += count
        if seen >= rank:
            return bucket
    return buckets[-1][0]


@dataclass
class BatchAggregates:
    """One micro-batch's contribution to every aggregate."""

    rows: int = 0
    matches: list[tuple[str, str, int, int]] = field(default_factory=list)
    """(gateway, pattern, minute_ms, count)"""
    bindings: list[tuple[str, str, str, int]] = field(default_factory=list)
    """(pattern, variable, value, count)"""
    delays: list[tuple[int, str, int, int, int, int, int]] = field(default_factory=list)
    """(minute_ms, kind, bucket_ms, count, sum_ms, min_ms, max_ms)"""
    significant: list[tuple[str, str, str, int, int]] = field(default_factory=list)
    """(gateway, sensor, property, minute_ms, count)"""
    rejected: list["RejectedRecord"] = field(default_factory=list)
    """the batch's landing-zone lines that are not valid events"""
    instances: list["InstanceResult"] = field(default_factory=list)
    """the batch's instance events (results of per-instance queries)"""

    def rejected_by_reason(self) -> list[tuple[str, int]]:
        """(reason, count) of the rejected lines, most frequent first."""
        return sorted(Counter(r.reason for r in self.rejected).items(), key=lambda rc: (-rc[1], rc[0]))


class RejectedRecord(NamedTuple):
    """A landing-zone line the job did not count, and why."""

    source_file: str
    reason: str
    record: str
    """the line, cut to RECORD_LIMIT_BYTES"""
    record_bytes: int
    """the line's length in bytes before the cut"""


class InstanceResult(NamedTuple):
    """One instance event as stored: a window instance's rows (or a part of them)."""

    event_id: str
    gateway: str
    query: str
    window_start: int
    window_end: int
    operator: str
    rows: str
    """JSON array of {variable: N-Triples term}"""
    ingest_ms: int
    part: int | None = None
    """which part of its instance this event is (0, 1, ...: the rows' order across parts); None when its
    id is not one ``events.instance_events`` makes"""


MAX_INSTANCE_PARTS = 256
"""``instance_part`` looks this far (128,000 rows of one instance at 500 an event): an id it does not find
costs this many hashes, which bounds what a gateway sending made-up ids can cost the job."""


def instance_part(event_id_: str, gateway: str, query: str, start: int, end: int, operator: str) -> int | None:
    """Which part of its window instance an instance event is, read off its id.

    The event carries no part number, but its id is made from one (``events.instance_events``), so the
    cloud can put the rows of an instance cut into several events back in their order (an ``ORDER BY``
    query's rows are in order) whatever order the parts landed in. None for an id made otherwise."""
    for part in range(MAX_INSTANCE_PARTS):
        if instance_event_id(gateway, query, start, end, operator, part) == event_id_:
            return part
    return None


def ensure_aggregate_schema(db: sqlite_utils.Database) -> None:
    """Create the aggregate tables (and add what a database from an older version lacks)."""
    rollup_missing = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                                "'matches_per_pattern_minute'").fetchone() is None
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS committed_batches (
            query_id TEXT NOT NULL,
            batch_id INTEGER NOT NULL,
            rows INTEGER NOT NULL,
            committed_ms INTEGER NOT NULL,
            rejected INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (query_id, batch_id)
        );
        CREATE TABLE IF NOT EXISTS rejected_records (
            query_id TEXT NOT NULL,
            batch_id INTEGER NOT NULL,
            source_file TEXT NOT NULL,
            reason TEXT NOT NULL,
            record TEXT NOT NULL,
            record_bytes INTEGER NOT NULL,
            rejected_ms INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS rejected_records_by_time ON rejected_records (rejected_ms);
        CREATE TABLE IF NOT EXISTS matches_per_minute (
            gateway TEXT NOT NULL,
            pattern TEXT NOT NULL,
            minute_ms INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (gateway, pattern, minute_ms)
        );
        CREATE TABLE IF NOT EXISTS matches_per_pattern_minute (
            minute_ms INTEGER NOT NULL,
            pattern TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (minute_ms, pattern)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS binding_values (
            pattern TEXT NOT NULL,
            variable TEXT NOT NULL,
            value TEXT NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (pattern, variable, value)
        );
        CREATE VIEW IF NOT EXISTS binding_top AS
            SELECT pattern, variable, value, count,
                   RANK() OVER (PARTITION BY pattern, variable ORDER BY count DESC) AS rank
            FROM binding_values;
        CREATE TABLE IF NOT EXISTS delay_histogram (
            minute_ms INTEGER NOT NULL,
            kind TEXT NOT NULL,
            bucket_ms INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (minute_ms, kind, bucket_ms)
        );
        CREATE TABLE IF NOT EXISTS delay_per_minute (
            minute_ms INTEGER NOT NULL,
            kind TEXT NOT NULL,
            count INTEGER NOT NULL,
            sum_ms INTEGER NOT NULL,
            min_ms INTEGER NOT NULL,
            max_ms INTEGER NOT NULL,
            p50_ms INTEGER,
            p95_ms INTEGER,
            PRIMARY KEY (minute_ms, kind)
        );
        CREATE TABLE IF NOT EXISTS significant_per_minute (
            gateway TEXT NOT NULL,
            sensor TEXT NOT NULL,
            property TEXT NOT NULL,
            minute_ms INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (gateway, sensor, property, minute_ms)
        );
        CREATE TABLE IF NOT EXISTS instance_results (
            event_id TEXT PRIMARY KEY,
            gateway TEXT NOT NULL,
            query TEXT NOT NULL,
            window_start INTEGER NOT NULL,
            window_end INTEGER NOT NULL,
            operator TEXT NOT NULL,
            rows TEXT NOT NULL,
            ingest_ms INTEGER NOT NULL,
            part INTEGER
        );
        CREATE INDEX IF NOT EXISTS instance_results_by_query ON instance_results (query, gateway, window_end);
        -- the dashboard's page of a query over every gateway, by time
        CREATE INDEX IF NOT EXISTS instance_results_by_time ON instance_results (query, window_end);
        -- the dashboard's time-range queries (the primary keys start with the gateway); covering, so a
        -- week of minute rows is summed from the index alone
        CREATE INDEX IF NOT EXISTS matches_per_minute_by_minute ON matches_per_minute (minute_ms, pattern, count);
        CREATE INDEX IF NOT EXISTS significant_per_minute_by_minute
            ON significant_per_minute (minute_ms, property, gateway, sensor, count);
        """
    )
    _add_column(db, "committed_batches", "rejected", "INTEGER NOT NULL DEFAULT 0")
    _add_column(db, "instance_results", "part", "INTEGER")
    if rollup_missing:      # a database from before the table: its sums from the minute rows, once
        with transaction(db) as conn:
            conn.execute("""INSERT OR IGNORE INTO matches_per_pattern_minute (minute_ms, pattern, count)
                            SELECT minute_ms, pattern, SUM(count) FROM matches_per_minute
                            GROUP BY minute_ms, pattern""")
    rollups.ensure_schema(db.conn)     # per-hour and per-day sums, from the minute rows when new or stale


def over_gateways(matches: Iterable[tuple[str, str, int, int]]) -> list[tuple[int, str, int]]:
    """(minute_ms, pattern, count) of (gateway, pattern, minute_ms, count) rows, summed over gateways."""
    totals: Counter = Counter()
    for _, pattern, minute_ms, count in matches:
        totals[(minute_ms, pattern)] += count
    return [(minute_ms, pattern, count) for (minute_ms, pattern), count in sorted(totals.items())]


def _add_column(db: sqlite_utils.Database, table: str, column: str, sql_type: str) -> None:
    """Add a column a database made by an older version lacks."""
    columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})").fetchall()}
    if column not in columns:
        try:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
        except sqlite3.OperationalError as exc:  # another process added it first
            if "duplicate column" not in str(exc):
                raise


def committed_queries(db: sqlite_utils.Database) -> list[str]:
    """The streaming query ids that have written aggregates into this database."""
    ensure_aggregate_schema(db)
    return [r[0] for r in db.execute("SELECT DISTINCT query_id FROM committed_batches").fetchall()]


def apply_batch(db: sqlite_utils.Database, query_id: str, batch_id: int, batch: BatchAggregates) -> bool:
    """Add one batch's partial aggregates and store its rejected lines, exactly once.

    False if the batch was already applied (a replayed batch): nothing is added.
    """
    now_ms = clock.now_ms()
    per_pattern = over_gateways(batch.matches)
    with transaction(db) as conn:
        seen = conn.execute("SELECT 1 FROM committed_batches WHERE query_id = ? AND batch_id = ?",
                            (query_id, batch_id)).fetchone()
        if seen:
            return False
        conn.executemany(
            """INSERT INTO matches_per_minute (gateway, pattern, minute_ms, count) VALUES (?, ?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count""",
            batch.matches,
        )
        conn.executemany(
            """INSERT INTO matches_per_pattern_minute (minute_ms, pattern, count) VALUES (?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count""",
            per_pattern,
        )
        rollups.MATCHES.add(conn, [(m, p, c) for m, p, c in per_pattern])
        conn.executemany(
            """INSERT INTO binding_values (pattern, variable, value, count) VALUES (?, ?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count""",
            batch.bindings,
        )
        conn.executemany(
            """INSERT INTO significant_per_minute (gateway, sensor, property, minute_ms, count) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count""",
            batch.significant,
        )
        rollups.SIGNIFICANT.add(conn, [(m, p, g, s, c) for g, s, p, m, c in batch.significant])
        conn.executemany(
            """INSERT INTO delay_histogram (minute_ms, kind, bucket_ms, count) VALUES (?, ?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count""",
            [(m, k, b, c) for m, k, b, c, _, _, _ in batch.delays],
        )
        rollups.DELAY_HISTOGRAM.add(conn, [(m, k, b, c) for m, k, b, c, _, _, _ in batch.delays])
        conn.executemany(
            """INSERT INTO delay_per_minute (minute_ms, kind, count, sum_ms, min_ms, max_ms) VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT DO UPDATE SET count = count + excluded.count, sum_ms = sum_ms + excluded.sum_ms,
                   min_ms = MIN(min_ms, excluded.min_ms), max_ms = MAX(max_ms, excluded.max_ms)""",
            [(m, k, c, s, lo, hi) for m, k, _, c, s, lo, hi in batch.delays],
        )
        rollups.DELAYS.add(conn, [(m, k, c, s, lo, hi) for m, k, _, c, s, lo, hi in batch.delays])
        for minute_ms, kind in sorted({(m, k) for m, k, *_ in batch.delays}):
            histogram = conn.execute("SELECT bucket_ms, count FROM delay_histogram WHERE minute_ms = ? AND kind = ?",
                                     (minute_ms, kind)).fetchall()
            conn.execute("UPDATE delay_per_minute SET p50_ms = ?, p95_ms = ? WHERE minute_ms = ? AND kind = ?",
                         (percentile(histogram, 0.50), percentile(histogram, 0.95), minute_ms, kind))
        conn.executemany(
            """INSERT INTO rejected_records (query_id, batch_id, source_file, reason, record, record_bytes, rejected_ms)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            [(query_id, batch_id, r.source_file, r.reason, r.record, r.record_bytes, now_ms) for r in batch.rejected],
        )
        conn.executemany(
            """INSERT OR IGNORE INTO instance_results (event_id, gateway, query, window_start, window_end, operator,
                                                       rows, ingest_ms, part) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            batch.instances,
        )
        committed = conn.execute(
            "INSERT INTO committed_batches (query_id, batch_id, rows, committed_ms, rejected) VALUES (?, ?, ?, ?, ?)",
            (query_id, batch_id, batch.rows, now_ms, len(batch.rejected)))
        rollups.note_batch(conn, committed.lastrowid)
    return True
