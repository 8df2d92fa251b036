"""The cloud's SQLite database: one file shared by ingest, the Spark job's sink,
push-config and the dashboard.

Opened by ``edgewave.shared.sqlite_files`` (WAL, so the dashboard reads while a
writer commits) with a generous busy timeout that lets the writers (each short
transactions) take turns, and ``synchronous=FULL``: ingest acknowledges what it
recorded. Connections run in autocommit mode and the modules that need atomicity
open explicit ``BEGIN IMMEDIATE`` transactions with ``transaction()``.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlite_utils

from edgewave.shared.sqlite_files import open_read_write

BUSY_TIMEOUT_S = 60.0


def open_database(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) the cloud database with WAL and a busy timeout."""
    return sqlite_utils.Database(open_read_write(path, synchronous="FULL", busy_timeout_s=BUSY_TIMEOUT_S))


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
