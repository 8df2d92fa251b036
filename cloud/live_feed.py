"""The live feed: the most recent events ingest landed, for the dashboard to follow within a second.

The Spark job's aggregates arrive a micro-batch and a landing-file roll after an
event (seconds); an operator watching alarms wants each match as soon as the
cloud has it. Ingest sees every event first, so after each group commit (once
the events are durable in the landing zone) it appends them here too: a small
SQLite file of its own (``live_feed.path``), bounded to the newest
``live_feed.max_rows`` events. Readers follow it by ``seq``, which only grows.

The feed is a view, not a record: it is written with ``synchronous=NORMAL`` (no
fsync per commit; a power cut may lose its last rows, never the landing zone's),
a redelivered duplicate is dropped by event id, and if it cannot be written
(disk full, a locked file) ingest logs, counts and goes on: the landing zone
and the aggregates do not depend on it.

A match's evidence beyond its triples is kept as JSON, each in its own column, NULL for
events without it (significant events, agents from before the field; ``shared/events.py``):
``entailed`` (which contributing triples the gateway entailed, from what, by which schema
axioms), ``expected`` (an absence's missing triple patterns, due by the window's end) and
``derived_from`` (the ids of the rule matches whose constructed triples a chained match
used). A feed written before such a column existed gets it when a writer opens it
(``_migrate``), and ``read_feed`` reads such a file as it is until then.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from edgewave.shared.sqlite_files import open_read_only, open_read_write

COLUMNS = ("seq", "id", "gateway", "kind", "pattern", "window_start", "window_end", "emitted_at", "ingest_ms",
           "sensor", "property", "result", "bindings", "triples", "entailed", "expected", "derived_from")
ADDED_COLUMNS = {"entailed": "TEXT", "expected": "TEXT", "derived_from": "TEXT"}
"""Columns added after the first release: ``_migrate`` adds those an older feed lacks."""
EVIDENCE_COLUMNS = ("entailed", "expected", "derived_from")
"""A match's evidence beyond its triples, as JSON text; NULL where the event has none."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS recent_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    gateway TEXT NOT NULL,
    kind TEXT NOT NULL,
    pattern TEXT,
    window_start INTEGER,
    window_end INTEGER,
    emitted_at INTEGER,
    ingest_ms INTEGER NOT NULL,
    sensor TEXT,
    property TEXT,
    result TEXT,
    bindings TEXT NOT NULL,
    triples TEXT NOT NULL,
    entailed TEXT,
    expected TEXT,
    derived_from TEXT
);
"""


def _json_or_null(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


class LiveFeedWriter:
    """Ingest's side: append each committed group of events, keep only the newest ``max_rows``."""

    def __init__(self, path: str | Path, max_rows: int) -> None:
        self.path = Path(path)
        self.max_rows = max_rows
        self.conn = open_read_write(self.path, synchronous="NORMAL", busy_timeout_s=5.0)
        self.conn.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns a feed written by an older ingest lacks. In one write transaction,
        so that two ingest workers opening the same old file do not both add a column."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            present = {row[1] for row in conn.execute("PRAGMA table_info(recent_events)")}
            for name, sql_type in ADDED_COLUMNS.items():
                if name not in present:
                    conn.execute(f"ALTER TABLE recent_events ADD COLUMN {name} {sql_type}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        """Add landed events (landing records: an event plus ``ingestTime``); returns how many were new."""
        rows = [(r["id"], r["gateway"], r["kind"], r.get("pattern"), r["windowStart"], r["windowEnd"],
                 r["emittedAt"], r["ingestTime"], r.get("sensor"), r.get("property"), r.get("result"),
                 json.dumps(r.get("bindings") or [], ensure_ascii=False),
                 json.dumps(r.get("triples") or [], ensure_ascii=False),
                 _json_or_null(r.get("entailed")), _json_or_null(r.get("expected")),
                 _json_or_null(r.get("derivedFrom")))
                for r in records]
        if not rows:
            return 0
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO recent_events (id, gateway, kind, pattern, window_start, window_end, "
                "emitted_at, ingest_ms, sensor, property, result, bindings, triples, entailed, expected, derived_from) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            added = conn.total_changes - before
            newest = conn.execute("SELECT MAX(seq) FROM recent_events").fetchone()[0] or 0
            conn.execute("DELETE FROM recent_events WHERE seq <= ?", (newest - self.max_rows,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return added

    def close(self) -> None:
        self.conn.close()


def read_feed(path: str | Path, after_seq: int = 0, limit: int = 200, *, gateway: str | None = None,
              pattern: str | None = None, newest_first: bool = False) -> list[dict[str, Any]]:
    """Events after ``after_seq`` (oldest first, or the newest ``limit`` with ``newest_first``).

    Opens the file read-only: a reader never writes where ingest writes, and a
    feed that does not exist yet (ingest never ran) is simply empty.
    """
    path = Path(path)
    if not path.exists():
        return []
    conn = open_read_only(path, busy_timeout_s=5.0)
    try:
        where, params = ["seq > ?"], [after_seq]
        if gateway:
            where.append("gateway = ?")
            params.append(gateway)
        if pattern:
            where.append("pattern = ?")
            params.append(pattern)
        order = "DESC" if newest_first else "ASC"
        try:
            # A feed no writer has migrated yet (ingest not restarted since an upgrade) lacks
            # the newer columns: read what it has, and the rest as NULL.
            present = {row[1] for row in conn.execute("PRAGMA table_info(recent_events)")}
            selected = ", ".join(c if c in present or c not in ADDED_COLUMNS else f"NULL AS {c}" for c in COLUMNS)
            sql = (f"SELECT {selected} FROM recent_events WHERE {' AND '.join(where)} "
                   f"ORDER BY seq {order} LIMIT ?")
            rows = conn.execute(sql, (*params, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
    finally:
        conn.close()
    out = []
    for row in rows:
        item = dict(zip(COLUMNS, row))
        item["bindings"] = json.loads(item["bindings"])
        item["triples"] = json.loads(item["triples"])
        for name in EVIDENCE_COLUMNS:
            item[name] = None if item[name] is None else json.loads(item[name])
        out.append(item)
    return out
