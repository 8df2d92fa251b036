"""Every tier's SQLite files, opened one way.

Writers (the agent's outbox and config store, the cloud database, the live feed, the
dashboard's alarm state) get an autocommit connection in WAL mode, so readers never block
them, with a busy timeout so that short transactions from several threads or processes
take turns, and the ``synchronous`` level their durability needs: ``FULL`` where an
acknowledgement depends on the row being on disk, ``NORMAL`` where losing the last
transactions to a power cut is acceptable (WAL keeps the file consistent either way).
Readers that must never write (the dashboard, the live feed's readers) open the file
read-only by URI and ``query_only``.

Errors keep SQLite's own classes, and they mean different things to a caller:
``sqlite3.OperationalError`` is a refusal (locked, read-only, disk full, I/O error), which
goes away when the disk does; any other ``sqlite3.DatabaseError`` is damage (``file is not
a database``, a failed ``quick_check``), which does not. ``open_checked`` moves a damaged
file aside (``<name>.corrupt-<UTC timestamp>``, with its -wal/-shm companions) and starts a
fresh one, with an ERROR line naming both paths: a gateway's SD card can corrupt a file,
and the agent must keep running instead of dying on every restart.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Callable
from urllib.parse import quote

__all__ = ["SYNCHRONOUS_LEVELS", "enable_wal", "is_damage", "move_aside", "open_checked", "open_read_only",
           "open_read_write"]

log = logging.getLogger("edgewave.storage")

SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def open_read_write(path: str | os.PathLike[str], *, synchronous: str, busy_timeout_s: float,
                    page_size: int | None = None) -> sqlite3.Connection:
    """Open (creating it and its folder if needed) a database for writing, in WAL mode.

    The connection is in autocommit mode (open ``BEGIN IMMEDIATE`` transactions where
    several statements must commit together) and may be used from several threads under
    the caller's lock. ``synchronous`` is one of ``SYNCHRONOUS_LEVELS``. ``page_size``
    (a power of two, 512-65536) applies to a file created here; an existing file keeps its own.
    """
    level = synchronous.upper()
    if level not in SYNCHRONOUS_LEVELS:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, not {synchronous!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        if page_size is not None:      # before WAL mode writes the file's first page
            conn.execute(f"PRAGMA page_size={int(page_size)}")
        enable_wal(conn, busy_timeout_s)
        conn.execute(f"PRAGMA synchronous={level}")
    except BaseException:
        conn.close()
        raise
    return conn


def open_read_only(path: str | os.PathLike[str], *, busy_timeout_s: float) -> sqlite3.Connection:
    """Open an existing database read-only (``mode=ro`` URI and ``query_only``): a bug in a
    reader cannot change what the writers wrote. Raises ``sqlite3.OperationalError`` when
    the file does not exist."""
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = 1")
    except BaseException:
        conn.close()
        raise
    return conn


def enable_wal(conn: sqlite3.Connection, wait_s: float) -> None:
    """Switch to WAL, waiting up to ``wait_s`` for another process doing the same.

    Two processes opening a new database at once (ingest workers started together) race
    for the journal-mode change, and SQLite answers the loser "database is locked" at
    once, without the busy timeout.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def is_damage(error: sqlite3.Error) -> bool:
    """True when ``error`` says the file itself is damaged (moving it aside helps), False
    for a refusal (locked, permissions, read-only, disk full, I/O error: retry later)."""
    return isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError)


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


def open_checked(path: Path, prepare: Callable[[sqlite3.Connection], None], what: str, *,
                 synchronous: str = "NORMAL", busy_timeout_s: float = 10.0,
                 page_size: int | None = None) -> tuple[sqlite3.Connection, Path | None]:
    """``open_read_write``, then ``quick_check`` and ``prepare`` (schema); a damaged file is
    moved aside and a fresh one created (``what`` names it in the log line).

    Returns the connection and where a damaged file went, if one was found. A refusal is
    raised as it is: moving a file aside does not help a full disk.
    """
    moved: Path | None = None
    for attempt in (1, 2):
        conn: sqlite3.Connection | None = None
        try:
            conn = open_read_write(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s, page_size=page_size)
            result = conn.execute("PRAGMA quick_check").fetchone()
            if not result or result[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {result[0] if result else 'no result'}")
            prepare(conn)
            return conn, moved
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            if not is_damage(exc) or attempt == 2:
                raise
            moved = move_aside(path, exc, what)
    raise AssertionError("unreachable")
