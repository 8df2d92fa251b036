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

**Group commit.** Each commit appends every page it changed to the WAL, whole, so a
commit per message would write a page per message whatever its size. A message that made
no event therefore waits for others to share its commit: its row joins the *group*, and
its acknowledgement is held with the group's (so is that of any message behind it that
needs no row: acknowledgements leave in arrival order). The group commits, and its
acknowledgements go together right after, when

- a message makes events: the group's rows go first in that message's transaction, so a
  match is never delayed (and its events never wait);
- ``GROUP_MAX`` acknowledgements are held, below Mosquitto's default of 20 QoS 1 messages
  in flight to one client (``max_inflight_messages``): the broker never stops sending
  because of the group;
- the first of the group waited ``GROUP_WAIT_S`` (``flush_due``, called by the engine thread
  every ``POLL_S`` while idle, and at every message);
- a config change, a stop, or the disk refusing (the group joins the waiting events).

A local broker configured with fewer messages in flight (``max_inflight_messages 1`` for
strict order) would stop sending while the group waits for more: a message arriving right
after a group committed by time (within ``STALL_S``) shows that. One such message can be
chance (at a few messages a second, one in about seventy groups committed by time is followed
that soon by a message the broker did not hold back); a broker's limit shows the same way with
the same number held at every group. So after ``STALL_CONFIRM`` groups in a row that end so,
with the same number held, groups are cut at that number for ``STALL_RETRY_S``, after which
the full size is tried again.

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
GROUP_WAIT_S = 0.1           # longest a message that made no event waits for a shared commit
GROUP_MAX = 16               # acknowledgements (or rows) a group holds at most
POLL_S = GROUP_WAIT_S / 2    # the engine thread's check of a waiting group (see flush_due)
STALL_S = 0.005              # a message this soon after a group committed by time: the broker waited for it
STALL_RETRY_S = 60.0         # how long groups stay cut at what the broker lets through
STALL_CONFIRM = 3            # groups in a row that show the same stall before groups are cut
# Each event the outbox took (or holds in memory, or dropped and counted) is counted by kind.
KIND_COUNTERS = {"match": "matches", "significant": "significant", "instance": "instance_events"}

Row = tuple[int, bytes]      # (outbox seq, payload)
# one transaction: journal rows (and the journal epoch they were made in), events
Batch = tuple[list[JournalEntry], int, list[tuple[str, str, bytes]]]


class Written(NamedTuple):
    """What a retry got onto the disk, and the acknowledgements that may go now."""

    rows: list[Row]
    acks: Sequence[Ack]


class OutboxWriter:
    """Writes events to ``outbox``, with ``journal``'s rows in the same transactions; owns the
    events the disk refused and the held acknowledgements."""

    def __init__(self, outbox: Outbox, journal: WindowJournal, settings: AgentSettings, counters: Counters) -> None:
        self.outbox = outbox
        self.journal = journal
        self.counters = counters
        self.max_unwritten_bytes = settings.outbox.unwritten_max_bytes
        self.retry_every_s = settings.status.local_interval_s
        self._unwritten: deque[Batch] = deque()      # oldest first
        self._unwritten_events = 0
        self.unwritten_bytes = 0
        self._held: list[Ack] = []
        self._failing_since = 0.0
        self._reminded = 0.0
        self._group: list[JournalEntry] = []         # rows waiting for a shared commit
        self._group_epoch = 0
        self._group_acks: list[Ack] = []             # their acknowledgements, and those behind them
        self._group_since = 0.0                      # when the group's first message came (monotonic)
        self._ready: list[Ack] = []                  # acknowledgements the last commit freed
        self.group_max = GROUP_MAX
        self._cut_until = 0.0                        # groups cut short (a broker with fewer in flight) until then
        self._by_time: tuple[float, int] | None = None   # (when, acks) of the last group committed by time
        self._stalls = (0, 0)                        # (acks held, groups in a row) of the stalls seen

    @property
    def unwritten(self) -> int:
        """Events waiting in memory for the disk."""
        return self._unwritten_events

    @property
    def acks_held(self) -> int:
        """Acknowledgements waiting for those events."""
        return len(self._held)

    @property
    def poll_s(self) -> float:
        """How long the engine thread may wait for work before calling ``flush_due``."""
        return POLL_S if self.journal.enabled else 0.5

    def write(self, events: Sequence[Event], entry: JournalEntry | None = None) -> list[Row]:
        """Store ``events`` in order, with ``entry`` (the message's journal row) in the same
        transaction, after the group's rows; returns the ``(seq, payload)`` of the events now
        on disk. A row without events joins the group instead (see the module docstring)."""
        if entry is not None and not events and not self._unwritten:
            if self._group and self._group_epoch != self.journal.epoch:
                self._group = []              # made under the config before: the journal starts afresh
            if not self._group and not self._group_acks:
                self._group_since = time.monotonic()
            self._group.append(entry)
            self._group_epoch = self.journal.epoch
            return []
        stored = self._commit([(e["id"], e["kind"], encode_event(e)) for e in events], entry)
        counters = self.counters
        for event in events:       # stored, held or dropped: counted once it is one of those
            counters.add(KIND_COUNTERS[event["kind"]])
        return stored

    def _commit(self, rows: list[tuple[str, str, bytes]], entry: JournalEntry | None) -> list[Row]:
        """The group's rows, ``entry`` and ``rows`` in one transaction (or, if the disk refuses,
        in memory); the group's acknowledgements are freed with it, or held behind it."""
        group, self._group = self._group, []
        epoch = self._group_epoch
        if entry is not None:
            if group and epoch != self.journal.epoch:
                group = []
            group.append(entry)
            epoch = self.journal.epoch
        batch: Batch = (group, epoch, rows)
        stored: list[Row] | None = None
        if not self._unwritten:
            try:
                stored = self._store(batch)
            except sqlite3.Error as exc:
                self.counters.add("outbox_write_failed")
                self._failing_since = self._reminded = time.monotonic()
                log.error("outbox event=write_failed events=%d journal_rows=%d error=%r action='events wait in "
                          "memory and sensor messages stay unacknowledged until a write succeeds; retried every %ss'",
                          len(rows), len(group), str(exc), self.retry_every_s)
        if stored is None and (rows or group):
            self._hold(batch)
        acks, self._group_acks = self._group_acks, []
        (self._held if self._unwritten else self._ready).extend(acks)
        return stored or []

    def _store(self, batch: Batch) -> list[Row]:
        """One transaction: the journal rows (and any journal upkeep) and the events."""
        entries, epoch, rows = batch
        journal = self.journal
        statement = journal.statement(entries, epoch)
        if not rows and statement is None:
            return []
        try:
            seqs = self.outbox.append_batch(rows, statement)
        except sqlite3.Error:
            journal.failed()
            raise
        if statement is not None:
            journal.committed()
        return [(seq, row[2]) for seq, row in zip(seqs, rows) if seq is not None]

    def _hold(self, batch: Batch) -> None:
        entries, _, rows = batch
        size = sum(len(row[2]) for row in rows) + sum(len(e.payload) for e in entries)
        if self.unwritten_bytes + size > self.max_unwritten_bytes:
            if rows:
                self.counters.add("outbox_unwritten_dropped", len(rows))
                if self.counters["outbox_unwritten_dropped"] % 1000 <= len(rows):
                    log.error("outbox event=unwritten_dropped id=%s kind=%s dropped_total=%d unwritten_max_bytes=%d",
                              rows[0][0], rows[0][1], self.counters["outbox_unwritten_dropped"],
                              self.max_unwritten_bytes)
            if entries:
                self.counters.add("state_unwritten_dropped", len(entries))
            return
        self._unwritten.append(batch)
        self._unwritten_events += len(rows)
        self.unwritten_bytes += size

    def release(self, acks: tuple[Ack, ...]) -> Sequence[Ack]:
        """Which acknowledgements may go now, ``acks`` (of the message just handled) last: all,
        unless events wait for the disk (then they wait behind them, in order) or a group
        waits for its commit (then they wait with it, see the module docstring)."""
        ready, self._ready = self._ready, []
        if acks and self._by_time is not None:
            self._check_stall()
        if self._unwritten:
            self._held.extend(ready)
            self._held.extend(acks)
            return ()
        if not self._group and not self._group_acks:
            return ready + list(acks) if ready else acks
        self._group_acks.extend(acks)
        if len(self._group_acks) >= self.group_max or len(self._group) >= GROUP_MAX \
                or time.monotonic() - self._group_since >= GROUP_WAIT_S:
            return ready + self.flush()
        return ready

    def flush(self, by_time: bool = False) -> list[Ack]:
        """Commit the group now; the acknowledgements that may go (none if the disk refused)."""
        if not self._group and not self._group_acks:
            return []
        self._commit([], None)
        ready, self._ready = self._ready, []
        if by_time and ready:
            self._by_time = (time.monotonic(), len(ready))
        return ready

    def flush_due(self) -> Written:
        """The engine thread, idle for ``poll_s``: commit a group that has waited long
        enough that it would wait past ``GROUP_WAIT_S`` before the next call, and delete the
        journal's expired rows if due (``upkeep``)."""
        if self._group_acks and time.monotonic() - self._group_since >= GROUP_WAIT_S - POLL_S:
            return Written([], self.flush(by_time=True))
        if self._group and not self._group_acks:     # rows without acknowledgements (QoS 0)
            self.flush()
        if self.group_max < GROUP_MAX and time.monotonic() >= self._cut_until:
            self.group_max = GROUP_MAX
        self.upkeep()
        return Written([], ())

    def upkeep(self) -> None:
        """While idle: the journal's expired rows that no message's transaction took with it
        (window_journal.py), in a transaction of their own. A waiting group does it when it
        commits; a failure leaves them for the next write."""
        if self._group or self._group_acks or self._unwritten or not self.journal.upkeep_due():
            return
        try:
            self._store(([], self.journal.epoch, []))
        except sqlite3.Error as exc:
            log.warning("journal event=prune_failed error=%r action='tried again with the next write'", str(exc))

    def _check_stall(self) -> None:
        """A message right after a group committed by time: the broker may have held it back
        until it got those acknowledgements. Seen ``STALL_CONFIRM`` times in a row with the
        same number held, it lets no more than that many through: cut groups at it."""
        when, held = self._by_time or (0.0, 0)
        self._by_time = None
        if time.monotonic() - when >= STALL_S or held >= self.group_max:
            self._stalls = (0, 0)
            return
        seen = self._stalls[1] + 1 if self._stalls[0] == held else 1
        self._stalls = (held, seen)
        if seen >= STALL_CONFIRM:
            self._stalls = (0, 0)
            self.group_max = held
            self._cut_until = time.monotonic() + STALL_RETRY_S
            log.warning("outbox event=group_commit_cut acks=%d for_s=%.0f reason='the local broker sends no more "
                        "unacknowledged messages (max_inflight_messages); groups are cut at that size'",
                        held, STALL_RETRY_S)

    def retry(self) -> Written:
        """Write the events the disk refused, oldest first; once all are on disk, the held
        acknowledgements may go, in order."""
        if not self._unwritten:
            return Written([], ())
        stored: list[Row] = []
        try:
            while self._unwritten:
                batch = self._unwritten[0]
                stored.extend(self._store(batch))
                self._unwritten.popleft()
                self._unwritten_events -= len(batch[2])
                self.unwritten_bytes -= sum(len(row[2]) for row in batch[2]) + sum(len(e.payload) for e in batch[0])
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
        """A last try before the agent disconnects (the group first); what still waits is
        logged with its fate."""
        grouped = self.flush()
        written = self.retry()
        if grouped:
            written = Written(written.rows, [*grouped, *written.acks])
        if self._unwritten:
            log.error("outbox event=unwritten_at_stop events=%d bytes=%d acks_held=%d consequence=%r",
                      self._unwritten_events, self.unwritten_bytes, len(self._held),
                      "not stored; the local broker delivers the unacknowledged sensor messages again "
                      "at the next start" if self._held else "lost (no message to deliver again)")
        return written

    def maintain(self) -> None:
        """Age out old events: an idle gateway must too (the WAL's checkpoints have a thread
        of their own, outbox_checkpoint.py)."""
        self.outbox.expire()
