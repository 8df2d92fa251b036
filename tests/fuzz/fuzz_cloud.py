"""Fuzz target: what the cloud reads from gateways and from its own disk after a crash.

The first byte picks what the rest is:

- ``S``: a status payload, ``parse_status`` (documented error ``StatusError``); a status it
  accepts is recorded in a registry database without error;
- ``A``: a config ack, ``parse_ack`` (documented error ``AckError``); an ack it accepts is
  recorded without error;
- ``L``: the content of a landing file a crashed writer left ``.inprogress``:
  ``LandingZone.recover()`` raises nothing, leaves no ``.inprogress`` file, and keeps
  exactly the complete lines (up to the last newline) in the closed file.
"""
from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from pathlib import Path

from edgewave.cloud.landing import LandingZone
from edgewave.cloud.registry import (AckError, StatusError, ensure_registry_schema, parse_ack, parse_status,
                                     record_ack, record_status)

from fuzzlib import guarded, mode_and_payload


_DIR = Path(tempfile.mkdtemp(prefix="edgewave-fuzz-cloud-"))
atexit.register(shutil.rmtree, _DIR, True)
_conn = None


def _db():
    global _conn
    if _conn is None:
        import sqlite_utils
        db = sqlite_utils.Database(memory=True)
        ensure_registry_schema(db)
        _conn = db.conn
    return _conn


def _landing(payload: bytes) -> None:
    root = _DIR / "landing"
    shutil.rmtree(root, ignore_errors=True)
    part = root / "date=2026-01-01"
    part.mkdir(parents=True)
    (part / "part-1-000001-abcdef01.jsonl.inprogress").write_bytes(payload)
    records = LandingZone(root).recover()
    assert not list(root.rglob("*.inprogress"))
    kept = payload[: payload.rfind(b"\n") + 1]
    closed = list(root.rglob("*.jsonl"))
    if kept:
        assert len(closed) == 1 and closed[0].read_bytes() == kept and records == kept.count(b"\n")
    else:
        assert closed == [] and records == 0


def _one(data: bytes) -> None:
    mode, payload = mode_and_payload(data, "SAL")
    if mode == "L":
        _landing(payload)
        return
    conn = _db()
    try:
        if mode == "S":
            status = parse_status(payload)
            record_status(conn, "gw1", status, 1)
        else:
            ack = parse_ack(payload)
            record_ack(conn, "gw1", ack, 1)
    except (StatusError, AckError):
        pass
    except sqlite3.Error as exc:  # what parse_* accepted must be storable
        raise AssertionError(f"accepted payload cannot be recorded: {exc}") from exc
    finally:
        conn.rollback()  # the database stays empty: no growth over millions of inputs


TestOneInput = guarded(_one)
