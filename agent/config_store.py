"""The applied config documents, on disk, so a restarted agent comes back configured.

An SQLite file keeps the document applied now and the few before
it (``keep``). The agent reads the current one before it connects anywhere, so it
matches with the last applied patterns even when the cloud is unreachable. Beside each
document, what the document reader made of it (document_reader.py, ``reading``, tagged by
the code that wrote it), so that a restart compiles the document without parsing it again:
the reader's child process costs more CPU than the rest of an agent's start, a gateway's
restart after a crash waits for it, and a reading from other code is read afresh.
``rollback()`` makes the previous document current again (used by
``edgewave-agent rollback``); the version that was rolled back away from stays the
high-water mark, so the still-retained newer document is not re-applied on the next
connect — the cloud has to push a higher version.
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from edgewave.shared import clock
from edgewave.shared.sqlite_files import open_checked


@dataclass(frozen=True)
class StoredConfig:
    id: int
    version: int
    format: str
    document: str
    source: str            # "cloud", "bootstrap" or "rollback"
    applied_ms: int
    reading: str = ""      # the document reader's answer (JSON), or "" (read it again)
    reading_by: str = ""   # which code wrote ``reading`` (document_reader.reading_tag())


class ConfigStore:
    """History of applied config documents; the newest non-rolled-back one is current."""

    def __init__(self, path: str | os.PathLike[str], keep: int = 5) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.keep = max(2, keep)

        # Plain SQL, the tables as sqlite-utils made them before: sqlite-utils (with click,
        # pluggy and dateutil) was 5 MB of a gateway's resident memory for two CREATE TABLEs.
        def prepare(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE IF NOT EXISTS [applied] ([id] INTEGER PRIMARY KEY, [version] INTEGER, "
                         "[format] TEXT, [document] TEXT, [source] TEXT, [applied_ms] INTEGER, [rolled_back] INTEGER)")
            conn.execute("CREATE TABLE IF NOT EXISTS [meta] ([name] TEXT PRIMARY KEY, [value] INTEGER)")
            columns = {row[1] for row in conn.execute("PRAGMA table_info([applied])")}
            for column in ("reading", "reading_by"):      # a store made before readings were kept
                if column not in columns:
                    conn.execute(f"ALTER TABLE [applied] ADD COLUMN [{column}] TEXT NOT NULL DEFAULT ''")

        # A damaged store is moved aside: the agent then starts from config.bootstrap (or no
        # patterns) and the cloud's retained document, rather than failing on every start.
        self._conn, self.moved_aside = open_checked(self.path, prepare, "config store")

    def close(self) -> None:
        self._conn.close()

    def current(self) -> StoredConfig | None:
        row = self._conn.execute(
            "SELECT id, version, format, document, source, applied_ms, reading, reading_by FROM applied "
            "WHERE rolled_back = 0 ORDER BY id DESC LIMIT 1").fetchone()
        return StoredConfig(*row) if row else None

    def high_water(self) -> int | None:
        """The highest version ever applied here; a new document must be above it."""
        row = self._conn.execute("SELECT value FROM meta WHERE name = 'high_water'").fetchone()
        return None if row is None else int(row[0])

    def record(self, version: int, fmt: str, document: str, source: str = "cloud", *,
               reading: str = "", reading_by: str = "") -> StoredConfig:
        """Remember a document that has just been applied, with what the reader made of it;
        prunes beyond ``keep``."""
        now = clock.now_ms()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cur = self._conn.execute(
                "INSERT INTO applied (version, format, document, source, applied_ms, rolled_back, reading, "
                "reading_by) VALUES (?, ?, ?, ?, ?, 0, ?, ?)", (version, fmt, document, source, now, reading,
                                                                reading_by))
            self._conn.execute(
                "INSERT INTO meta (name, value) VALUES ('high_water', ?) "
                "ON CONFLICT(name) DO UPDATE SET value = max(value, excluded.value)", (version,))
            self._conn.execute(
                "DELETE FROM applied WHERE id NOT IN (SELECT id FROM applied ORDER BY id DESC LIMIT ?)", (self.keep,))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return StoredConfig(int(cur.lastrowid), version, fmt, document, source, now, reading, reading_by)

    def rollback(self) -> StoredConfig:
        """Retire the current document; the one before becomes current. Raises LookupError if none."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            rows = self._conn.execute(
                "SELECT id FROM applied WHERE rolled_back = 0 ORDER BY id DESC LIMIT 2").fetchall()
            if len(rows) < 2:
                raise LookupError("no previous config to roll back to")
            self._conn.execute("UPDATE applied SET rolled_back = 1 WHERE id = ?", (rows[0][0],))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        current = self.current()
        assert current is not None
        return current

    def history(self) -> list[tuple[int, int, str, bool]]:
        """(id, version, source, rolled_back) newest first, for operators."""
        return [(r[0], r[1], r[2], bool(r[3])) for r in self._conn.execute(
            "SELECT id, version, source, rolled_back FROM applied ORDER BY id DESC")]
