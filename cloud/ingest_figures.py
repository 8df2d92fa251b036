"""What each ingest worker has done since it started, in the cloud database for the dashboard.

Ingest workers are processes of their own; the dashboard's ``/metrics`` (and any operator
with ``sqlite3``) reads their figures from the table ``ingest_workers``, one row a worker:
its counters since it started (events landed, batches, statuses, acks, landed
acknowledgements, group commits, live-feed write errors), the messages it rejected by
reason, and the time its group commits took. A worker writes its row at most every
``WRITE_INTERVAL_S`` seconds, after a group commit, and when it stops; a restarted worker
starts again from zero (Prometheus counters allow that), with a new ``started_ms``.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

WRITE_INTERVAL_S = 5.0

# Why ingest rejected a message (the ``reason`` label; the full text is in the rejected files).
OVERSIZED = "oversized"              # larger than ingest reads
CRASH_SUSPECT = "crash_suspect"      # in flight at two deaths of ingest: not decoded again
INVALID_EVENT = "invalid_event"      # an event (alone, or one of a batch) or a batch that fails its checks
INVALID_STATUS = "invalid_status"
INVALID_ACK = "invalid_ack"
INVALID_TOPIC = "invalid_topic"
UNEXPECTED = "unexpected_error"      # a decoder failed in a way nobody foresaw
REJECT_REASONS = (OVERSIZED, CRASH_SUSPECT, INVALID_EVENT, INVALID_STATUS, INVALID_ACK, INVALID_TOPIC, UNEXPECTED)

SCHEMA = """
CREATE TABLE IF NOT EXISTS ingest_workers (
    worker INTEGER PRIMARY KEY,
    client_id TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    counters TEXT NOT NULL,          -- JSON: {"events": n, "batches": n, ...}
    rejected TEXT NOT NULL,          -- JSON: {reason: n}
    commit_seconds REAL NOT NULL     -- the group commits' durations, summed
);
"""


@dataclass
class WorkerFigures:
    """One worker's row."""

    worker: int
    client_id: str
    started_ms: int
    updated_ms: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    commit_seconds: float = 0.0


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


def write(conn: sqlite3.Connection, figures: WorkerFigures) -> None:
    """Replace the worker's row (in its own statement: autocommit or the caller's transaction)."""
    conn.execute("INSERT OR REPLACE INTO ingest_workers (worker, client_id, started_ms, updated_ms, counters, "
                 "rejected, commit_seconds) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (figures.worker, figures.client_id, figures.started_ms, figures.updated_ms,
                  json.dumps(figures.counters, sort_keys=True), json.dumps(figures.rejected, sort_keys=True),
                  figures.commit_seconds))


def read_all(rows: list[tuple[Any, ...]]) -> list[WorkerFigures]:
    """Rows of ``SELECT worker, client_id, started_ms, updated_ms, counters, rejected, commit_seconds``,
    as figures; a row whose JSON is damaged counts as empty rather than failing the reader."""
    out = []
    for worker, client_id, started_ms, updated_ms, counters, rejected, commit_seconds in rows:
        out.append(WorkerFigures(int(worker), str(client_id), int(started_ms), int(updated_ms),
                                 _counts(counters), _counts(rejected), float(commit_seconds or 0.0)))
    return out


READ_SQL = ("SELECT worker, client_id, started_ms, updated_ms, counters, rejected, commit_seconds "
            "FROM ingest_workers ORDER BY worker")


def _counts(text: Any) -> dict[str, int]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if type(v) is int}
