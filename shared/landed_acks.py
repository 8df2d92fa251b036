"""Landed acknowledgements: ingest tells a gateway which of its uplink messages it has landed.

A PUBACK from the cloud broker only says the broker holds a message (in memory, until its next
autosave), so the agent keeps every event in its outbox until ingest has fsynced it into the
landing zone and said so. The exchange is MQTT 5 request/response without a response topic:

- each uplink message carries a *key* in its Correlation Data property, chosen by the agent:
  ``<outbox id>:<first seq>-<last seq>`` in hex and decimal ASCII, the outbox file's random id
  and the range of its rows the message carries (``message_key``);
- after a group commit (landing files fsynced), ingest publishes on ``ew/<gw>/events/landed``
  (topics.landed_topic), QoS 1, the keys of every message of that gateway it committed, landed
  or quarantined, as ``{"landed": ["key", ...]}`` (``encode_landed``): one acknowledgement
  covers every message of the group. The topic is the one the message came on, never a
  response topic the sender names, so a gateway cannot address another's acknowledgements.

A key is the agent's business: ingest echoes it unread, bounded (``MAX_KEY_BYTES``, printable
ASCII). An acknowledgement that is lost costs a re-send (the agent's timeout); the cloud drops
the duplicate by event id.
"""
from __future__ import annotations

import json
import re
from typing import Iterable, Iterator

from .bounded_json import PayloadError, load_json

MAX_KEY_BYTES = 64
"""A key longer than this is not echoed (the agent's are about 25 bytes)."""

MAX_KEYS_PER_MESSAGE = 2000
"""Keys in one acknowledgement at most; ingest splits a larger group (about 60 kB)."""

MAX_ACK_BYTES = MAX_KEYS_PER_MESSAGE * (MAX_KEY_BYTES + 3) + 64
"""The largest acknowledgement the agent reads."""

_KEY = re.compile(r"^([0-9a-f]{1,16}):([0-9]{1,19})-([0-9]{1,19})\Z")
_PRINTABLE = re.compile(rb"^[\x21-\x7e]{1,%d}\Z" % MAX_KEY_BYTES)


def message_key(outbox_id: int, first: int, last: int) -> bytes:
    """The key of a message carrying outbox rows ``first``..``last`` of outbox ``outbox_id``."""
    return f"{outbox_id:x}:{first}-{last}".encode("ascii")


def parse_message_key(key: str) -> tuple[int, int, int] | None:
    """(outbox id, first seq, last seq) of a key the agent made; None for anything else."""
    found = _KEY.match(key)
    if found is None:
        return None
    first, last = int(found[2]), int(found[3])
    return (int(found[1], 16), first, last) if first <= last else None


def echoable(key: bytes | None) -> str | None:
    """``key`` as ingest echoes it, or None when it is absent or not a short printable ASCII string."""
    if not key or _PRINTABLE.match(key) is None:
        return None
    return key.decode("ascii")


def encode_landed(keys: Iterable[str]) -> Iterator[bytes]:
    """The acknowledgement messages for ``keys``, at most ``MAX_KEYS_PER_MESSAGE`` keys each."""
    keys = list(keys)
    for start in range(0, len(keys), MAX_KEYS_PER_MESSAGE):
        yield json.dumps({"landed": keys[start:start + MAX_KEYS_PER_MESSAGE]}, separators=(",", ":")).encode()


def decode_landed(payload: bytes) -> list[str]:
    """The keys of an acknowledgement; raises PayloadError for anything else."""
    doc = load_json(payload, max_bytes=MAX_ACK_BYTES, max_depth=3)
    keys = doc.get("landed") if isinstance(doc, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise PayloadError('not a landed acknowledgement: expected {"landed": ["key", ...]}')
    return keys
