"""The dashboard's read-only SQL over the cloud database (registry and aggregates).

The dashboard never writes the file ingest and the Spark job write: every
connection is opened ``file:...?mode=ro`` (so a bug here cannot change a count)
and ``query_only``. In WAL mode a reader never blocks a writer, but a long read
holds back the WAL checkpoint, so every query is cut off after
``dashboard.query_timeout_s`` (a progress handler interrupts it) and the page
says the database is busy instead of slowing the writers down.

A database that does not exist yet (the cloud never ran) or lacks a table (the
Spark job has not committed its first batch) reads as empty: the pages show
empty tables, not an error.

What a gateway reported is read with a type check at every use, whatever is stored
(ingest checks status documents against a schema, but a row written before it did, or
by hand, must not make a page fail): a counter or outbox figure that is not an integer
within 64 bits reads as unknown, a stored document that is not JSON as an empty one.
"""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from edgewave.cloud import rollups
from edgewave.cloud.aggregates import percentile
from edgewave.shared.sqlite_files import open_read_only

from .bucketing import TimeRange

BUSY_TIMEOUT_S = 2.0


class QueryTimeout(RuntimeError):
    """A read took longer than the dashboard allows itself; the page shows it and the writers go on."""


class Query:
    """One read-only connection (or none, when the database does not exist yet)."""

    def __init__(self, conn: sqlite3.Connection | None, timeout_s: float) -> None:
        self.conn = conn
        self.timeout_s = timeout_s
        self._rollups: bool | None = None

    @property
    def has_rollups(self) -> bool:
        """Whether the per-hour and per-day sums exist and hold every committed batch: a database the Spark
        job has not opened since they were added lacks them until it does (and a batch written by a job
        that does not keep them makes them stale until the next open); it is then read from its minute rows
        alone, with the same answers."""
        if self._rollups is None:
            self._rollups = self.conn is not None and rollups.current(self.conn)
        return self._rollups

    def source(self, rollup: rollups.Rollup, columns: str, start_ms: int, end_ms: int,
               coarsest_ms: int = rollups.DAY_MS) -> tuple[str, list[int]]:
        """A subquery over ``rollup``'s rows in [start_ms, end_ms): whole days and hours from its sums, the
        edges from its minute rows (``columns`` as ``rollup.read_sql`` takes them), and its parameters."""
        if not self.has_rollups:
            return rollup.read_sql(columns, start_ms, end_ms, rollups.MINUTE_MS, minute_index=False)
        return rollup.read_sql(columns, start_ms, end_ms, coarsest_ms)     # its indexes were made with the rollups

    def rows(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        """The rows of ``sql``; [] when the database or a table it names does not exist yet."""
        if self.conn is None:
            return []
        deadline = time.monotonic() + self.timeout_s
        self.conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if message.startswith("no such table"):
                return []
            if message == "interrupted":
                raise QueryTimeout(f"query took longer than {self.timeout_s:g}s") from exc
            raise
        finally:
            self.conn.set_progress_handler(None, 0)

    def each(self, sql: str, params: tuple | list = ()) -> Iterator[tuple]:
        """The rows of ``sql`` one at a time, for a reader that may stop early (close the iterator then);
        the same deadline and missing-table rule as ``rows``."""
        if self.conn is None:
            return
        deadline = time.monotonic() + self.timeout_s
        self.conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            cursor = self.conn.execute(sql, params)
            while batch := cursor.fetchmany(200):
                yield from batch
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if message.startswith("no such table"):
                return
            if message == "interrupted":
                raise QueryTimeout(f"query took longer than {self.timeout_s:g}s") from exc
            raise
        finally:
            self.conn.set_progress_handler(None, 0)


class Reader:
    """Opens read-only connections to the cloud database at ``path``."""

    def __init__(self, path: str | Path, timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s

    @contextmanager
    def query(self) -> Iterator[Query]:
        """A read-only connection for one request (no connection while the file does not exist)."""
        if not self.path.exists():
            yield Query(None, self.timeout_s)
            return
        try:
            conn = open_read_only(self.path, busy_timeout_s=BUSY_TIMEOUT_S)
        except sqlite3.OperationalError:
            yield Query(None, self.timeout_s)   # removed between the check and the open
            return
        try:
            yield Query(conn, self.timeout_s)
        finally:
            conn.close()


# -- overview --------------------------------------------------------------------------------

_MATCH_COLUMNS = "minute_ms, pattern, count AS c"
"""Matches per period and pattern over every gateway: the job writes these sums beside the gateways'
minute rows (cloud/aggregates.py), per minute, hour and day, so a week of 300 gateways is a few hundred
rows, not 500,000."""


def match_series(q: Query, rng: TimeRange) -> list[tuple[str, int, int]]:
    """(pattern, bucket_start_ms, matches) for every bucket of ``rng`` that has matches."""
    coarsest = rollups.MINUTE_MS        # an hour's (a day's) sum fits one bucket only if the buckets are whole ones
    for period in rollups.PERIODS:
        if rng.bucket_ms % period == 0 and rng.start_ms % period == 0:
            coarsest = period
    source, params = q.source(rollups.MATCHES, _MATCH_COLUMNS, rng.start_ms, rng.end_ms, coarsest)
    return q.rows(
        f"""SELECT pattern, ? + (minute_ms - ?) / ? * ? AS bucket, SUM(c) FROM ({source})
            GROUP BY pattern, bucket ORDER BY pattern, bucket""",
        [rng.start_ms, rng.start_ms, rng.bucket_ms, rng.bucket_ms, *params])


def pattern_totals(q: Query, start_ms: int, end_ms: int) -> dict[str, int]:
    """Matches per pattern with match time in [start_ms, end_ms), most first."""
    source, params = q.source(rollups.MATCHES, _MATCH_COLUMNS, start_ms, end_ms)
    rows = q.rows(f"SELECT pattern, SUM(c) FROM ({source}) GROUP BY pattern ORDER BY 2 DESC, 1", params)
    return {pattern: int(count) for pattern, count in rows}


@dataclass
class PatternRow:
    pattern: str
    matches: int
    previous: int

    @property
    def change(self) -> int:
        return self.matches - self.previous

    @property
    def change_pct(self) -> float | None:
        """Change against the previous period in percent; None when the previous period had none."""
        return None if self.previous == 0 else 100.0 * self.change / self.previous


def pattern_rows(q: Query, rng: TimeRange) -> list[PatternRow]:
    """Every pattern that matched in ``rng`` or the period before it, with both counts, most matches first."""
    now = pattern_totals(q, rng.start_ms, rng.end_ms)
    before = pattern_totals(q, rng.start_ms - rng.length_ms, rng.start_ms)
    rows = [PatternRow(p, now.get(p, 0), before.get(p, 0)) for p in set(now) | set(before)]
    return sorted(rows, key=lambda r: (-r.matches, -r.previous, r.pattern))


def top_bindings(q: Query, per_variable: int = 5) -> list[tuple[str, str, str, int, int]]:
    """(pattern, variable, value, count, rank): the values bound most often, since the cloud began counting.

    The aggregate has no time dimension, so this is all time whatever range the page shows.
    """
    return q.rows("""SELECT pattern, variable, value, count, rank FROM binding_top WHERE rank <= ?
                     ORDER BY pattern, variable, rank, value""", (per_variable,))


_SIGNIFICANT = """SELECT property, SUM(c), COUNT(*) FROM (
                       SELECT property, gateway, sensor, SUM(count) AS c FROM ({source})
                       GROUP BY property, gateway, sensor)
                   GROUP BY property ORDER BY 2 DESC, 1"""
"""Per sensor first, then per property (no COUNT(DISTINCT) over concatenated strings); the sensors of a
week are read from their per-day and per-hour sums (a sensor's week is some 50 rows, not 10,080)."""


def significant_by_property(q: Query, start_ms: int, end_ms: int) -> list[tuple[str, int, int]]:
    """(observed property, significant observations, sensors) in [start_ms, end_ms), most first."""
    source, params = q.source(rollups.SIGNIFICANT, "property, gateway, sensor, count", start_ms, end_ms)
    return q.rows(_SIGNIFICANT.format(source=source), params)


@dataclass
class DelayRow:
    """End-to-end delay (match time to cloud ingest) of one event kind over a range."""

    kind: str
    count: int
    mean_ms: float
    min_ms: int
    max_ms: int
    p50_ms: int | None
    p95_ms: int | None
    p99_ms: int | None


def delay_summary(q: Query, start_ms: int, end_ms: int) -> list[DelayRow]:
    """Delay percentiles per kind over [start_ms, end_ms), from the merged histograms (per day, hour and, at
    the range's edges, minute: the same buckets and counts as merging every minute's).

    Percentiles are nearest-rank over buckets of three significant digits (at most 1 % low);
    count, mean, min and max are exact.
    """
    histograms: dict[str, list[tuple[int, int]]] = {}
    source, params = q.source(rollups.DELAY_HISTOGRAM, "kind, bucket_ms, count", start_ms, end_ms)
    for kind, bucket, count in q.rows(f"SELECT kind, bucket_ms, SUM(count) FROM ({source}) GROUP BY kind, bucket_ms",
                                      params):
        histograms.setdefault(kind, []).append((int(bucket), int(count)))
    out = []
    source, params = q.source(rollups.DELAYS, "kind, count, sum_ms, min_ms, max_ms", start_ms, end_ms)
    for kind, count, sum_ms, lo, hi in q.rows(
            f"""SELECT kind, SUM(count), SUM(sum_ms), MIN(min_ms), MAX(max_ms) FROM ({source})
                GROUP BY kind ORDER BY kind""", params):
        hist = histograms.get(kind, [])
        out.append(DelayRow(kind, int(count), sum_ms / count if count else 0.0, int(lo), int(hi),
                            percentile(hist, 0.50), percentile(hist, 0.95), percentile(hist, 0.99)))
    return out


# -- gateways --------------------------------------------------------------------------------

OFFLINE, LAGGING, NEVER_SEEN, ONLINE = "offline", "lagging", "never seen", "online"
HEALTH_ORDER = {OFFLINE: 0, LAGGING: 1, NEVER_SEEN: 2, ONLINE: 3}
"""Offline gateways first, then lagging ones: what needs an operator's attention is at the top."""


@dataclass
class GatewayRow:
    """A gateway as the registry knows it, with the dashboard's judgement of its health."""

    gateway: str
    state: str | None
    config_version: int | None
    first_seen_ms: int | None
    last_seen_ms: int | None
    status: dict[str, Any] = field(default_factory=dict)
    health: str = ONLINE
    reason: str = ""
    now_ms: int = 0

    @cached_property
    def counters(self) -> dict[str, int]:
        """The last status's counters that are integers (anything else stored is left out); read once per row,
        as a page of 300 gateways asks for a figure of each row a few dozen times."""
        return _counters(self.status)

    @property
    def outbox(self) -> dict[str, Any]:
        value = self.status.get("outbox")
        return value if isinstance(value, dict) else {}

    def counter(self, name: str) -> int | None:
        return _int(self.counters.get(name))

    @property
    def payload_rejections(self) -> list[tuple[str, str, int]]:
        """(mapping, reason, count) of the device payloads the gateway's mappings refused, from the
        counters ``payload_rejected.<mapping>.<reason>`` (agent/intake.py), most first."""
        rows = []
        for name, value in self.counters.items():
            if name.startswith("payload_rejected.") and name.count(".") >= 2:
                mapping, reason = name[len("payload_rejected."):].rsplit(".", 1)
                rows.append((mapping, reason, value))
        return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))

    def outbox_int(self, name: str) -> int | None:
        return _int(self.outbox.get(name))

    @property
    def outbox_depth(self) -> int | None:
        return self.outbox_int("depth")

    @property
    def oldest_unsent_ms(self) -> int | None:
        """Age of the oldest event still in the outbox, now: its age in the last status plus the time since."""
        value = self.outbox_int("oldestAgeMs")
        if value is None or type(self.last_seen_ms) is not int:
            return None
        return max(0, value) + max(0, self.now_ms - self.last_seen_ms)

    @property
    def drops(self) -> int | None:
        return self.counter("dropped")

    @property
    def bytes_in(self) -> int | None:
        return self.counter("bytes_in")

    @property
    def bytes_forwarded(self) -> int | None:
        return self.counter("bytes_forwarded")

    @property
    def bytes_saved(self) -> int | None:
        """Uplink bytes the gateway did not send: what its sensors sent it minus what it forwarded."""
        if self.bytes_in is None or self.bytes_forwarded is None:
            return None
        return self.bytes_in - self.bytes_forwarded

    @property
    def saved_pct(self) -> float | None:
        if self.bytes_saved is None or not self.bytes_in:
            return None
        return 100.0 * self.bytes_saved / self.bytes_in

    @property
    def attention(self) -> bool:
        return self.health != ONLINE


def judge(row: GatewayRow, now_ms: int, offline_after_s: float, lagging_after_s: float) -> GatewayRow:
    """Set ``health`` and ``reason``: offline (reported, Last Will, or silent too long), lagging, online."""
    row.now_ms = now_ms
    silent_ms = None if row.last_seen_ms is None else now_ms - row.last_seen_ms
    if row.last_seen_ms is None or not row.status:
        row.health, row.reason = NEVER_SEEN, "no status received yet"
    elif str(row.state or "").lower() == OFFLINE:
        row.health, row.reason = OFFLINE, "reported offline (graceful stop or Last Will)"
    elif silent_ms is not None and silent_ms > offline_after_s * 1000:
        row.health, row.reason = OFFLINE, f"no status for {format_duration(silent_ms)}"
    elif (row.oldest_unsent_ms or 0) > lagging_after_s * 1000:
        row.health, row.reason = LAGGING, f"oldest unsent event {format_duration(row.oldest_unsent_ms or 0)} old"
    elif (row.outbox_int("unwritten") or 0) > 0:
        row.health, row.reason = LAGGING, f"{row.outbox_int('unwritten')} events not written to disk"
    elif row.outbox.get("landedAcks") == "older_cloud":
        row.health, row.reason = LAGGING, ("no landed acknowledgements reach it: events leave its outbox on "
                                           "the broker's PUBACK (check the broker's ACL file and ingest)")
    else:
        row.health, row.reason = ONLINE, ""
    return row


def gateway_rows(q: Query, now_ms: int, offline_after_s: float, lagging_after_s: float) -> list[GatewayRow]:
    """Every gateway (reported a status, or was pushed a config), those needing attention first."""
    rows: dict[str, GatewayRow] = {}
    for found in q.rows(
            "SELECT gateway, state, config_version, last_status, first_seen_ms, last_seen_ms FROM gateways"):
        row = _gateway_row(found)
        if row is not None:
            rows[row.gateway] = row
    for (gw,) in q.rows("SELECT DISTINCT gateway FROM config_pushes"):
        if isinstance(gw, str):
            rows.setdefault(gw, GatewayRow(gw, None, None, None, None))
    judged = [judge(r, now_ms, offline_after_s, lagging_after_s) for r in rows.values()]
    return sorted(judged, key=lambda r: (HEALTH_ORDER[r.health], r.gateway))


def gateway_row(q: Query, gateway: str, now_ms: int, offline_after_s: float,
                lagging_after_s: float) -> GatewayRow | None:
    """One gateway, or None if the registry has never heard of it."""
    found = q.rows("""SELECT gateway, state, config_version, last_status, first_seen_ms, last_seen_ms
                      FROM gateways WHERE gateway = ?""", (gateway,))
    row = _gateway_row(found[0]) if found else None
    if row is None and q.rows("SELECT 1 FROM config_pushes WHERE gateway = ? LIMIT 1", (gateway,)):
        row = GatewayRow(gateway, None, None, None, None)
    if row is None:
        return None
    return judge(row, now_ms, offline_after_s, lagging_after_s)


@dataclass
class HistoryRow:
    received_ms: int
    state: str | None
    config_version: int | None
    status: dict[str, Any]

    def counter(self, name: str) -> int | None:
        return _counters(self.status).get(name)

    def outbox(self, name: str) -> int | None:
        outbox = self.status.get("outbox")
        return _int(outbox.get(name)) if isinstance(outbox, dict) else None


def status_history(q: Query, gateway: str, limit: int = 200, before_ms: int | None = None) -> list[HistoryRow]:
    """A gateway's status messages, newest first (``before_ms`` pages further back)."""
    rows = q.rows("""SELECT received_ms, state, config_version, payload FROM status_history
                     WHERE gateway = ? AND received_ms < ? ORDER BY received_ms DESC, id DESC LIMIT ?""",
                  (gateway, before_ms if before_ms is not None else 2 ** 62, limit))
    return [HistoryRow(ms, _str(state), _int(version), _status_dict(payload)) for ms, state, version, payload in rows
            if type(ms) is int]


def config_pushes(q: Query, gateway: str, limit: int = 50) -> list[tuple]:
    """(version, status, reason, pushed_ms, resolved_ms, sha256) of a gateway's config pushes, newest first.

    A push that failed before it had a version (``push_failures``) is listed too, by its time, with
    version "–" and status failed."""
    rows = q.rows("""SELECT version, status, reason, pushed_ms, resolved_ms, sha256 FROM config_pushes
                     WHERE gateway = ? ORDER BY version DESC LIMIT ?""", (gateway, limit))
    failures = [("–", "failed", f.reason, f.failed_ms, f.failed_ms, "") for f in push_failures(q, gateway, limit)
                if f.version is None]
    if not failures:
        return rows
    merged = sorted(rows + failures, key=lambda r: -(_int(r[3]) or 0))   # newest first, by when it was pushed
    return merged[:limit]


@dataclass
class PushFailure:
    """A push that could not be made for one gateway (publisher.py records it; the others went ahead)."""

    gateway: str
    failed_ms: int
    version: int | None
    reason: str


def push_failures(q: Query, gateway: str | None = None, limit: int = 50) -> list[PushFailure]:
    """Failed pushes, newest first: one gateway's, or (``gateway`` None) each gateway's newest."""
    if gateway is None:
        rows = q.rows("""SELECT gateway, failed_ms, version, reason FROM push_failures f
                         WHERE id = (SELECT MAX(id) FROM push_failures WHERE gateway = f.gateway)""")
    else:
        rows = q.rows("""SELECT gateway, failed_ms, version, reason FROM push_failures WHERE gateway = ?
                         ORDER BY id DESC LIMIT ?""", (gateway, limit))
    return [PushFailure(gw, ms, _int(version), str(reason or "")) for gw, ms, version, reason in rows
            if isinstance(gw, str) and type(ms) is int]


LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1


def _int(value: Any) -> int | None:
    """``value`` if it is an integer within 64 bits (not a bool), else None."""
    return value if type(value) is int and LONG_MIN <= value <= LONG_MAX else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _counters(status: dict[str, Any]) -> dict[str, int]:
    value = status.get("counters")
    if not isinstance(value, dict):
        return {}
    return {str(name): count for name, count in value.items() if _int(count) is not None}


def _gateway_row(found: tuple) -> GatewayRow | None:
    """A ``gateways`` row as read, each column type-checked (None where it is not what it should be)."""
    gw, state, version, last_status, first_ms, last_ms = found
    if not isinstance(gw, str):
        return None
    return GatewayRow(gw, _str(state), _int(version), _int(first_ms), _int(last_ms), _status_dict(last_status))


def _status_dict(text: Any) -> dict[str, Any]:
    """A stored status document; {} for anything that is not a JSON object (NaN and Infinity read as null)."""
    if not text or not isinstance(text, (str, bytes)):
        return {}
    try:
        value = json.loads(text, parse_constant=lambda name: None)
    except (TypeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def format_duration(ms: int) -> str:
    """A short human duration: 45 s, 12 min, 3.5 h, 2.1 d."""
    seconds = ms / 1000
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
