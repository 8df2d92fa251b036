"""Config store: the applied document and its predecessors, rollback, the version high-water mark."""
from __future__ import annotations

import sqlite3

import pytest

from edgewave.agent.config_store import ConfigStore


def test_current_survives_reopen_and_keep_prunes(tmp_path):
    store = ConfigStore(tmp_path / "c.db", keep=3)
    assert store.current() is None and store.high_water() is None
    for v in range(1, 6):
        store.record(v, "trig", f"doc {v}")
    store.close()
    store = ConfigStore(tmp_path / "c.db", keep=3)
    assert store.current().version == 5 and store.current().document == "doc 5"
    assert [h[1] for h in store.history()] == [5, 4, 3]
    assert store.high_water() == 5


def test_rollback_returns_to_previous_and_keeps_high_water(tmp_path):
    store = ConfigStore(tmp_path / "c.db")
    store.record(1, "trig", "one")
    store.record(2, "trig", "two")
    assert store.rollback().version == 1
    assert store.current().document == "one"
    assert store.high_water() == 2
    with pytest.raises(LookupError):
        store.rollback()
    store.record(3, "trig", "three")
    assert store.current().version == 3


def test_damaged_store_is_moved_aside_not_fatal(tmp_path, caplog):
    path = tmp_path / "c.db"
    path.write_bytes(b"this is not an sqlite file at all" * 100)
    with caplog.at_level("ERROR"):
        store = ConfigStore(path)
    assert store.current() is None
    assert store.moved_aside is not None and store.moved_aside.read_bytes().startswith(b"this is not")
    assert any("CORRUPT_FILE_MOVED_ASIDE" in r.getMessage() and "config store" in r.getMessage()
               for r in caplog.records)
    store.record(1, "trig", "doc")
    assert store.current().version == 1


def test_a_document_is_kept_with_its_reading_and_a_store_from_before_readings_gains_the_columns(tmp_path):
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path)     # a store as agents wrote it before they kept readings
    conn.execute("CREATE TABLE [applied] ([id] INTEGER PRIMARY KEY, [version] INTEGER, [format] TEXT, "
                 "[document] TEXT, [source] TEXT, [applied_ms] INTEGER, [rolled_back] INTEGER)")
    conn.execute("INSERT INTO applied VALUES (1, 1, 'trig', 'old', 'cloud', 0, 0)")
    conn.commit()
    conn.close()
    store = ConfigStore(path)
    assert (store.current().document, store.current().reading, store.current().reading_by) == ("old", "", "")
    store.record(2, "trig", "new", reading='{"a":1}', reading_by="0.1.0/1")
    store.close()
    current = ConfigStore(path).current()
    assert (current.version, current.reading, current.reading_by) == (2, '{"a":1}', "0.1.0/1")
