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

**Group commit.** Each commit appends every page it changed to the WAL, whole (the events'
leaf, the journal's, the table of sequence numbers, the file's header when a page is
added), so a commit per message would write several pages per message whatever its size.
A message that made no match therefore waits for others to share its commit: its journal
row and its significant observations (which wait for company in the uplink anyway,
``uplink.batch.linger_ms``) join the *group*, and its acknowledgement is held with the
group's (so is that of any message behind it that needs no row: acknowledgements leave in
arrival order). The group commits, and its acknowledgements go together right after, when

- a message makes a match (or an instance result): the group's rows and events go first
  in that message's transaction, so a match is never delayed;
- ``GROUP_MAX`` acknowledgements are held, below Mosquitto's default of 20 QoS 1 messages
  in flight to one client (``max_inflight_messages``): the broker never stops sending
  because of the group;
- the first of the group waited ``outbox.group_commit_s`` (``flush_due``, called by the
  engine thread every ``poll_s`` while idle, and at every message);
- a config change, a stop, or the disk refusing (the group joins the waiting events).

At the demo's pace (three messages a second, one significant observation in eight) a group
wait of 0.1 s committed nearly every message alone; 2 s puts five or six in a commit.

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
from edgewave.agent.window_journal import JournalBlock, JournalEntry, WindowJournal
from edgewave.shared.events import encode_event

log = logging.getLogger("edgewave.agent")

REMINDER_EVERY_S = 60.0      # while the disk refuses events: one reminder a minute
GROUP_MAX = 16               # acknowledgements (or rows) a group holds at most
IDLE_POLL_S = 0.5            # the engine thread's wake-up with nothing waiting (Pipeline.idle's pace)
STALL_S = 0.005              # a message this soon after a group committed by time: the broker waited for it
STALL_RETRY_S = 60.0         # how long groups stay cut at what the broker lets through
STALL_CONFIRM = 3            # groups in a row that show the same stall before groups are cut
GROUPED_KINDS = frozenset({"significant"})   # events that may wait in a group; a match never does
# Each event the outbox took (or holds in memory, or dropped and counted) is counted by kind.
KIND_COUNTERS = {"match": "matches", "significant": "significant", "instance": "instance_events"}

Row = tuple[int, bytes]      # (outbox seq, payload)
# one transaction: journal rows, packed (and the journal epoch they were made in), events
Batch = tuple[list[JournalBlock], int, list[tuple[str, str, bytes]]]


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
        self.group_wait_s = settings.outbox.group_commit_s   # longest the first of a group waits
        self.retry_every_s = settings.status.local_interval_s
        self._unwritten: deque[Batch] = deque()      # oldest first
        self._unwritten_events = 0
        self.unwritten_bytes = 0
        self._held: list[Ack] = []
        self._failing_since = 0.0
        self._reminded = 0.0
        self._group: list[JournalEntry] = []         # rows waiting for a shared commit
        self._group_events: list[tuple[str, str, bytes]] = []   # significant events waiting with them
        self._unnotified: list[Row] = []             # stored by a ``flush``, not yet handed on
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
    def grouped(self) -> int:
        """What waits for the group's shared commit, nothing of it on disk yet: the sensor messages
        (unacknowledged), or without acknowledgements their journal rows, or their events; 0 once
        the group committed."""
        return len(self._group_acks) or len(self._group) or len(self._group_events)

    @property
    def poll_s(self) -> float:
        """How long the engine thread may wait for work before calling ``flush_due``: half
        the group wait, at most ``IDLE_POLL_S`` (an idle agent wakes twice a second)."""
        return min(IDLE_POLL_S, max(0.01, self.group_wait_s / 2))

    def _grouping(self) -> bool:
        return bool(self._group or self._group_events or self._group_acks)

    def write(self, events: Sequence[Event], entry: JournalEntry | None = None) -> list[Row]:
        """Store ``events`` in order, with ``entry`` (the message's journal row) in the same
        transaction, after the group's rows; returns the ``(seq, payload)`` of the events now
        on disk. A row without events, or with only significant ones, joins the group instead
        (see the module docstring)."""
        rows = [(e["id"], e["kind"], encode_event(e)) for e in events]
        if (entry is not None or rows) and not self._unwritten and self.group_wait_s > 0 \
                and all(row[1] in GROUPED_KINDS for row in rows):
            if self._group and self._group_epoch != self.journal.epoch:
                self._group = []              # made under the config before: the journal starts afresh
            if not self._grouping():
                self._group_since = time.monotonic()
            if entry is not None:
                self._group.append(entry)
                self._group_epoch = self.journal.epoch
            self._group_events += rows
            stored: list[Row] = []
        else:
            stored = self._commit(rows, entry)
        if self._unnotified:
            stored, self._unnotified = self._unnotified + stored, []
        counters = self.counters
        for event in events:       # stored, held or dropped: counted once it is one of those
            counters.add(KIND_COUNTERS[event["kind"]])
        return stored

    def _commit(self, rows: list[tuple[str, str, bytes]], entry: JournalEntry | None) -> list[Row]:
        """The group's rows, ``entry`` and ``rows`` in one transaction (or, if the disk refuses,
        in memory); the group's acknowledgements are freed with it, or held behind it."""
        group, self._group = self._group, []
        grouped, self._group_events = self._group_events, []
        rows = grouped + rows                # the group's events are older: they go first
        epoch = self._group_epoch
        if entry is not None:
            if group and epoch != self.journal.epoch:
                group = []
            group.append(entry)
            epoch = self.journal.epoch
        # The group's messages packed into one journal row (window_journal.py), before the
        # transaction; kept packed if the disk refuses it.
        batch: Batch = (self.journal.pack(group) if group else [], epoch, rows)
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
        blocks, epoch, rows = batch
        journal = self.journal
        statement = journal.statement(blocks, epoch)
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
        blocks, _, rows = batch
        size = sum(len(row[2]) for row in rows) + sum(len(b.payload) for b in blocks)
        if self.unwritten_bytes + size > self.max_unwritten_bytes:
            if rows:
                self.counters.add("outbox_unwritten_dropped", len(rows))
                if self.counters["outbox_unwritten_dropped"] % 1000 <= len(rows):
                    log.error("outbox event=unwritten_dropped id=%s kind=%s dropped_total=%d unwritten_max_bytes=%d",
                              rows[0][0], rows[0][1], self.counters["outbox_unwritten_dropped"],
                              self.max_unwritten_bytes)
            if blocks:
                self.counters.add("state_unwritten_dropped", sum(b.messages for b in blocks))
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
        if not self._grouping():
            return ready + list(acks) if ready else acks
        self._group_acks.extend(acks)
        if len(self._group_acks) >= self.group_max or len(self._group) + len(self._group_events) >= GROUP_MAX \
                or time.monotonic() - self._group_since >= self.group_wait_s:
            return ready + self.flush()
        return ready

    def flush(self, by_time: bool = False) -> list[Ack]:
        """Commit the group now; the acknowledgements that may go (none if the disk refused).
        Its events now on disk go to the uplink with the next ``write`` or ``flush_due``."""
        written = self._flush(by_time)
        self._unnotified += written.rows
        return list(written.acks)

    def _flush(self, by_time: bool = False) -> Written:
        """Commit the group now: its events now on disk (for the uplink) and the
        acknowledgements that may go."""
        if not self._grouping():
            return Written([], [])
        stored = self._commit([], None)
        ready, self._ready = self._ready, []
        if by_time and ready:
            self._by_time = (time.monotonic(), len(ready))
        return Written(stored, ready)

    def flush_due(self) -> Written:
        """The engine thread, idle for ``poll_s``: commit a group that has waited long
        enough that it would wait past ``group_wait_s`` before the next call, and delete the
        journal's expired rows if due (``upkeep``)."""
        due = time.monotonic() - self._group_since >= self.group_wait_s - self.poll_s
        # Acknowledgements a commit outside the group's own freed (an instance report, an
        # absence, stored while the group waited, takes the group with it): they go now, not
        # with the next message, which on a quiet gateway may be long in coming.
        ready, self._ready = tuple(self._ready), []
        if self._unnotified:             # a flush by a message stored them: on to the uplink now
            written, self._unnotified = Written(self._unnotified, ready), []
            return written
        if self._group_acks and due:
            flushed = self._flush(by_time=True)
            return Written(flushed.rows, [*ready, *flushed.acks])
        written = Written([], ready)
        if (self._group or self._group_events) and not self._group_acks and due:   # QoS 0: no acks
            flushed = self._flush()
            written = Written(flushed.rows, [*ready, *flushed.acks])
        if self.group_max < GROUP_MAX and time.monotonic() >= self._cut_until:
            self.group_max = GROUP_MAX
        self.upkeep()
        return written

    def upkeep(self) -> None:
        """While idle: the journal's expired rows that no message's transaction took with it
        (window_journal.py), in a transaction of their own. A waiting group does it when it
        commits; a failure leaves them for the next write."""
        if self._grouping() or self._unwritten or not self.journal.upkeep_due():
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
                self.unwritten_bytes -= sum(len(row[2]) for row in batch[2]) + sum(len(b.payload) for b in batch[0])
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
        grouped = self._flush()
        written = self.retry()
        rows, self._unnotified = self._unnotified + grouped.rows + written.rows, []
        written = Written(rows, [*grouped.acks, *written.acks])
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
