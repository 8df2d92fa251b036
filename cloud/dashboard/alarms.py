"""Alarms: live matches folded into a lifecycle an operator works through (active, acknowledged, cleared).

A pattern that flaps must not flood the list, so there is at most one *open*
alarm (active or acknowledged) per gateway, pattern and binding key: a match
whose key has an open alarm adds to it (count, last seen, its evidence); only
after an operator clears it does the next match open a new one. The binding key
is the values of the pattern's key variables (``dashboard.alarm_keys``; by default
the first variable the pattern selects, e.g. ``?room``).

The state lives in the dashboard's own SQLite file (``dashboard.state_db``,
default ``dashboard.db`` beside the database), never in a file ingest or the
Spark job writes. It is built from ingest's live feed by the follower
(``follower.py``), which stores the feed's last seq here in the same transaction
as the alarms it changed, so a restarted dashboard goes on where it stopped.
Each alarm keeps the evidence of its newest ``EVIDENCE_PER_ALARM`` matches (the
feed itself keeps only its newest rows).

Every change bumps ``rev``; the alarm page's stream sends the alarms changed
since the revision it last saw.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from edgewave.shared import clock
from edgewave.shared.sqlite_files import open_read_write

log = logging.getLogger("edgewave.cloud.dashboard.alarms")

ACTIVE, ACKNOWLEDGED, CLEARED = "active", "acknowledged", "cleared"
STATES = (ACTIVE, ACKNOWLEDGED, CLEARED)
EVIDENCE_PER_ALARM = 50
MAX_COMMENT_CHARS = 1000

SCHEMA = """
CREATE TABLE IF NOT EXISTS follower (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS alarms (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    gateway TEXT NOT NULL,
    pattern TEXT NOT NULL,
    binding_key TEXT NOT NULL,
    state TEXT NOT NULL,
    count INTEGER NOT NULL,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    last_event TEXT NOT NULL,
    acked_by TEXT,
    acked_ms INTEGER,
    ack_comment TEXT,
    cleared_by TEXT,
    cleared_ms INTEGER,
    rev INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS alarms_one_open ON alarms (gateway, pattern, binding_key) WHERE state != 'cleared';
CREATE INDEX IF NOT EXISTS alarms_by_last_seen ON alarms (last_seen_ms);
CREATE INDEX IF NOT EXISTS alarms_by_rev ON alarms (rev);
CREATE TABLE IF NOT EXISTS alarm_matches (
    event_id TEXT PRIMARY KEY,
    alarm_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    item TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS alarm_matches_by_alarm ON alarm_matches (alarm_id, seq);
"""

COLUMNS = ("id", "gateway", "pattern", "binding_key", "state", "count", "first_seen_ms", "last_seen_ms",
           "last_event", "acked_by", "acked_ms", "ack_comment", "cleared_by", "cleared_ms", "rev")


@dataclass
class Alarm:
    id: int
    gateway: str
    pattern: str
    binding_key: str
    state: str
    count: int
    first_seen_ms: int
    last_seen_ms: int
    last_event: str
    acked_by: str | None
    acked_ms: int | None
    ack_comment: str | None
    cleared_by: str | None
    cleared_ms: int | None
    rev: int

    @property
    def key(self) -> list[tuple[str, str | None]]:
        """The key variables and their values, e.g. [("room", "<...#room3>")]."""
        return [(variable, value) for variable, value in json.loads(self.binding_key)]

    @property
    def is_open(self) -> bool:
        return self.state != CLEARED

    def as_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in COLUMNS}
        out["key"] = [{"variable": v, "value": value} for v, value in self.key]
        return out


class AlarmError(ValueError):
    """An acknowledgement or clear that cannot be done (unknown alarm, wrong state, bad comment)."""


def binding_key(bindings: Iterable[dict[str, Any]], key_variables: list[str] | None) -> str:
    """The alarm key of a match: its values of ``key_variables`` (None: the first binding) as canonical JSON."""
    pairs = [(str(b.get("variable")), b.get("value")) for b in bindings]
    if key_variables is None:
        chosen = pairs[:1]
    else:
        values = dict(pairs)
        chosen = [(variable, values.get(variable)) for variable in key_variables]
    return json.dumps(chosen, ensure_ascii=False, separators=(",", ":"))


def match_time(item: dict[str, Any]) -> int:
    """When a match happened: its window end (the gateway's match time), else when the cloud landed it."""
    value = item.get("window_end")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else int(item["ingest_ms"])


class AlarmStore:
    """The dashboard's alarm state (one connection, serialised by a lock: the follower and requests share it)."""

    def __init__(self, path: str | Path, alarm_keys: dict[str, list[str]] | None = None,
                 on_open: Callable[[sqlite3.Connection, int], None] | None = None) -> None:
        """``on_open(conn, alarm_id)`` is called for each alarm opened, inside the transaction that opens it
        (the notifications queue theirs there, so an alarm and its notifications commit together)."""
        self.path = Path(path)
        self.alarm_keys = dict(alarm_keys or {})
        self.on_open = on_open
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.conn = open_read_write(self.path, synchronous="NORMAL", busy_timeout_s=10.0)
        self.conn.executescript(SCHEMA)
        self.rev = self._rev()

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    # -- writes -------------------------------------------------------------------------------

    def _rev(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'rev'").fetchone()
        return int(row[0]) if row else 0

    def _bump(self) -> int:
        rev = self._rev() + 1
        self.conn.execute("INSERT INTO meta (key, value) VALUES ('rev', ?) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (rev,))
        return rev

    def last_seq(self) -> int:
        """The live feed's last seq the alarms were built from (0 before the first)."""
        with self._lock:
            row = self.conn.execute("SELECT last_seq FROM follower WHERE id = 1").fetchone()
        return int(row[0]) if row else 0

    def apply(self, items: list[dict[str, Any]], last_seq: int) -> list[int]:
        """Fold live-feed rows (seq order) into alarms and remember ``last_seq``, in one transaction.

        Returns the ids of the alarms that changed. A match already folded in (the
        feed started over and delivered it again) is skipped by its event id.
        """
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                changed: dict[int, None] = {}
                rev = None
                for item in items:
                    if item.get("kind") != "match" or not item.get("pattern"):
                        continue
                    if conn.execute("SELECT 1 FROM alarm_matches WHERE event_id = ?", (item["id"],)).fetchone():
                        continue
                    rev = rev or self._bump()
                    alarm_id = self._fold(item, rev)
                    changed[alarm_id] = None
                conn.execute("INSERT INTO follower (id, last_seq, updated_ms) VALUES (1, ?, ?) ON CONFLICT (id) "
                             "DO UPDATE SET last_seq = excluded.last_seq, updated_ms = excluded.updated_ms",
                             (last_seq, clock.now_ms()))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if rev is not None:
                self.rev = rev
            return list(changed)

    def _fold(self, item: dict[str, Any], rev: int) -> int:
        conn = self.conn
        gateway, pattern = item["gateway"], item["pattern"]
        key = binding_key(item.get("bindings") or [], self.alarm_keys.get(pattern))
        seen = match_time(item)
        row = conn.execute("SELECT id, count FROM alarms WHERE gateway = ? AND pattern = ? AND binding_key = ? "
                           "AND state != ?", (gateway, pattern, key, CLEARED)).fetchone()
        if row is None:
            alarm_id = conn.execute(
                "INSERT INTO alarms (gateway, pattern, binding_key, state, count, first_seen_ms, last_seen_ms, "
                "last_event, rev) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (gateway, pattern, key, ACTIVE, seen, seen, item["id"], rev)).lastrowid
            log.info("alarm opened id=%d gateway=%s pattern=%s key=%s", alarm_id, gateway, pattern, key)
            count = 1
        else:
            alarm_id, count = int(row[0]), int(row[1]) + 1
            conn.execute("UPDATE alarms SET count = ?, last_seen_ms = MAX(last_seen_ms, ?), "
                         "first_seen_ms = MIN(first_seen_ms, ?), last_event = ?, rev = ? WHERE id = ?",
                         (count, seen, seen, item["id"], rev, alarm_id))
        conn.execute("INSERT INTO alarm_matches (event_id, alarm_id, seq, item) VALUES (?, ?, ?, ?)",
                     (item["id"], alarm_id, int(item["seq"]), json.dumps(item, ensure_ascii=False)))
        if count > EVIDENCE_PER_ALARM:
            conn.execute("DELETE FROM alarm_matches WHERE alarm_id = ? AND seq < (SELECT seq FROM alarm_matches "
                         "WHERE alarm_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                         (alarm_id, alarm_id, EVIDENCE_PER_ALARM - 1))
        if count == 1 and self.on_open is not None:
            self._opened(alarm_id)
        return alarm_id

    def _opened(self, alarm_id: int) -> None:
        """Run ``on_open`` in a savepoint: if it fails, the alarm still opens (and the failure is logged),
        since an alarm on the page matters more than a message about it."""
        conn = self.conn
        conn.execute("SAVEPOINT on_open")
        try:
            assert self.on_open is not None
            self.on_open(conn, alarm_id)
        except Exception as exc:
            conn.execute("ROLLBACK TO on_open")
            log.error("alarm on_open failed id=%d error=%r", alarm_id, str(exc))
        conn.execute("RELEASE on_open")

    def acknowledge(self, alarm_id: int, user: str, comment: str) -> Alarm:
        """An operator has seen an active alarm; the comment says what they are doing about it."""
        comment = (comment or "").strip()
        if not comment:
            raise AlarmError("say what is being done about it: the comment is empty")
        if len(comment) > MAX_COMMENT_CHARS:
            raise AlarmError(f"the comment is longer than {MAX_COMMENT_CHARS} characters")
        return self._change(alarm_id, (ACTIVE,), "state = ?, acked_by = ?, acked_ms = ?, ack_comment = ?",
                            (ACKNOWLEDGED, user, clock.now_ms(), comment), "acknowledged")

    def clear(self, alarm_id: int, user: str) -> Alarm:
        """Close an open alarm: the next match of its key opens a new one."""
        return self._change(alarm_id, (ACTIVE, ACKNOWLEDGED), "state = ?, cleared_by = ?, cleared_ms = ?",
                            (CLEARED, user, clock.now_ms()), "cleared")

    def _change(self, alarm_id: int, from_states: tuple[str, ...], assignments: str, values: tuple,
                verb: str) -> Alarm:
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT state FROM alarms WHERE id = ?", (alarm_id,)).fetchone()
                if row is None:
                    raise AlarmError(f"no alarm {alarm_id}")
                if row[0] not in from_states:
                    raise AlarmError(f"alarm {alarm_id} is {row[0]}: it cannot be {verb}")
                rev = self._bump()
                conn.execute(f"UPDATE alarms SET {assignments}, rev = ? WHERE id = ?", (*values, rev, alarm_id))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            self.rev = rev
        alarm = self.get(alarm_id)
        assert alarm is not None
        return alarm

    # -- reads --------------------------------------------------------------------------------

    def _alarms(self, where: str, params: tuple, order: str = "last_seen_ms DESC, id DESC",
                limit: int = 200) -> list[Alarm]:
        sql = f"SELECT {', '.join(COLUMNS)} FROM alarms {where} ORDER BY {order} LIMIT ?"
        with self._lock:
            rows = self.conn.execute(sql, (*params, limit)).fetchall()
        return [Alarm(*row) for row in rows]

    def get(self, alarm_id: int) -> Alarm | None:
        found = self._alarms("WHERE id = ?", (alarm_id,), limit=1)
        return found[0] if found else None

    def list(self, *, gateway: str | None = None, pattern: str | None = None, since_ms: int | None = None,
             until_ms: int | None = None, states: tuple[str, ...] = STATES, after_rev: int | None = None,
             limit: int = 200) -> list[Alarm]:
        """Alarms newest first (by last match), filtered; ``after_rev``: only those changed since that revision."""
        where, params = [f"state IN ({', '.join('?' * len(states))})"], list(states)
        for clause, value in (("gateway = ?", gateway), ("pattern = ?", pattern), ("last_seen_ms >= ?", since_ms),
                              ("first_seen_ms < ?", until_ms), ("rev > ?", after_rev)):
            if value is not None:
                where.append(clause)
                params.append(value)
        return self._alarms("WHERE " + " AND ".join(where), tuple(params), limit=limit)

    def evidence(self, alarm_id: int, limit: int = EVIDENCE_PER_ALARM) -> list[dict[str, Any]]:
        """The live-feed rows of an alarm's newest matches, newest first."""
        with self._lock:
            rows = self.conn.execute("SELECT item FROM alarm_matches WHERE alarm_id = ? ORDER BY seq DESC LIMIT ?",
                                     (alarm_id, limit)).fetchall()
        return [json.loads(item) for (item,) in rows]

    def match(self, event_id: str) -> tuple[int, dict[str, Any]] | None:
        """(alarm id, the live-feed row) of one match, if it is still kept."""
        with self._lock:
            row = self.conn.execute("SELECT alarm_id, item FROM alarm_matches WHERE event_id = ?",
                                    (event_id,)).fetchone()
        return None if row is None else (int(row[0]), json.loads(row[1]))

    def choices(self) -> tuple[list[str], list[str]]:
        """The gateways and patterns that have alarms, for the filters."""
        with self._lock:
            gateways = [g for (g,) in self.conn.execute("SELECT DISTINCT gateway FROM alarms ORDER BY 1")]
            patterns = [p for (p,) in self.conn.execute("SELECT DISTINCT pattern FROM alarms ORDER BY 1")]
        return gateways, patterns

    def count_by_state(self) -> dict[str, int]:
        """How many alarms are in each state (for /metrics)."""
        with self._lock:
            return {state: int(n) for state, n in self.conn.execute("SELECT state, COUNT(*) FROM alarms GROUP BY 1")}
