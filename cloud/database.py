"""The cloud's SQLite database: one file shared by ingest, the Spark job's sink,
push-config and the dashboard.

WAL mode lets the dashboard read while a writer commits; a generous busy timeout
lets the writers (each short transactions) take turns. Connections run in
autocommit mode and the modules that need atomicity open explicit
``BEGIN IMMEDIATE`` transactions with ``transaction()``.
"""
from __future__ import annotations

import sqlite3
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
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return sqlite_utils.Database(conn)


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
