"""The cloud's SQLite database: one file shared by ingest, the Spark job's sink,
push-config and the dashboard.

WAL mode lets the dashboard read while a writer commits; a generous busy timeout
lets the writers (each short transactions) take turns. Connections run in
autocommit mode and the modules that need atomicity open explicit
``BEGIN IMMEDIATE`` transactions with ``transaction()``.
"""
from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlite_utils

BUSY_TIMEOUT_S = 60.0


def open_database(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) the cloud database with WAL and a busy timeout."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    enable_wal(conn)
    conn.execute("PRAGMA synchronous=FULL")
    return sqlite_utils.Database(conn)


def enable_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, waiting out another process doing the same.

    Two processes opening a new database at once (ingest workers started
    together) race for the journal-mode change, and SQLite answers the loser
    "database is locked" at once, without the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite3.Connection]:
    """An explicit write transaction: everything inside commits together or not at all.

    Use raw SQL inside it: sqlite-utils' write helpers commit on their own.
    """
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
