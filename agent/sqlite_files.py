"""The agent's SQLite files (outbox, config store): opened in WAL mode, never a crash loop.

A gateway's SD card can corrupt a file. If SQLite cannot read one, it is renamed
``<name>.corrupt-<UTC timestamp>`` (with its -wal/-shm companions), a fresh file is
created, and an ERROR line says so with both paths: the operator can inspect the old
file, and the agent keeps running instead of dying on every restart.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("edgewave.agent.storage")


def move_aside(path: Path, error: Exception, what: str) -> Path:
    """Rename a damaged database (and its WAL files) out of the way; returns the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    if path.exists():
        os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists():
            os.replace(side, Path(str(target) + suffix))
    log.error("storage event=CORRUPT_FILE_MOVED_ASIDE file=%s path=%s moved_to=%s error=%r "
              "action='created an empty %s; the old file is kept for inspection'",
              what, path, target, str(error), what)
    return target


def open_database(path: Path, prepare: Callable[[sqlite3.Connection], None], what: str,
                  synchronous: str = "NORMAL") -> tuple[sqlite3.Connection, Path | None]:
    """Open (or create) ``path`` in WAL mode and run ``prepare`` on it; a damaged file is moved aside.

    Returns the connection (autocommit, usable from several threads under the caller's
    lock) and where a damaged file went, if one was found.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    moved: Path | None = None
    for attempt in (1, 2):
        conn = sqlite3.connect(str(path), timeout=10, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            result = conn.execute("PRAGMA quick_check").fetchone()
            if not result or result[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {result[0] if result else 'no result'}")
            prepare(conn)
            return conn, moved
        except sqlite3.OperationalError:
            conn.close()
            raise              # not damage (locked, permissions, disk full): moving it aside would not help
        except sqlite3.DatabaseError as exc:
            conn.close()
            if attempt == 2:
                raise
            moved = move_aside(path, exc, what)
    raise AssertionError("unreachable")
