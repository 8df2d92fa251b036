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
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlite_utils

from edgewave.shared.bounded_json import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, PayloadError, load_json
from edgewave.shared.events import LONG_MAX

from .database import transaction

PUSH_PENDING = "pending"
PUSH_APPLIED = "applied"
PUSH_REJECTED = "rejected"
PUSH_TIMEOUT = "timeout"


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
    """A status payload that cannot be recorded (beyond the limits, or broken JSON)."""


def parse_status(payload: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """A status payload as a dict; a bare word (e.g. a plain-text Last Will) as ``{"state": text}``.

    Anything that starts like JSON must be JSON within the limits; raises StatusError.
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
    return data if isinstance(data, dict) else {"state": text[:MAX_BARE_STATE_CHARS]}


def record_status(conn: Any, gateway: str, status: dict[str, Any], received_ms: int, retained: bool = False) -> bool:
    """Update a gateway's current state and append to its history (inside the caller's transaction).

    A retained status ingest has already recorded (redelivered on every resubscribe)
    changes nothing; returns whether anything was recorded.
    """
    raw = json.dumps(status, sort_keys=True)
    state = _first(status, "state", "status")
    version = _first(status, "config_version", "configVersion", "version")
    try:
        version = int(version) if version is not None else None
    except (TypeError, ValueError, OverflowError):
        version = None
    if version is not None and not 0 <= version <= LONG_MAX:
        version = None
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
           WHERE gateway = ? AND version = ? AND status IN (?, ?)""",
        (ack["status"], ack["reason"], received_ms, gateway, ack["version"], PUSH_PENDING, PUSH_TIMEOUT),
    )
    if ack["status"] == PUSH_APPLIED:
        conn.execute(
            """INSERT INTO gateways (gateway, config_version, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?)
               ON CONFLICT (gateway) DO UPDATE SET
                   config_version = MAX(COALESCE(gateways.config_version, 0), excluded.config_version)""",
            (gateway, ack["version"], received_ms, received_ms),
        )


def reserve_version(db: sqlite_utils.Database, gateway: str, fmt: str, document: str, now_ms: int) -> int:
    """Assign the next config version for ``gateway`` and record the push as pending.

    Next = 1 + the highest of every version pushed to it and the version it
    reports applied, so versions only grow even across a lost database row.
    """
    ensure_registry_schema(db)
    with transaction(db) as conn:
        pushed = conn.execute("SELECT MAX(version) FROM config_pushes WHERE gateway = ?", (gateway,)).fetchone()[0]
        reported = conn.execute("SELECT config_version FROM gateways WHERE gateway = ?", (gateway,)).fetchone()
        version = 1 + max(pushed or 0, (reported[0] or 0) if reported else 0)
        conn.execute(
            """INSERT INTO config_pushes (gateway, version, format, sha256, document, pushed_ms, status)
               VALUES (?, ?, ?, ?, ?, ?, ?)""",
            (gateway, version, fmt, hashlib.sha256(document.encode()).hexdigest(), document, now_ms, PUSH_PENDING),
        )
    return version


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
