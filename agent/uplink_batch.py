"""Which outbox rows go up together in one MQTT message, and the message's bytes.

The uplink (uplink.py) reads rows in outbox order and hands them here; they wait in
memory, still in the outbox, until they go. A run of rows leaves as one message when

- it holds a match (a match never waits: the rows before it go with it, in order), or
- it is full (``max_events`` rows, or the next row would pass ``max_bytes`` of JSON), or
- its oldest row has waited ``linger_ms`` (significant observations only), or
- the uplink flushes (shutting down) or sends one event at a time (after a refusal).

A message is a batch (``shared/uplink_batch.py``: zlib with a preset dictionary, the
repeated IRIs written once) even for one event, which it shrinks about ninefold; with
batching off each row's own JSON is the message, as before. Each event keeps its own
outbox row, so order, replay and deletion on PUBACK stay per event.
"""
from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from edgewave.agent.config import UplinkBatchSettings
from edgewave.shared.uplink_batch import BatchError, encode_batch

log = logging.getLogger("edgewave.agent.uplink")

HELD_MAX = 1000
"""Rows held in memory at most; beyond, newer ones stay in the outbox until there is room."""

_MATCH = b'"kind":"match"'
"""How a match's compact JSON (``encode_event``) says it is one; inside a JSON string every
quote is escaped, so no string value can spell this."""


@dataclass
class Held:
    """An outbox row read but not yet published."""

    seq: int
    payload: bytes
    urgent: bool                     # a match: it goes at once
    since: float                     # monotonic time it was read


class Batcher:
    """The rows waiting to be published, oldest first, and the messages they make."""

    def __init__(self, settings: UplinkBatchSettings | None = None) -> None:
        settings = settings or UplinkBatchSettings(enabled=False)
        self.enabled = settings.enabled
        self.max_events = settings.max_events if settings.enabled else 1
        self.max_bytes = settings.max_bytes
        self.linger_s = settings.linger_ms / 1000.0 if settings.enabled else 0.0
        self._rows: deque[Held] = deque()
        self._urgent = 0                 # matches among the held rows

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def tail(self) -> int | None:
        """The seq of the newest held row (reading from the outbox goes on after it)."""
        return self._rows[-1].seq if self._rows else None

    @property
    def room(self) -> int:
        return HELD_MAX - len(self._rows)

    def clear(self) -> None:
        """Forget the held rows: the outbox still has them, and they are read again."""
        self._rows.clear()
        self._urgent = 0

    def add(self, rows: Iterable[tuple[int, bytes]]) -> None:
        now = time.monotonic()
        linger = bool(self.linger_s)
        for seq, payload in rows:
            urgent = not linger or _MATCH in payload
            self._rows.append(Held(seq, payload, urgent, now))
            self._urgent += urgent

    def ready(self, now: float, flush: bool = False, limit: int | None = None) -> int:
        """How many of the oldest rows to publish as one message now; 0: let them wait
        (``wait_s`` says how long)."""
        if not self._rows:
            return 0
        count = size = 0
        cap = min(self.max_events, limit or self.max_events)
        for row in self._rows:
            if count == cap or (count and size + len(row.payload) > self.max_bytes):
                return count                               # a full message
            count += 1
            size += len(row.payload)
        if flush or self._urgent or now - self._rows[0].since >= self.linger_s:
            return count
        return 0

    def wait_s(self, now: float) -> float:
        """Until the oldest held row's linger is over."""
        return max(0.0, self._rows[0].since + self.linger_s - now) if self._rows else self.linger_s

    def take(self, count: int) -> list[Held]:
        out = [self._rows.popleft() for _ in range(count)]
        self._urgent -= sum(row.urgent for row in out)
        return out

    def put_back(self, rows: list[Held]) -> None:
        """Rows taken but not published return to the front, in order."""
        self._rows.extendleft(reversed(rows))
        self._urgent += sum(row.urgent for row in rows)

    def encode(self, rows: list[Held]) -> tuple[bytes, int]:
        """(payload, how many of ``rows`` it carries): a batch of them, or with batching off
        the first row's own JSON. A row that is not JSON ends the batch before it, and goes
        alone as stored (not expected of the agent's own events)."""
        if not self.enabled:
            return rows[0].payload, 1
        events: list[dict[str, Any]] = []
        for row in rows:
            try:
                events.append(json.loads(row.payload))
            except ValueError:
                break
        if events:
            try:
                payload = encode_batch(events)
                if len(events) == 1 and len(payload) >= len(rows[0].payload):
                    return rows[0].payload, 1      # incompressible: as stored, within ingest's max_bytes
                return payload, len(events)
            except BatchError as exc:
                log.warning("uplink event=batch_refused error=%r action='first event alone, as stored'", str(exc))
        return rows[0].payload, 1
