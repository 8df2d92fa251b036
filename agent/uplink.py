"""Uplink: drains the outbox to the cloud broker, in order, paced, deleting once landed.

Events are published oldest first with QoS 1 while the cloud link is up, at most
``max_inflight`` unacknowledged and at most ``max_rate_per_s`` a second (so the replay
after an outage does not flood the broker). All of it runs on the network thread, the
one thread that runs both brokers' sockets (network_loop.py):

- *the fast path*: ``notify``, called on the network thread with the ``(seq, payload)``
  just stored, publishes them from memory at once when the uplink is free and nothing
  older waits: a sensor message's event reaches the cloud socket with no thread
  hand-over. Otherwise it only wakes the uplink thread;
- *everything else* (a backlog, a reconnect, a refusal, the PUBACKs): the uplink thread
  does no work of its own but times it. It wakes when woken, every ``ACK_BATCH_S``
  while PUBACKs may wait to delete rows, and at least every 0.5 s, and runs ``_service``
  on the network thread (``link.call``), which publishes what waits in the outbox and
  deletes the acknowledged (or landed) rows.

paho reports each PUBACK on the network thread; ``on_published`` only queues the message
id, and ``_service`` maps the ids of a batch back to outbox rows (a delete per PUBACK would
cost the fast path an SQLite commit each). ``_lock`` is held by whoever publishes;
``notify`` does not wait for it, so a publish never starts inside another.

End to end (``uplink.landed``, shared/landed_acks.py): a PUBACK only moves a message to
*sent* (uplink_landed.py); its rows are deleted when ingest's acknowledgement on
``ew/<gw>/events/landed`` names the message's key (its Correlation Data), which
``on_landed`` queues behind the PUBACKs. A sent message not landed in time, and every sent
one after a reconnect, is published again: the uplink goes back to the oldest unlanded row
and sends on from there (the cloud drops duplicates by event id). With a cloud that does
not acknowledge (mode ``off``, or ``auto`` falling back), a PUBACK deletes, as below.

Deleting on PUBACK: after a reconnect, paho itself re-sends what was in flight (same ids,
DUP flag); new events wait until those are acknowledged, so the cloud sees them in their
original order. Events still unacknowledged ``resend_after_s`` after a reconnect are
published again from the outbox; the stable event id lets the cloud drop the duplicate.

A PUBACK with a failure reason (MQTT 5, e.g. "not authorized") means the broker did not
take the event: it stays in the outbox and is retried after ``resend_after_s``, one event
at a time until the broker accepts again, so nothing is lost or reordered by a refusal.

Several events go in one MQTT message (a batch, ``uplink.batch``; which rows go together
is uplink_batch.py's to say): the outbox keeps one row per event, ``_publish_some`` sends
a run of rows as one message and maps its message id to all of their seqs, so order,
resending and deletion stay per row. Rows read but not yet sent (a significant
observation waiting ``linger_ms`` for company) wait in memory and in the outbox; a match
never waits. ``max_inflight`` and ``max_rate_per_s`` count messages; ``forwarded`` counts
events, ``bytes_forwarded`` the payload bytes put on the wire.
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any, Callable, Protocol

from edgewave.agent.config import LANDED_OFF, UplinkBatchSettings, UplinkLandedSettings
from edgewave.agent.outbox import Outbox
from edgewave.agent.uplink_batch import Batcher
from edgewave.agent.uplink_landed import LandedAcks
from edgewave.shared.bounded_json import PayloadError
from edgewave.shared.landed_acks import decode_landed
from edgewave.shared.log_limit import LogLimiter
from edgewave.shared.mqtt_client import CorrelationData

log = logging.getLogger("edgewave.agent.uplink")


class Publisher(Protocol):
    connected: threading.Event

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False,  # noqa: ANN201
                properties: CorrelationData | None = None): ...

    def on_loop_thread(self) -> bool: ...

    def drop_unacknowledged(self) -> int: ...

    def call(self, fn: Callable[[], Any]) -> Any: ...


class Uplink:
    """Publishes outbox events to ``topic``; counts forwarded events and bytes."""

    ACK_BATCH_S = 0.05

    def __init__(self, outbox: Outbox, link: Publisher, topic: str, *, max_inflight: int,
                 max_rate_per_s: float, resend_after_s: float = 10.0,
                 batch: UplinkBatchSettings | None = None, landed: UplinkLandedSettings | None = None) -> None:
        """``batch``: several events a message; None publishes one JSON event a message.
        ``landed``: the end-to-end acknowledgement's settings (None: the defaults)."""
        self.outbox = outbox
        self.link = link
        self.topic = topic
        self.max_inflight = max_inflight
        self.max_rate = max_rate_per_s
        self.resend_after_s = resend_after_s
        self.forwarded = 0
        self.bytes_forwarded = 0
        self.broker_rejected = 0
        self.landed = LandedAcks(landed or UplinkLandedSettings(), outbox)
        self.bad_landed_acks = 0
        self._bad_ack_log = LogLimiter(period_s=60.0)
        self._undeleted_ranges: list[tuple[int, int]] = []   # landed, delete failed: retry
        self._inflight: dict[int, list[int]] = {}    # mid -> the outbox seqs it carries
        self._sizes: dict[int, int] = {}             # mid -> payload bytes
        self._inflight_events = 0
        self._batcher = Batcher(batch)               # rows read, not yet published
        self._flushing = False                       # shutting down: nothing waits
        self._last_seq = 0                           # highest seq handed to paho
        self._generation = outbox.generation
        # PUBACKs (mid, reason code) and landed acknowledgements (None, keys), in arrival order
        self._acks: queue.SimpleQueue[tuple[int | None, Any]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._lock = threading.Lock()                # whoever publishes holds it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sleep_until = math.inf                 # when the uplink thread wakes by itself
        self._reconnected_at: float | None = None
        self._next_wait = 0.5
        self._hold_until = 0.0                       # after a broker refusal: wait before retrying
        self._probing = False                        # ... then one event at a time
        # the bucket holds at most one window of in-flight messages: an idle uplink may then
        # send max_inflight at once, never a whole second's worth on top of the rate
        self._burst = float(max(1.0, min(max_rate_per_s, max_inflight)))
        self._tokens = self._burst
        self._tokens_at = time.monotonic()

    # -- called from other threads ---------------------------------------------------------
    def notify(self, fresh: Sequence[tuple[int, bytes]] = ()) -> None:
        """New events are in the outbox: publish them at once when called on the network
        thread and the uplink is free, else leave them to the uplink thread. (Another
        thread must not publish here: it may hold the engine lock, which the network
        thread may be waiting for.) ``fresh`` are the ``(seq, payload)`` just stored, so
        the usual case need not read them back from the outbox."""
        if not self.link.on_loop_thread() or not self._lock.acquire(blocking=False):
            self._wake.set()
            return
        try:
            if self.link.connected.is_set() and not self._stop.is_set():
                self._publish_some(fresh)
                if time.monotonic() + self._next_wait < self._sleep_until:
                    self._wake.set()        # paced, held back or lingering: the uplink thread goes on sooner
            else:
                self._wake.set()
        except Exception:  # the outbox still holds the events: the uplink thread retries
            log.exception("uplink event=error action='left to the uplink thread'")
            self._wake.set()
        finally:
            self._lock.release()

    def on_published(self, mid: int, reason_code: int) -> None:
        """paho's PUBACK callback: hand the id over, nothing else.

        Acknowledgements are deleted in batches (the uplink thread looks every
        ``ACK_BATCH_S`` while events are in flight, and at least every 0.5 s): waking it for
        each one would make it compete for the GIL with the next event's fast path. It is
        woken at once when the in-flight room runs low or the broker refused an event."""
        self._acks.put((mid, reason_code))
        if reason_code >= 0x80 or len(self._inflight) * 2 >= self.max_inflight:
            self._wake.set()

    def on_landed(self, payload: bytes) -> None:
        """An acknowledgement from ingest (network thread): queued behind the PUBACKs before it.
        One that cannot be read is counted and logged; its events are sent again in time."""
        try:
            keys = decode_landed(payload)
        except PayloadError as exc:
            self.bad_landed_acks += 1
            if self._bad_ack_log.allow("bad"):
                log.warning("uplink event=bad_landed_ack error=%r bad_total=%d suppressed_since_last=%d",
                            str(exc)[:200], self.bad_landed_acks, self._bad_ack_log.take_suppressed("bad"))
            return
        self._acks.put((None, keys))
        if self.landed.room(self._inflight_events) * 4 < self.landed.settings.max_unlanded:
            self._wake.set()          # little room left: make it at once

    def on_connected(self, session_present: bool) -> None:
        """The link is up again (its loop thread, before paho re-sends what it holds).

        End to end, everything not landed is published again from the outbox, from the
        oldest such row on (``_send_again``): paho's own re-send of its unacknowledged
        messages would put each of them on the link a second time, so they are dropped."""
        if self.landed.end_to_end:
            dropped = self.link.drop_unacknowledged()
            if dropped:
                log.info("uplink event=reconnected dropped_client_resends=%d reason='sent again from the outbox'",
                         dropped)
        self._reconnected_at = time.monotonic()
        self._wake.set()

    @property
    def inflight(self) -> int:
        """Events published and not yet acknowledged by the broker."""
        return self._inflight_events

    @property
    def waiting(self) -> bool:
        """Events published and not yet landed (or, deleting on PUBACK, acknowledged)."""
        return bool(self._inflight) or self.landed.events > 0

    @property
    def _deletes_pending(self) -> bool:
        """PUBACKs whose rows are to be deleted may be queued: look every ``ACK_BATCH_S``.

        End to end a PUBACK deletes nothing: the rows go when ingest's acknowledgement lands
        them, and nothing is lost by reading the PUBACKs and the acknowledgements a little
        later (``on_published`` and ``on_landed`` wake the thread when room runs low, and the
        timeouts of ``_check_unlanded`` are seconds long). Each wake-up is a hand-over to the
        network thread on the latency path, so end to end the thread wakes when woken and at
        least every 0.5 s, not twenty times a second."""
        return bool(self._inflight) and not self.landed.end_to_end

    # -- the thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="uplink", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def drain(self, timeout: float) -> bool:
        """Wait until the outbox is empty and nothing is in flight (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        self._flushing = True            # events waiting for company go now
        try:
            while time.monotonic() < deadline:
                if self.outbox.stats().depth == 0 and not self._inflight:
                    return True
                if not self.link.connected.is_set():
                    return False
                self._wake.set()
                time.sleep(0.02)
            return False
        finally:
            self._flushing = False

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = min(self._next_wait, self.ACK_BATCH_S) if self._deletes_pending else self._next_wait
            self._sleep_until = time.monotonic() + timeout
            self._wake.wait(timeout=timeout)
            self._sleep_until = math.inf     # awake: whoever wants it sooner sets the event
            self._wake.clear()
            self._next_wait = 0.5
            try:
                # The work itself runs on the network thread: there a publish is written at
                # once, and the fast path never finds the lock taken by this thread.
                self.link.call(self._service)
            except Exception:  # keep the uplink alive: the outbox still holds everything
                log.exception("uplink event=error action=retrying")
                time.sleep(0.5)
        self.link.call(self._final_acks)

    def _service(self) -> None:
        # New events first (latency), then the PUBACKs and landed acknowledgements (deletes),
        # then what is overdue, then whatever the freed room allows.
        with self._lock:
            if self.link.connected.is_set():
                self._publish_some()
            self._process_acks()
            self.outbox.delete_due()
            if self.landed.events:
                self._check_unlanded()
            if self.link.connected.is_set():
                self._publish_some()

    def _check_unlanded(self) -> None:
        now = time.monotonic()
        ranges = self.landed.gives_up(now)
        if ranges:
            self._delete_ranges(ranges)
        elif self.link.connected.is_set() and self.landed.overdue(now):
            self._send_again("not landed within %.0fs" % self.landed.wait_s)

    def _final_acks(self) -> None:
        with self._lock:
            self._process_acks()

    def _process_acks(self) -> None:
        # The rows to delete, as seq ranges: a landed message's, or with PUBACK deleting, an
        # acknowledged one's (a message's rows are all the outbox holds between its first and last).
        gone: list[tuple[int, int]] = []
        end_to_end = self.landed.end_to_end
        now = time.monotonic()
        while True:
            try:
                mid, reason = self._acks.get_nowait()
            except queue.Empty:
                break
            if mid is None:
                gone += self.landed.landed_ranges(reason)
                continue
            seqs = self._inflight.pop(mid, None)
            size = self._sizes.pop(mid, 0)
            if seqs is None:
                continue
            self._inflight_events -= len(seqs)
            if reason >= 0x80:
                # The broker refused it (e.g. not authorised, quota): keep it, retry later.
                self.broker_rejected += len(seqs)
                log.error("uplink event=broker_rejected seq=%d events=%d reason_code=%d action='keep, retry in %.0fs'",
                          seqs[0], len(seqs), reason, self.resend_after_s)
                self._rewind(seqs[0] - 1)
                self._hold_until = time.monotonic() + self.resend_after_s
                self._probing = True
                continue
            self._probing = False
            if end_to_end:
                self.landed.sent(self.landed.key(seqs[0], seqs[-1]), seqs[0], seqs[-1], len(seqs), now)
            else:
                gone.append((seqs[0], seqs[-1]))
            self.forwarded += len(seqs)
            self.bytes_forwarded += size
        if gone or self._undeleted_ranges:
            self._delete_ranges(gone)

    def _delete_ranges(self, ranges: list[tuple[int, int]]) -> None:
        """Landed (or acknowledged) rows: out of the outbox at once, deleted from its file with
        the next write (``Outbox.delete_soon``); one that failed is retried with the next ones:
        the rows must not linger acknowledged-but-present, or a restart would send them again."""
        batch = self._undeleted_ranges + ranges
        try:
            self.outbox.delete_soon(batch)
            self._undeleted_ranges = []
        except Exception:
            self._undeleted_ranges = batch
            raise

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._tokens_at) * self.max_rate)
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def _rewind(self, seq: int) -> None:
        """Publishing goes on after ``seq``: what was read after it is read again."""
        self._last_seq = min(self._last_seq, seq)
        self._batcher.clear()

    def _forget_inflight(self) -> None:
        self._inflight.clear()
        self._sizes.clear()
        self._inflight_events = 0

    def _publish_some(self, fresh: Sequence[tuple[int, bytes]] = ()) -> None:
        if self.outbox.generation != self._generation:
            # The outbox file was replaced (corrupt): its sequence numbers start over.
            self._generation = self.outbox.generation
            self._forget_inflight()
            self.landed.forget()
            self._last_seq = 0
            self._batcher.clear()
        if self._reconnected_at is not None:
            if self.landed.end_to_end and self.waiting:
                # The broker may have lost what it took (a restart, a crash): all of it again.
                self._send_again("reconnected")
            elif self._inflight:
                if time.monotonic() - self._reconnected_at < self.resend_after_s:
                    self._wake_later(0.05)
                    return
                self._resend_unacknowledged()
            self._reconnected_at = None
        if self._hold_until and time.monotonic() < self._hold_until:
            self._wake_later(self._hold_until - time.monotonic())
            return
        # After a refusal, one event at a time until the broker takes one again: the
        # retried event must not be overtaken by the ones behind it.
        room = (1 if self._probing else self.max_inflight) - len(self._inflight)
        if room <= 0 or self.landed.room(self._inflight_events) <= 0:
            return
        batcher = self._batcher
        tail = batcher.tail or self._last_seq
        # Enough rows for a few messages a round (more would only wait in memory), or with
        # batching off one a message of room, as before.
        want = min(room * batcher.max_events, max(room, 4 * batcher.max_events)) - len(batcher)
        want = min(want, batcher.room)
        read_all = False
        if (fresh and fresh[0][0] == tail + 1 and len(fresh) <= batcher.room
                and fresh[-1][0] - fresh[0][0] == len(fresh) - 1):
            # Exactly the events just stored, and nothing older is waiting in the outbox.
            batcher.add(fresh)
        elif want > 0:
            rows = self.outbox.pending_after(tail, want)
            batcher.add((row.seq, row.payload) for row in rows)
            read_all = len(rows) == want
        now = time.monotonic()
        while room > 0:
            unlanded_room = self.landed.room(self._inflight_events)     # events, not messages
            if unlanded_room <= 0:
                break
            limit = 1 if self._probing else (unlanded_room if unlanded_room < batcher.max_events else None)
            count = batcher.ready(now, flush=self._flushing or self._stop.is_set(), limit=limit)
            if not count:
                if len(batcher):
                    self._wake_later(batcher.wait_s(now))     # they wait for company
                break
            if not self._take_token():
                self._wake_later(1.0 / self.max_rate)
                return
            if not self.link.connected.is_set():
                return
            taken = batcher.take(count)
            try:
                payload, sent = batcher.encode(taken)
                info = self.link.publish(self.topic, payload, qos=1,
                                         properties=self._keyed(taken[0].seq, taken[sent - 1].seq))
            except BaseException:
                batcher.put_back(taken)
                raise
            if sent < len(taken):
                batcher.put_back(taken[sent:])
            seqs = [row.seq for row in taken[:sent]]
            self._inflight[info.mid] = seqs
            self._sizes[info.mid] = len(payload)
            self._inflight_events += len(seqs)
            self._last_seq = seqs[-1]
            room -= 1
        if room == 0 or read_all:
            self._wake.set()   # more may be waiting once acks arrive; look again soon

    def _keyed(self, first: int, last: int) -> CorrelationData | None:
        """The message's key in its Correlation Data: what ingest's acknowledgement names."""
        if self.landed.mode == LANDED_OFF:
            return None
        return CorrelationData(self.landed.key(first, last))

    def _send_again(self, why: str) -> None:
        """Publish everything not yet landed again, from the oldest such row on."""
        starts = [seqs[0] for seqs in self._inflight.values()]
        unlanded = self.landed.events
        low = self.landed.resending()
        if low is not None:
            starts.append(low)
        log.warning("uplink event=resend reason=%r unlanded_events=%d inflight_events=%d from_seq=%s",
                    why, unlanded, self._inflight_events, min(starts) if starts else None)
        self._forget_inflight()
        self._batcher.clear()
        if starts:
            self._last_seq = min(starts) - 1

    def _resend_unacknowledged(self) -> None:
        stale = sorted(seq for seqs in self._inflight.values() for seq in seqs)
        log.warning("uplink event=resend count=%d reason='no PUBACK %.0fs after reconnect'",
                    len(stale), self.resend_after_s)
        self._forget_inflight()
        self._batcher.clear()
        self._last_seq = stale[0] - 1 if stale else self._last_seq

    def _wake_later(self, delay: float) -> None:
        self._next_wait = min(self._next_wait, max(0.001, delay))
