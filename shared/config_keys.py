"""Naming config-signing keys without showing them: a key id is a short hash of the key.

The cloud and the agent both log and report which key signed or verified a document
(``keyId`` in config acks and the status document) so an operator can follow a key
rotation; the key itself never leaves its 0600 file.
"""
from __future__ import annotations

import datetime as dt
import hashlib


def key_id(key: str | bytes) -> str:
    """16 hex digits identifying ``key``; one-way, so safe to log."""
    raw = key.encode() if isinstance(key, str) else key
    return hashlib.sha256(b"edgewave-config-key\x00" + raw).hexdigest()[:16]


def format_time(epoch_s: float) -> str:
    """An instant as ISO 8601 UTC with a Z, as the agent's YAML takes it."""
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> float:
    """ISO 8601 (``2026-12-01T00:00:00Z``; a time without zone is UTC) -> epoch seconds."""
    value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.timestamp()
