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
"""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

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

_PER_MINUTE = """SELECT minute_ms, pattern, SUM(count) AS c FROM matches_per_minute
                  WHERE minute_ms >= ? AND minute_ms < ? GROUP BY minute_ms, pattern"""
"""Matches per minute and pattern over the gateways first: grouped in the order of the minute_ms index
(no sort of every row), it leaves a minute row per pattern for the outer query to bucket or total
(a week for 300 gateways: 60 ms instead of 270 ms)."""


def match_series(q: Query, rng: TimeRange) -> list[tuple[str, int, int]]:
    """(pattern, bucket_start_ms, matches) for every bucket of ``rng`` that has matches."""
    return q.rows(
        f"""SELECT pattern, ? + (minute_ms - ?) / ? * ? AS bucket, SUM(c) FROM ({_PER_MINUTE})
            GROUP BY pattern, bucket ORDER BY pattern, bucket""",
        (rng.start_ms, rng.start_ms, rng.bucket_ms, rng.bucket_ms, rng.start_ms, rng.end_ms))


def pattern_totals(q: Query, start_ms: int, end_ms: int) -> dict[str, int]:
    """Matches per pattern with match time in [start_ms, end_ms), most first."""
    rows = q.rows(f"SELECT pattern, SUM(c) FROM ({_PER_MINUTE}) GROUP BY pattern ORDER BY 2 DESC, 1",
                  (start_ms, end_ms))
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


def significant_by_property(q: Query, start_ms: int, end_ms: int) -> list[tuple[str, int, int]]:
    """(observed property, significant observations, sensors) in [start_ms, end_ms), most first."""
    return q.rows("""SELECT property, SUM(count), COUNT(DISTINCT gateway || ' ' || sensor)
                     FROM significant_per_minute WHERE minute_ms >= ? AND minute_ms < ?
                     GROUP BY property ORDER BY 2 DESC, 1""", (start_ms, end_ms))


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
    """Delay percentiles per kind over [start_ms, end_ms), from the merged per-minute histograms.

    Percentiles are nearest-rank over buckets of three significant digits (at most 1 % low);
    count, mean, min and max are exact.
    """
    histograms: dict[str, list[tuple[int, int]]] = {}
    for kind, bucket, count in q.rows(
            """SELECT kind, bucket_ms, SUM(count) FROM delay_histogram WHERE minute_ms >= ? AND minute_ms < ?
               GROUP BY kind, bucket_ms""", (start_ms, end_ms)):
        histograms.setdefault(kind, []).append((int(bucket), int(count)))
    out = []
    for kind, count, sum_ms, lo, hi in q.rows(
            """SELECT kind, SUM(count), SUM(sum_ms), MIN(min_ms), MAX(max_ms) FROM delay_per_minute
               WHERE minute_ms >= ? AND minute_ms < ? GROUP BY kind ORDER BY kind""", (start_ms, end_ms)):
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

    @property
    def counters(self) -> dict[str, Any]:
        value = self.status.get("counters")
        return value if isinstance(value, dict) else {}

    @property
    def outbox(self) -> dict[str, Any]:
        value = self.status.get("outbox")
        return value if isinstance(value, dict) else {}

    def counter(self, name: str) -> int | None:
        value = self.counters.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def outbox_depth(self) -> int | None:
        value = self.outbox.get("depth")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def oldest_unsent_ms(self) -> int | None:
        """Age of the oldest event still in the outbox, now: its age in the last status plus the time since."""
        value = self.outbox.get("oldestAgeMs")
        if not isinstance(value, int) or isinstance(value, bool) or self.last_seen_ms is None:
            return None
        return value + max(0, self.now_ms - self.last_seen_ms)

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
    elif (row.state or "").lower() == OFFLINE:
        row.health, row.reason = OFFLINE, "reported offline (graceful stop or Last Will)"
    elif silent_ms is not None and silent_ms > offline_after_s * 1000:
        row.health, row.reason = OFFLINE, f"no status for {format_duration(silent_ms)}"
    elif (row.oldest_unsent_ms or 0) > lagging_after_s * 1000:
        row.health, row.reason = LAGGING, f"oldest unsent event {format_duration(row.oldest_unsent_ms or 0)} old"
    elif (row.outbox.get("unwritten") or 0) > 0:
        row.health, row.reason = LAGGING, f"{row.outbox['unwritten']} events not written to disk"
    elif row.outbox.get("landedAcks") == "older_cloud":
        row.health, row.reason = LAGGING, ("no landed acknowledgements reach it: events leave its outbox on "
                                           "the broker's PUBACK (check the broker's ACL file and ingest)")
    else:
        row.health, row.reason = ONLINE, ""
    return row


def gateway_rows(q: Query, now_ms: int, offline_after_s: float, lagging_after_s: float) -> list[GatewayRow]:
    """Every gateway (reported a status, or was pushed a config), those needing attention first."""
    rows: dict[str, GatewayRow] = {}
    for gw, state, version, last_status, first_ms, last_ms in q.rows(
            "SELECT gateway, state, config_version, last_status, first_seen_ms, last_seen_ms FROM gateways"):
        rows[gw] = GatewayRow(gw, state, version, first_ms, last_ms, _status_dict(last_status))
    for (gw,) in q.rows("SELECT DISTINCT gateway FROM config_pushes"):
        rows.setdefault(gw, GatewayRow(gw, None, None, None, None))
    judged = [judge(r, now_ms, offline_after_s, lagging_after_s) for r in rows.values()]
    return sorted(judged, key=lambda r: (HEALTH_ORDER[r.health], r.gateway))


def gateway_row(q: Query, gateway: str, now_ms: int, offline_after_s: float,
                lagging_after_s: float) -> GatewayRow | None:
    """One gateway, or None if the registry has never heard of it."""
    found = q.rows("""SELECT gateway, state, config_version, last_status, first_seen_ms, last_seen_ms
                      FROM gateways WHERE gateway = ?""", (gateway,))
    if found:
        gw, state, version, last_status, first_ms, last_ms = found[0]
        row = GatewayRow(gw, state, version, first_ms, last_ms, _status_dict(last_status))
    elif q.rows("SELECT 1 FROM config_pushes WHERE gateway = ? LIMIT 1", (gateway,)):
        row = GatewayRow(gateway, None, None, None, None)
    else:
        return None
    return judge(row, now_ms, offline_after_s, lagging_after_s)


@dataclass
class HistoryRow:
    received_ms: int
    state: str | None
    config_version: int | None
    status: dict[str, Any]

    def counter(self, name: str) -> Any:
        counters = self.status.get("counters")
        return counters.get(name) if isinstance(counters, dict) else None

    def outbox(self, name: str) -> Any:
        outbox = self.status.get("outbox")
        return outbox.get(name) if isinstance(outbox, dict) else None


def status_history(q: Query, gateway: str, limit: int = 200, before_ms: int | None = None) -> list[HistoryRow]:
    """A gateway's status messages, newest first (``before_ms`` pages further back)."""
    rows = q.rows("""SELECT received_ms, state, config_version, payload FROM status_history
                     WHERE gateway = ? AND received_ms < ? ORDER BY received_ms DESC, id DESC LIMIT ?""",
                  (gateway, before_ms if before_ms is not None else 2 ** 62, limit))
    return [HistoryRow(int(ms), state, version, _status_dict(payload)) for ms, state, version, payload in rows]


def config_pushes(q: Query, gateway: str, limit: int = 50) -> list[tuple]:
    """(version, status, reason, pushed_ms, resolved_ms, sha256) of a gateway's config pushes, newest first."""
    return q.rows("""SELECT version, status, reason, pushed_ms, resolved_ms, sha256 FROM config_pushes
                     WHERE gateway = ? ORDER BY version DESC LIMIT ?""", (gateway, limit))


def _status_dict(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
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
