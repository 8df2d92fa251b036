"""The gateway registry in the cloud database: each gateway's current state and history.

Ingest records every status message (current state in ``gateways``, every
change in ``status_history``) and every config ack (``config_acks``).
push-config records every push (``config_pushes``, one row per gateway and
version) and resolves it when the gateway's ack arrives; ingest resolves it too,
so a push that timed out is marked applied when a late ack comes in.

Tables (the dashboard reads them; columns documented in docs/cloud.md):

- ``gateways(gateway, state, config_version, last_status, first_seen_ms, last_seen_ms)``
- ``status_history(id, gateway, received_ms, state, config_version, payload)``
- ``config_pushes(gateway, version, format, sha256, document, pushed_ms, status, reason, resolved_ms)``
- ``config_acks(gateway, version, status, reason, received_ms)``
- ``push_failures(id, gateway, failed_ms, version, reason)``: a push that could not be made for one
  gateway (no version to give it, no key, the publish failed); the others went ahead

Everything a gateway sends is checked where it enters: a status document against the
status schema (``check_status``: types, ranges, sizes; a bad one raises StatusError and
ingest quarantines it), an ack by ``parse_ack``. A version a gateway reports raises the
next pushed version only up to ``MAX_REPORTED_VERSION``, and an applied ack only for a
version this cloud pushed to it, so no gateway can make a push overflow SQLite's integer.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import sqlite_utils

from edgewave.shared.bounded_json import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, PayloadError, load_json
from edgewave.shared.events import LONG_MAX, LONG_MIN

from .database import transaction

PUSH_PENDING = "pending"
PUSH_APPLIED = "applied"
PUSH_REJECTED = "rejected"
PUSH_TIMEOUT = "timeout"
PUSH_FAILED = "failed"      # not published (or not acknowledged by the broker); the reason says why

MAX_PUSHED_VERSION = LONG_MAX
"""The highest version a push can have: SQLite's INTEGER, and the agent's envelope check."""
MAX_REPORTED_VERSION = 2 ** 53 - 1
"""The highest config version a gateway may report (status) and the cloud counts when it numbers
the next push: far below MAX_PUSHED_VERSION, so whatever a gateway reports, its next version fits;
and exact as a JavaScript number, so the dashboard's JSON shows it as stored."""


def ensure_registry_schema(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS gateways (
            gateway TEXT PRIMARY KEY,
            state TEXT,
            config_version INTEGER,
            last_status TEXT,
            first_seen_ms INTEGER,
            last_seen_ms INTEGER
        );
        CREATE TABLE IF NOT EXISTS status_history (
            id INTEGER PRIMARY KEY,
            gateway TEXT NOT NULL,
            received_ms INTEGER NOT NULL,
            state TEXT,
            config_version INTEGER,
            payload TEXT
        );
        CREATE INDEX IF NOT EXISTS status_history_gateway ON status_history (gateway, received_ms);
        CREATE TABLE IF NOT EXISTS config_pushes (
            gateway TEXT NOT NULL,
            version INTEGER NOT NULL,
            format TEXT,
            sha256 TEXT,
            document TEXT,
            pushed_ms INTEGER,
            status TEXT NOT NULL,
            reason TEXT,
            resolved_ms INTEGER,
            PRIMARY KEY (gateway, version)
        );
        CREATE TABLE IF NOT EXISTS push_failures (
            id INTEGER PRIMARY KEY,
            gateway TEXT NOT NULL,
            failed_ms INTEGER NOT NULL,
            version INTEGER,
            reason TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS push_failures_gateway ON push_failures (gateway, failed_ms);
        CREATE TABLE IF NOT EXISTS config_acks (
            gateway TEXT NOT NULL,
            version INTEGER NOT NULL,
            status TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            received_ms INTEGER,
            PRIMARY KEY (gateway, version, status, reason)
        );
        """
    )


def _first(payload: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in payload and payload[name] is not None:
            return payload[name]
    return None


MAX_BARE_STATE_CHARS = 200


class StatusError(ValueError):
    """A status payload that cannot be recorded (beyond the limits, broken JSON, or not the status schema)."""


# -- the status schema ------------------------------------------------------------------------
#
# What an agent sends (agent/status.py ``status_document`` and ``StatusReporter.document``):
# gateway, state, configVersion, time, startedAt, pid, counters {name: int}, outbox {depth,
# bytes, oldestAgeMs, dropped, droppedFull, droppedExpired, refused, unwritten, unwrittenBytes,
# acksHeld, grouped, unlanded, oldestUnlandedAgeMs, landedAcks}, warnings [text], configKey {keyId,
# nextKeyId, switched, overlapUntil}. Older agents leave fields out (every field is optional);
# newer ones may add counters, outbox fields and configKey fields (kept when they are plain
# values). Top-level fields the schema does not know are not kept.

MAX_ID_CHARS = 128
MAX_NAME_CHARS = 64
MAX_TEXT_CHARS = 200
MAX_COUNTERS = 512
MAX_OUTBOX_FIELDS = 64
MAX_KEY_FIELDS = 16
MAX_WARNINGS = 16
MAX_WARNING_CHARS = 1000
LANDED_ACKS_CHARS = 32
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,%d}\Z" % MAX_NAME_CHARS)

_OUTBOX_INTS = ("depth", "bytes", "oldestAgeMs", "dropped", "droppedFull", "droppedExpired", "refused",
                "unwritten", "unwrittenBytes", "acksHeld", "grouped", "unlanded", "oldestUnlandedAgeMs")
_VERSION_FIELDS = ("configVersion", "config_version", "version")


def _shown(value: Any) -> str:
    """A short description of a value for a reason (never the whole of a large one)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} fields"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, str):
        return f"the text {value[:40]!r}" + (f" ({len(value)} characters)" if len(value) > 40 else "")
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}" + ("..." if len(text) > 40 else "")


def _integer(where: str, value: Any, low: int = LONG_MIN, high: int = LONG_MAX, *, null: bool = True) -> Any:
    if value is None and null:
        return None
    if type(value) is not int:   # a bool is not a count
        raise StatusError(f"status {where} must be an integer{' or null' if null else ''}, got {_shown(value)}")
    if not low <= value <= high:
        raise StatusError(f"status {where} {value} is outside {low}..{high}")
    return value


def _text(where: str, value: Any, limit: int, *, null: bool = True) -> Any:
    if value is None and null:
        return None
    if not isinstance(value, str):
        raise StatusError(f"status {where} must be text{' or null' if null else ''}, got {_shown(value)}")
    if len(value) > limit:
        raise StatusError(f"status {where} has {len(value)} characters (at most {limit})")
    return value


def _object(where: str, value: Any, limit: int) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise StatusError(f"status {where} must be an object, got {_shown(value)}")
    if len(value) > limit:
        raise StatusError(f"status {where} has {len(value)} fields (at most {limit})")
    for name in value:
        if not _NAME.match(name):
            raise StatusError(f"status {where} field name {name[:40]!r} is not a name of at most "
                              f"{MAX_NAME_CHARS} letters, digits and _.:-")
    return value


def _plain(where: str, value: Any) -> Any:
    """A field the schema does not name inside a known object: a plain value, bounded."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _integer(where, value)
    if isinstance(value, str):
        return _text(where, value, MAX_TEXT_CHARS)
    raise StatusError(f"status {where} must be a number, text, true/false or null, got {_shown(value)}")


def check_status(doc: dict[str, Any]) -> dict[str, Any]:
    """The status document as the cloud keeps it, or StatusError naming the first field that breaks the
    schema (types, ranges, sizes). Top-level fields the schema does not know are left out."""
    out: dict[str, Any] = {}
    for name, value in doc.items():
        if name == "gateway":
            out[name] = _text(name, value, MAX_ID_CHARS)
        elif name in ("state", "status"):
            out[name] = _text(name, value, MAX_BARE_STATE_CHARS)
        elif name in _VERSION_FIELDS:
            out[name] = _integer(name, value, LONG_MIN, MAX_REPORTED_VERSION)
        elif name in ("time", "startedAt", "pid"):
            out[name] = _integer(name, value, 0, LONG_MAX)
        elif name == "counters":
            counters = _object(name, value, MAX_COUNTERS)
            if counters is not None:
                for counter, count in counters.items():
                    _integer(f"counters.{counter}", count, null=False)
            out[name] = counters
        elif name == "outbox":
            outbox = _object(name, value, MAX_OUTBOX_FIELDS)
            if outbox is not None:
                for field_name, field_value in outbox.items():
                    where = f"outbox.{field_name}"
                    if field_name in _OUTBOX_INTS:
                        _integer(where, field_value)
                    elif field_name == "landedAcks":
                        _text(where, field_value, LANDED_ACKS_CHARS)
                    else:
                        _plain(where, field_value)
            out[name] = outbox
        elif name == "warnings":
            if value is not None:
                if not isinstance(value, list):
                    raise StatusError(f"status warnings must be a list of text, got {_shown(value)}")
                if len(value) > MAX_WARNINGS:
                    raise StatusError(f"status warnings has {len(value)} items (at most {MAX_WARNINGS})")
                for i, warning in enumerate(value):
                    _text(f"warnings[{i}]", warning, MAX_WARNING_CHARS, null=False)
            out[name] = value
        elif name == "configKey":
            key = _object(name, value, MAX_KEY_FIELDS)
            if key is not None:
                for field_name, field_value in key.items():
                    where = f"configKey.{field_name}"
                    if field_name in ("keyId", "nextKeyId"):
                        _text(where, field_value, MAX_ID_CHARS)
                    elif field_name == "overlapUntil":
                        _integer(where, field_value, 0, LONG_MAX)
                    elif field_name == "switched":
                        if field_value is not None and not isinstance(field_value, bool):
                            raise StatusError(f"status {where} must be true or false, got {_shown(field_value)}")
                    else:
                        _plain(where, field_value)
            out[name] = key
    return out


def parse_status(payload: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """A status payload as a dict checked against the status schema; a bare word (e.g. a plain-text Last
    Will) as ``{"state": text}``.

    Anything that starts like JSON must be JSON within the limits and, if an object, fit the schema
    (``check_status``); raises StatusError naming what is wrong.
    """
    if len(payload) > max_bytes:
        raise StatusError(f"status payload of {len(payload)} bytes (at most {max_bytes})")
    text = payload.decode("utf-8", errors="replace").strip()
    if not text:
        return {}
    if not text.startswith(("{", "[", '"')):
        return {"state": text[:MAX_BARE_STATE_CHARS]}
    try:
        data = load_json(payload, max_bytes=max_bytes, max_depth=max_depth)
    except PayloadError as exc:
        raise StatusError(f"status payload: {exc}") from exc
    if isinstance(data, str):     # a JSON string: a state, as a bare word is
        return {"state": data[:MAX_BARE_STATE_CHARS]}
    if not isinstance(data, dict):
        raise StatusError(f"status must be a JSON object, got {_shown(data)}")
    return check_status(data)


def reported_version(status: dict[str, Any]) -> int | None:
    """The config version a status reports, if it is one the cloud counts (0..MAX_REPORTED_VERSION)."""
    version = _first(status, *_VERSION_FIELDS)
    if type(version) is not int or not 0 <= version <= MAX_REPORTED_VERSION:
        return None
    return version


def record_status(conn: Any, gateway: str, status: dict[str, Any], received_ms: int, retained: bool = False) -> bool:
    """Update a gateway's current state and append to its history (inside the caller's transaction).

    A retained status ingest has already recorded (redelivered on every resubscribe)
    changes nothing; returns whether anything was recorded.
    """
    raw = json.dumps(status, sort_keys=True)
    state = _first(status, "state", "status")
    version = reported_version(status)
    if retained:
        row = conn.execute("SELECT last_status FROM gateways WHERE gateway = ?", (gateway,)).fetchone()
        if row is not None and row[0] == raw:
            return False
    conn.execute(
        """INSERT INTO gateways (gateway, state, config_version, last_status, first_seen_ms, last_seen_ms)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (gateway) DO UPDATE SET state = excluded.state,
               config_version = COALESCE(excluded.config_version, gateways.config_version),
               last_status = excluded.last_status, last_seen_ms = excluded.last_seen_ms""",
        (gateway, None if state is None else str(state), version, raw, received_ms, received_ms),
    )
    conn.execute(
        "INSERT INTO status_history (gateway, received_ms, state, config_version, payload) VALUES (?, ?, ?, ?, ?)",
        (gateway, received_ms, None if state is None else str(state), version, raw),
    )
    return True


class AckError(ValueError):
    """A config ack that does not follow the contract."""


def parse_ack(payload: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES,
              max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """``{"gateway", "version", "status": "applied"|"rejected", "reason"}``, checked."""
    try:
        ack = load_json(payload, max_bytes=max_bytes, max_depth=max_depth)
    except PayloadError as exc:
        raise AckError(f"config ack: {exc}") from exc
    if not isinstance(ack, dict):
        raise AckError("config ack must be a JSON object")
    if ack.get("status") not in (PUSH_APPLIED, PUSH_REJECTED):
        raise AckError(f"config ack status must be applied or rejected, got {ack.get('status')!r}")
    version = ack.get("version")
    if type(version) is not int or not 0 <= version <= LONG_MAX:
        raise AckError(f"config ack version must be a non-negative 64-bit integer, got {str(version)[:40]}")
    if ack.get("gateway") is not None and type(ack["gateway"]) is not str:
        raise AckError("config ack gateway must be a string")
    ack["reason"] = str(ack.get("reason") or "")
    return ack


def record_ack(conn: Any, gateway: str, ack: dict[str, Any], received_ms: int) -> None:
    """Record an ack and resolve the push it answers (inside the caller's transaction)."""
    conn.execute(
        "INSERT OR IGNORE INTO config_acks (gateway, version, status, reason, received_ms) VALUES (?, ?, ?, ?, ?)",
        (gateway, ack["version"], ack["status"], ack["reason"], received_ms),
    )
    conn.execute(
        """UPDATE config_pushes SET status = ?, reason = ?, resolved_ms = ?
           WHERE gateway = ? AND version = ? AND status IN (?, ?, ?)""",
        (ack["status"], ack["reason"], received_ms, gateway, ack["version"], PUSH_PENDING, PUSH_TIMEOUT,
         PUSH_FAILED),
    )
    if ack["status"] == PUSH_APPLIED:
        # Only a version this cloud pushed to the gateway counts as its applied version: an ack
        # cannot raise the next push's version beyond what the cloud itself numbered.
        conn.execute(
            """INSERT INTO gateways (gateway, config_version, first_seen_ms, last_seen_ms)
               SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM config_pushes WHERE gateway = ? AND version = ?)
               ON CONFLICT (gateway) DO UPDATE SET
                   config_version = MAX(COALESCE(gateways.config_version, 0), excluded.config_version)""",
            (gateway, ack["version"], received_ms, received_ms, gateway, ack["version"]),
        )


class PushError(ValueError):
    """A push that cannot be made for one gateway; the message says why (for the operator)."""


def next_version(gateway: str, pushed: Any, reported: Any) -> int:
    """1 + the highest of every version pushed to ``gateway`` and the version it reports applied.

    Whatever is stored: a reported version that is not an integer counts as none; one above
    MAX_REPORTED_VERSION that this cloud never pushed (a row from before statuses were checked)
    raises PushError, as does a next version beyond MAX_PUSHED_VERSION.
    """
    pushed = pushed if type(pushed) is int and pushed > 0 else 0
    if type(reported) is not int or reported < 0:
        reported = 0
    if reported > MAX_REPORTED_VERSION and reported > pushed:
        raise PushError(f"{gateway} reports config version {reported}, above the highest a gateway may report "
                        f"({MAX_REPORTED_VERSION}) and never pushed by this cloud (its highest push: "
                        f"{pushed or 'none'}); not pushed. The gateway's next status replaces the version "
                        f"it reports")
    version = 1 + max(pushed, reported)
    if version > MAX_PUSHED_VERSION:
        raise PushError(f"{gateway} has no config version left: the next would be {version}, beyond "
                        f"{MAX_PUSHED_VERSION}; not pushed")
    return version


def reserve_version(db: sqlite_utils.Database, gateway: str, fmt: str, document: str, now_ms: int) -> int:
    """Assign the next config version for ``gateway`` and record the push as pending.

    Next = 1 + the highest of every version pushed to it and the version it
    reports applied, so versions only grow even across a lost database row
    (``next_version``: raises PushError, recording nothing, when there is none to give).
    """
    ensure_registry_schema(db)
    with transaction(db) as conn:
        pushed = conn.execute("SELECT MAX(version) FROM config_pushes WHERE gateway = ? "
                              "AND typeof(version) = 'integer'", (gateway,)).fetchone()[0]
        reported = conn.execute("SELECT config_version FROM gateways WHERE gateway = ?", (gateway,)).fetchone()
        version = next_version(gateway, pushed, reported[0] if reported else None)
        conn.execute(
            """INSERT INTO config_pushes (gateway, version, format, sha256, document, pushed_ms, status)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            (gateway, version, fmt, hashlib.sha256(document.encode()).hexdigest(), document, now_ms, PUSH_PENDING),
        )
    return version


def record_push_failure(db: sqlite_utils.Database, gateway: str, reason: str, now_ms: int,
                        version: int | None = None) -> None:
    """Record that a push to ``gateway`` could not be made (and mark its reserved version, if it had one,
    failed): the dashboard shows it on that gateway's row, the other gateways' pushes go on."""
    ensure_registry_schema(db)
    with transaction(db) as conn:
        conn.execute("INSERT INTO push_failures (gateway, failed_ms, version, reason) VALUES (?, ?, ?, ?)",
                     (gateway, now_ms, version, reason))
        if version is not None:
            conn.execute("""UPDATE config_pushes SET status = ?, reason = ?, resolved_ms = ?
                            WHERE gateway = ? AND version = ? AND status = ?""",
                         (PUSH_FAILED, reason, now_ms, gateway, version, PUSH_PENDING))


def resolve_push(db: sqlite_utils.Database, gateway: str, version: int, status: str, reason: str,
                 now_ms: int) -> None:
    """Mark a push timed out (or otherwise resolved without an ack)."""
    with transaction(db) as conn:
        conn.execute(
            "UPDATE config_pushes SET status = ?, reason = ?, resolved_ms = ? WHERE gateway = ? AND version = ?",
            (status, reason, now_ms, gateway, version),
        )


def known_gateways(db: sqlite_utils.Database) -> list[str]:
    """Every gateway that ever reported a status or was pushed a config."""
    ensure_registry_schema(db)
    rows = db.execute("SELECT gateway FROM gateways UNION SELECT gateway FROM config_pushes ORDER BY 1").fetchall()
    return [r[0] for r in rows]
