"""The one SQLite opener of every tier: writers in WAL mode, read-only readers, damaged files moved aside."""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from edgewave.shared.sqlite_files import is_damage, open_checked, open_read_only, open_read_write


def test_writer_is_wal_autocommit_with_the_durability_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "w.db"
    conn = open_read_write(path, synchronous="full", busy_timeout_s=1.5)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2          # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1500
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")                              # autocommit: visible at once
    assert sqlite3.connect(path).execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()
    normal = open_read_write(path, synchronous="NORMAL", busy_timeout_s=1)
    assert normal.execute("PRAGMA synchronous").fetchone()[0] == 1
    normal.close()


def test_an_unknown_synchronous_level_is_refused_before_anything_is_opened(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        open_read_write(tmp_path / "x.db", synchronous="FULL; DROP TABLE t", busy_timeout_s=1)
    assert not (tmp_path / "x.db").exists()


def test_reader_cannot_write_and_a_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd name #?%.db"          # URI characters in the name are quoted
    writer = open_read_write(path, synchronous="NORMAL", busy_timeout_s=1)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("INSERT INTO t VALUES (7)")
    reader = open_read_only(path, busy_timeout_s=1)
    assert reader.execute("SELECT x FROM t").fetchall() == [(7,)]
    with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only|attempt to write"):
        reader.execute("INSERT INTO t VALUES (8)")
    reader.close()
    writer.close()
    with pytest.raises(sqlite3.OperationalError):
        open_read_only(tmp_path / "absent.db", busy_timeout_s=1)
    assert not (tmp_path / "absent.db").exists()


def test_damage_and_refusal_are_told_apart() -> None:
    assert is_damage(sqlite3.DatabaseError("file is not a database"))
    assert not is_damage(sqlite3.OperationalError("database or disk is full"))
    assert not is_damage(sqlite3.OperationalError("database is locked"))


def test_open_checked_moves_a_damaged_file_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"not a database " * 200)
    prepared: list[sqlite3.Connection] = []
    with caplog.at_level(logging.ERROR):
        conn, moved = open_checked(path, prepared.append, "test store", synchronous="FULL")
    assert moved is not None and moved.read_bytes().startswith(b"not a database")
    assert prepared == [conn]
    assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert any("CORRUPT_FILE_MOVED_ASIDE" in r.getMessage() and "test store" in r.getMessage()
               for r in caplog.records)
    conn.close()
    again, moved_again = open_checked(path, lambda c: None, "test store")
    assert moved_again is None
    again.close()


def test_open_checked_raises_a_refusal_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_read_write(path, synchronous="NORMAL", busy_timeout_s=1).close()

    def refuse(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError, match="full"):
        open_checked(path, refuse, "test store")
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))
