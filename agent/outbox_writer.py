"""The outbox writer: events into the outbox in order, and held in memory while the disk refuses them.

If the disk refuses an event (full, I/O error), the event waits in memory, and so does
every later one, to keep their order: nothing is published that is not on disk. The
acknowledgements of the sensor messages handled meanwhile wait too (``release``):
acknowledgements leave in arrival order, and an unacknowledged message is the local
broker's to deliver again if the agent dies before the disk recovers. ``retry`` (the
status thread, every ``status.local_interval_s``) writes the waiting events oldest
first; once all are on disk, the held acknowledgements go. Only beyond
``outbox.unwritten_max_bytes`` is an event dropped (counted, logged).

With durable windows (window_journal.py), a sensor message's journal row goes in the
same transaction as its events, and waits with them: a message's acknowledgement is
released only once both are on disk. A message that made no event still writes its row.

Nothing here publishes or acknowledges: ``write`` returns the ``(seq, payload)`` just
stored, for the uplink, and ``release`` and ``retry`` return the acknowledgements that
may go, for the caller to send. One caller at a time (the engine lock).
"""
from __future__ import annotations

import logging
import sqlite3
import time
from collections import deque
from typing import NamedTuple, Sequence

from edgewave.agent.config import AgentSettings
from edgewave.agent.mqtt_link import Ack
from edgewave.agent.outbox import Outbox
from edgewave.agent.pipeline import Event
from edgewave.agent.status import Counters
from edgewave.agent.window_journal import JournalEntry, WindowJournal
from edgewave.shared.events import encode_event

log = logging.getLogger("edgewave.agent")

REMINDER_EVERY_S = 60.0      # while the disk refuses events: one reminder a minute
# Each event the outbox took (or holds in memory, or dropped and counted) is counted by kind.
KIND_COUNTERS = {"match": "matches", "significant": "significant"}

Row = tuple[int, bytes]      # (outbox seq, payload)
Batch = tuple["JournalEntry | None", list[tuple[str, str, bytes]]]   # one transaction: journal row, events


class Written(NamedTuple):
    """What a retry got onto the disk, and the acknowledgements that may go now."""

    rows: list[Row]
    acks: Sequence[Ack]


class OutboxWriter:
    """Writes events to the outbox; owns the events the disk refused and the held acknowledgements."""

    def __init__(self, settings: AgentSettings, counters: Counters) -> None:
        self.outbox: Outbox | None = None            # set once the file is open
        self.counters = counters
        self.journal = WindowJournal(settings, counters)
        self.max_unwritten_bytes = settings.outbox.unwritten_max_bytes
        self.retry_every_s = settings.status.local_interval_s
        self._unwritten: deque[Batch] = deque()      # oldest first
        self._unwritten_events = 0
        self.unwritten_bytes = 0
        self._held: list[Ack] = []
        self._failing_since = 0.0
        self._reminded = 0.0

    @property
    def unwritten(self) -> int:
        """Events waiting in memory for the disk."""
        return self._unwritten_events

    @property
    def acks_held(self) -> int:
        """Acknowledgements waiting for those events."""
        return len(self._held)

    def write(self, events: Sequence[Event], entry: JournalEntry | None = None) -> list[Row]:
        """Store ``events`` in order, with ``entry`` (the message's journal row) in the same
        transaction; returns the ``(seq, payload)`` of the events now on disk."""
        batch: Batch = (entry, [(e["id"], e["kind"], encode_event(e)) for e in events])
        stored: list[Row] | None = None
        if not self._unwritten:
            try:
                stored = self._store(batch)
            except sqlite3.Error as exc:
                self.counters.add("outbox_write_failed")
                self._failing_since = self._reminded = time.monotonic()
                log.error("outbox event=write_failed events=%d journal=%s error=%r action='events wait in memory "
                          "and sensor messages stay unacknowledged until a write succeeds; retried every %ss'",
                          len(batch[1]), entry is not None, str(exc), self.retry_every_s)
        if stored is None and (batch[1] or entry is not None):
            self._hold(batch)
        counters = self.counters
        for event in events:       # stored, held or dropped: counted once it is one of those
            counters.add(KIND_COUNTERS[event["kind"]])
        return stored or []

    def _store(self, batch: Batch) -> list[Row]:
        """One transaction: the journal row (and any journal upkeep) and the events."""
        assert self.outbox is not None
        entry, rows = batch
        journal = self.journal
        journal.outbox = self.outbox
        statement = journal.statement(entry)
        if not rows and statement is None:
            return []
        try:
            seqs = self.outbox.append_batch(rows, statement)
        except sqlite3.Error:
            journal.failed()
            raise
        if statement is not None:
            journal.committed(entry)
        return [(seq, row[2]) for seq, row in zip(seqs, rows) if seq is not None]

    def _hold(self, batch: Batch) -> None:
        entry, rows = batch
        size = sum(len(row[2]) for row in rows) + (len(entry.payload) if entry is not None else 0)
        if self.unwritten_bytes + size > self.max_unwritten_bytes:
            if rows:
                self.counters.add("outbox_unwritten_dropped", len(rows))
                if self.counters["outbox_unwritten_dropped"] % 1000 <= len(rows):
                    log.error("outbox event=unwritten_dropped id=%s kind=%s dropped_total=%d unwritten_max_bytes=%d",
                              rows[0][0], rows[0][1], self.counters["outbox_unwritten_dropped"],
                              self.max_unwritten_bytes)
            if entry is not None:
                self.counters.add("state_unwritten_dropped")
            return
        self._unwritten.append(batch)
        self._unwritten_events += len(rows)
        self.unwritten_bytes += size

    def release(self, acks: tuple[Ack, ...]) -> Sequence[Ack]:
        """Which of ``acks`` (of messages whose events went to ``write``) may go now: all,
        unless events wait for the disk; then they wait behind them, in order."""
        if acks and self._unwritten:
            self._held.extend(acks)
            return ()
        return acks

    def retry(self) -> Written:
        """Write the events the disk refused, oldest first; once all are on disk, the held
        acknowledgements may go, in order."""
        if not self._unwritten:
            return Written([], ())
        assert self.outbox is not None
        stored: list[Row] = []
        try:
            while self._unwritten:
                batch = self._unwritten[0]
                stored.extend(self._store(batch))
                self._unwritten.popleft()
                self._unwritten_events -= len(batch[1])
                self.unwritten_bytes -= sum(len(row[2]) for row in batch[1]) + (
                    len(batch[0].payload) if batch[0] is not None else 0)
        except sqlite3.Error as exc:
            self.counters.add("outbox_write_failed")
            now = time.monotonic()
            if now - self._reminded >= REMINDER_EVERY_S:
                self._reminded = now
                log.error("outbox event=write_still_failing unwritten=%d bytes=%d acks_held=%d for_s=%.0f error=%r",
                          self._unwritten_events, self.unwritten_bytes, len(self._held),
                          now - self._failing_since, str(exc))
            return Written(stored, ())
        held, self._held = self._held, []
        log.warning("outbox event=write_recovered written=%d acks_released=%d after_s=%.1f",
                    len(stored), len(held), time.monotonic() - self._failing_since)
        return Written(stored, held)

    def retry_at_stop(self) -> Written:
        """A last try before the agent disconnects; what still waits is logged with its fate."""
        written = self.retry()
        if self._unwritten:
            log.error("outbox event=unwritten_at_stop events=%d bytes=%d acks_held=%d consequence=%r",
                      self._unwritten_events, self.unwritten_bytes, len(self._held),
                      "not stored; the local broker delivers the unacknowledged sensor messages again "
                      "at the next start" if self._held else "lost (no message to deliver again)")
        return written

    def maintain(self) -> None:
        """Age out old events (an idle gateway must too) and checkpoint the WAL, off the hot path."""
        if self.outbox is not None:
            self.outbox.expire()
            self.outbox.checkpoint()
