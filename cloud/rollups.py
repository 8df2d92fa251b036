"""Per-hour and per-day sums of the minute aggregates, so a week's views read hundreds of rows, not 500,000.

The dashboard's long ranges (a week of 300 gateways) cost what they read: summing every minute
row of a week took most of the overview's time. Each minute table the dashboard sums over a range
therefore has two rollups, ``<name>_hour`` / ``<name>_day`` style tables keyed by the period's start
(``hour_ms``, ``day_ms``: epoch ms, UTC, floored), holding exactly the sums (and minima, maxima) of
its minute rows. ``aggregates.apply_batch`` adds each batch to the minute rows and to both rollups
in the same transaction, so they never disagree; ``ensure_schema`` builds them from the minute rows
for a database written before they existed, or by a job that did not keep them (``current``).

A range [start, end) is read in pieces (``segments``): whole days from the day table, the whole
hours at either side of them from the hour table, and the partial hours at the edges from the
minute rows. Every minute row falls in exactly one piece, so a sum over the pieces is the sum over
the minute rows: the answers are the same as reading minutes alone, to the last count.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Iterable, Sequence

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
PERIODS = (HOUR_MS, DAY_MS)
"""The rolled-up periods, finest first."""
_TIME_COLUMN = {MINUTE_MS: "minute_ms", HOUR_MS: "hour_ms", DAY_MS: "day_ms"}


@dataclass(frozen=True)
class Rollup:
    """A minute table and the per-hour and per-day tables summing it.

    Rows handed to ``add`` are ``(minute_ms, *keys, *sums, *mins, *maxs)``."""

    source: str
    hour_table: str
    day_table: str
    keys: tuple[tuple[str, str], ...]
    """(column, SQL type) of the key columns besides the time"""
    sums: tuple[str, ...]
    mins: tuple[str, ...] = ()
    maxs: tuple[str, ...] = ()
    minute_index: str | None = None
    """the index by minute to read the minute pieces with: the edges of a range are short, and with the
    statistics of ``ANALYZE`` SQLite may prefer skipping through the primary key sensor by sensor"""

    @property
    def key_names(self) -> list[str]:
        return [name for name, _ in self.keys]

    @property
    def value_names(self) -> list[str]:
        return [*self.sums, *self.mins, *self.maxs]

    def table(self, period_ms: int) -> str:
        """The table holding rows of ``period_ms`` (the source for a minute)."""
        return {MINUTE_MS: self.source, HOUR_MS: self.hour_table, DAY_MS: self.day_table}[period_ms]

    def create_sql(self, period_ms: int) -> str:
        time = _TIME_COLUMN[period_ms]
        columns = [f"{time} INTEGER NOT NULL", *(f"{name} {kind} NOT NULL" for name, kind in self.keys),
                   *(f"{name} INTEGER NOT NULL" for name in self.value_names)]
        key = ", ".join([time, *self.key_names])
        return (f"CREATE TABLE IF NOT EXISTS {self.table(period_ms)} ({', '.join(columns)}, "
                f"PRIMARY KEY ({key})) WITHOUT ROWID")

    def upsert_sql(self, period_ms: int) -> str:
        time = _TIME_COLUMN[period_ms]
        names = [time, *self.key_names, *self.value_names]
        updates = [*(f"{c} = {c} + excluded.{c}" for c in self.sums),
                   *(f"{c} = MIN({c}, excluded.{c})" for c in self.mins),
                   *(f"{c} = MAX({c}, excluded.{c})" for c in self.maxs)]
        return (f"INSERT INTO {self.table(period_ms)} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
                f"ON CONFLICT DO UPDATE SET {', '.join(updates)}")

    def backfill_sql(self, period_ms: int) -> str:
        """Rows of ``period_ms`` summed from the next finer table (minutes for hours, hours for days)."""
        finer = HOUR_MS if period_ms == DAY_MS else MINUTE_MS
        time, finer_time = _TIME_COLUMN[period_ms], _TIME_COLUMN[finer]
        names = [time, *self.key_names, *self.value_names]
        aggregates = [*(f"SUM({c})" for c in self.sums), *(f"MIN({c})" for c in self.mins),
                      *(f"MAX({c})" for c in self.maxs)]
        return (f"INSERT INTO {self.table(period_ms)} ({', '.join(names)}) "
                f"SELECT {floor_sql(finer_time, period_ms)}, {', '.join(self.key_names)}, {', '.join(aggregates)} "
                f"FROM {self.table(finer)} GROUP BY 1, {', '.join(self.key_names)}")

    def rolled(self, rows: Iterable[Sequence], period_ms: int) -> list[tuple]:
        """``rows`` (minute rows of one batch) combined per period and key, as the period table adds them.

        Runs for every row of every batch, so a single count (most rollups) takes a short path."""
        n = 1 + len(self.keys)
        if len(self.sums) == 1 and not self.mins and not self.maxs:
            counts: dict[tuple, int] = {}
            for row in rows:
                minute = row[0]
                key = (minute - minute % period_ms, *row[1:n])      # Python's % floors, also before 1970
                counts[key] = counts.get(key, 0) + row[n]
            return [(*key, count) for key, count in counts.items()]
        n_sums, n_mins = len(self.sums), len(self.mins)
        out: dict[tuple, list[int]] = {}
        for row in rows:
            minute = row[0]
            key = (minute - minute % period_ms, *row[1:n])
            seen = out.get(key)
            if seen is None:
                out[key] = list(row[n:])
                continue
            for i, v in enumerate(row[n:]):
                if i < n_sums:
                    seen[i] += v
                elif i < n_sums + n_mins:
                    seen[i] = min(seen[i], v)
                else:
                    seen[i] = max(seen[i], v)
        return [(*key, *values) for key, values in out.items()]

    def add(self, conn: sqlite3.Connection, rows: Sequence[Sequence]) -> None:
        """Add one batch's minute rows to the hour and day tables (inside the batch's transaction)."""
        for period in PERIODS:
            conn.executemany(self.upsert_sql(period), self.rolled(rows, period))

    def read_sql(self, columns: str, start_ms: int, end_ms: int, coarsest_ms: int = DAY_MS,
                 minute_index: bool = True) -> tuple[str, list[int]]:
        """A ``UNION ALL`` of the pieces of [start_ms, end_ms), each selecting ``columns`` (``minute_ms`` names
        each row's period start), and its parameters: a subquery that reads as the minute rows would.
        ``minute_index`` false: no index named (a database whose schema an older version made may lack it)."""
        parts, params = [], []
        for period, lo, hi in segments(start_ms, end_ms, coarsest_ms) or [(MINUTE_MS, start_ms, end_ms)]:
            time = _TIME_COLUMN[period]
            selected = columns.replace("minute_ms", f"{time} AS minute_ms") if period != MINUTE_MS else columns
            table = self.table(period)
            if period == MINUTE_MS and self.minute_index and minute_index:
                table += f" INDEXED BY {self.minute_index}"
            parts.append(f"SELECT {selected} FROM {table} WHERE {time} >= ? AND {time} < ?")
            params += [lo, hi]
        return " UNION ALL ".join(parts), params


def floor_sql(column: str, period_ms: int) -> str:
    """The start of the period holding ``column``, in SQL (SQLite's ``%`` truncates towards zero, so the
    remainder is made non-negative: floored as Python's ``%`` floors, also before 1970)."""
    return f"({column} - (({column} % {period_ms}) + {period_ms}) % {period_ms})"


def segments(start_ms: int, end_ms: int, coarsest_ms: int = DAY_MS) -> list[tuple[int, int, int]]:
    """(period_ms, lo, hi): the pieces of [start_ms, end_ms) to read, each from the table of its period.

    Whole days (up to ``coarsest_ms``) in the middle, whole hours beside them, minutes at the edges; the
    pieces are disjoint, in order and cover the range, and a period row lies wholly inside its piece."""
    periods = [p for p in PERIODS if p <= coarsest_ms]

    def split(lo: int, hi: int, levels: list[int]) -> list[tuple[int, int, int]]:
        if lo >= hi:
            return []
        if not levels:
            return [(MINUTE_MS, lo, hi)]
        period = levels[-1]
        first, last = -(-lo // period) * period, hi // period * period
        if first >= last:
            return split(lo, hi, levels[:-1])
        return split(lo, first, levels[:-1]) + [(period, first, last)] + split(last, hi, levels[:-1])

    return split(start_ms, end_ms, periods)


MATCHES = Rollup("matches_per_pattern_minute", "matches_per_pattern_hour", "matches_per_pattern_day",
                 (("pattern", "TEXT"),), ("count",))
SIGNIFICANT = Rollup("significant_per_minute", "significant_per_hour", "significant_per_day",
                     (("property", "TEXT"), ("gateway", "TEXT"), ("sensor", "TEXT")), ("count",),
                     minute_index="significant_per_minute_by_minute")
DELAY_HISTOGRAM = Rollup("delay_histogram", "delay_histogram_hour", "delay_histogram_day",
                         (("kind", "TEXT"), ("bucket_ms", "INTEGER")), ("count",))
DELAYS = Rollup("delay_per_minute", "delay_per_hour", "delay_per_day", (("kind", "TEXT"),),
                ("count", "sum_ms"), ("min_ms",), ("max_ms",))
ROLLUPS = (MATCHES, SIGNIFICANT, DELAY_HISTOGRAM, DELAYS)
TABLES = tuple(t for r in ROLLUPS for t in (r.hour_table, r.day_table))


STATE_TABLE = "rollup_state"
"""One row: the rowid of the last ``committed_batches`` row whose batch the rollups hold. A batch written
by a version of the job that did not keep them (run after this one, say) leaves it behind: the rollups
are stale, the dashboard reads minute rows, and the next open rebuilds them."""


def current(conn: sqlite3.Connection) -> bool:
    """Whether every rollup table exists and holds every committed batch (so reading it is exact)."""
    names = (*TABLES, STATE_TABLE)
    found = conn.execute(f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                         f"({', '.join('?' * len(names))})", names).fetchone()[0]
    if found != len(names):
        return False
    try:
        row = conn.execute(f"SELECT (SELECT batch_rowid FROM {STATE_TABLE}) IS "
                           "(SELECT MAX(rowid) FROM committed_batches)").fetchone()
    except sqlite3.OperationalError:            # no committed_batches: nothing can be told apart
        return False
    return bool(row[0])


def note_batch(conn: sqlite3.Connection, batch_rowid: int) -> None:
    """Record, in the batch's transaction, that the rollups hold the batch of this ``committed_batches`` row."""
    conn.execute(f"UPDATE {STATE_TABLE} SET batch_rowid = ?", (batch_rowid,))


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the rollup tables, filled from the minute rows, where a database lacks them or they are stale.

    One ``BEGIN IMMEDIATE`` transaction makes and fills them, so no writer (another job's
    ``apply_batch``) ever sees a table without its backfill. A week of 300 gateways (600,000 minute
    rows) takes a few seconds, once."""
    if not current(conn):
        _build(conn, only_if_stale=True)


def rebuild(conn: sqlite3.Connection) -> None:
    """Recompute every rollup from the minute rows (for minute rows written or deleted by hand, as the
    dashboard benchmark writes them); ``apply_batch`` keeps them up to date otherwise."""
    _build(conn, only_if_stale=False)


def _build(conn: sqlite3.Connection, only_if_stale: bool) -> None:
    """Drop, make and fill every rollup, and note the last committed batch, in one write transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not (only_if_stale and current(conn)):    # again, under the write lock: another process may have
            for rollup in ROLLUPS:                   # built them meanwhile
                for period in PERIODS:
                    conn.execute(f"DROP TABLE IF EXISTS {rollup.table(period)}")
                    conn.execute(rollup.create_sql(period))
                    conn.execute(rollup.backfill_sql(period))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (batch_rowid INTEGER)")
            conn.execute(f"DELETE FROM {STATE_TABLE}")
            conn.execute(f"INSERT INTO {STATE_TABLE} (batch_rowid) SELECT MAX(rowid) FROM committed_batches")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
