"""Ingest: what gateways forward, from the cloud broker into the landing zone and the registry.

Ingest holds a persistent MQTT session (fixed client id, MQTT 5 clean_start
False with a session expiry), so while it is down the broker queues every QoS 1
event for it. It acknowledges a message (paho manual acks) only after the
message is durable: events appended to the landing zone and fsynced, status
messages and config acks committed to SQLite. A crash between write and ack
means the broker redelivers; the Spark job drops the duplicate by event id.

Messages are committed in groups (up to ``commit_max_messages`` or every
``commit_interval_ms``), so one fsync covers many events. paho's network
thread only queues messages; the main thread writes, syncs and acks.

After each group commit ingest tells every gateway which of its messages it now
holds (shared/landed_acks.py): the keys the agent put in their Correlation Data,
landed or quarantined, in one message per gateway on ``ew/<gw>/events/landed``.
Only then does the agent delete the events from its outbox; a broker that loses
messages (restart with a shared subscription, crash before its autosave) costs
a re-send, not an event.

An events message holds one JSON-LD event, or a batch of them (``shared/uplink_batch.py``,
told apart by its first byte): a batch lands the same events, each checked as a single
one is; an event of a batch that fails its checks is quarantined alone.

One bad message never stops ingest. Every payload is read within limits
(``ingest.limits``: size, nesting depth, triples and bindings per event, a batch's
compressed and inflated size and event count) that a JSON or zlib bomb cannot pass,
and whatever goes wrong while one message is decoded, validated or recorded
(not an event, beyond a limit, an event claiming another gateway's topic, a
malformed ack, or an error nobody foresaw) quarantines that message: it is kept
in ``<landing_zone>/rejected/`` with the reason (above ``rejected_keep_bytes``
only its first bytes, its size and its SHA-256), counted, logged (at most once a
minute per reason) and acknowledged. It will not get better by redelivery.

Should the process die on a message all the same, the in-flight marker
(``inflight_marker.py``) recognises it on redelivery and quarantines it unread.
Several ingest processes can share the events (``ingest_workers.py``).
"""
from __future__ import annotations

import base64
import hashlib
import logging
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.shared import clock, failpoints, topics
from edgewave.shared.broker import ReconnectSettings
from edgewave.shared.events import EventError, decode_event, encode_event
from edgewave.shared.shutdown import stop_on_signals
from edgewave.shared.landed_acks import echoable, encode_landed
from edgewave.shared.log_limit import LogLimiter
from edgewave.shared.mqtt_client import new_client, send_at_once
from edgewave.shared.uplink_batch import check_event, decode_batch, is_batch

from .database import open_database, transaction
from . import ingest_figures
from .inflight_marker import STRIKES_TO_QUARANTINE, InFlightMarker
from .ingest_workers import subscriptions, worker_client_id
from .landing import LandingZone
from .live_feed import LiveFeedWriter
from .registry import (AckError, StatusError, ensure_registry_schema, parse_ack, parse_status, record_ack,
                       record_status)
from .settings import CloudSettings

log = logging.getLogger(__name__)


@dataclass
class Received:
    """A message handed from paho's thread to the committing thread.

    A payload above the size limit is not kept: paho's thread replaces it at once
    by its first ``rejected_keep_bytes``, so a flood of huge messages cannot
    fill the queue. ``size`` and ``sha256`` still describe the whole payload.
    """

    topic: str
    payload: bytes
    qos: int
    mid: int
    retain: bool
    received_ms: int
    size: int
    sha256: str
    oversized: bool = False
    key: str | None = None     # the agent's key (Correlation Data), echoed once the message is landed


# paho reconnects ingest by itself (loop_start): after a second, doubling up to half a minute.
RECONNECT = ReconnectSettings(min_delay_s=1, max_delay_s=30)


class Ingest:
    """The ingest service; ``run()`` until ``stop()`` (or SIGTERM/SIGINT via the CLI)."""

    def __init__(self, settings: CloudSettings, worker: int = 0, *, retiring: bool = False) -> None:
        self.settings = settings
        self.worker = worker
        self.retiring = retiring
        self.retired = False
        self._unsubscribed = threading.Event()
        self._last_message = time.monotonic()
        cfg = settings.ingest
        self.client_id = worker_client_id(cfg.client_id, worker)
        self.landing = LandingZone(settings.events_dir, roll_bytes=cfg.roll_bytes, roll_seconds=cfg.roll_seconds,
                                   writer=f"w{worker}")
        self.rejected = LandingZone(settings.rejected_dir, roll_bytes=cfg.roll_bytes, roll_seconds=cfg.roll_seconds,
                                    writer=f"w{worker}")
        self.db = open_database(settings.database)
        ensure_registry_schema(self.db)
        ingest_figures.ensure_schema(self.db.conn)
        self.limits = cfg.limits
        self.marker = InFlightMarker(Path(settings.landing_zone) / f"{self.client_id}.inflight")
        self.inbox: queue.Queue[Received] = queue.Queue()
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self.feed = LiveFeedWriter(settings.live_feed_path, settings.live_feed.max_rows)
        self._landed: list[dict[str, Any]] = []     # this group's events, for the live feed
        self.counters = {"events": 0, "batches": 0, "status": 0, "acks": 0, "rejected": 0, "commits": 0,
                         "feed_errors": 0, "landed_acks": 0}
        # The same figures (and rejections by reason) in the database, for /metrics.
        self.figures = ingest_figures.WorkerFigures(worker, self.client_id, clock.now_ms(),
                                                    counters=self.counters)
        self._figures_due = 0.0
        self._reject_log = LogLimiter(period_s=60.0)
        # crash tests (shared/failpoints.py): die on a payload holding a text, or after the n-th
        # group commit that landed a match, once fsynced and before any gateway is told it landed
        self._payload_failpoint = (failpoints.argument("ingest_payload") or "").encode()
        self._landed_failpoint = failpoints.Countdown("before_landed_ack")
        self.client = new_client(settings.broker, self.client_id, manual_ack=True, reconnect=RECONNECT)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message

    # -- paho's thread: hand over only ---------------------------------------------------

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                    properties: Any) -> None:
        if reason_code.is_failure:
            log.error("ingest connect refused reason=%s", reason_code)
            return
        send_at_once(client)       # PUBACKs and landed acknowledgements leave at once
        log.info("ingest connected worker=%d client_id=%s broker=%s:%d session_present=%s", self.worker,
                 self.client_id, self.settings.broker.host, self.settings.broker.port, flags.session_present)
        if flags.session_present:   # a session from before shared subscriptions: no second copy of each event
            client.unsubscribe(topics.ALL_EVENTS)
        if self.retiring:           # take no new events; what the session holds is delivered all the same
            client.unsubscribe(subscriptions(self.worker, self.settings.ingest.share_group))
            self._last_message = time.monotonic()
            self._unsubscribed.set()
        else:
            client.subscribe([(t, 1) for t in subscriptions(self.worker, self.settings.ingest.share_group)])
        self.connected.set()

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                       properties: Any) -> None:
        self.connected.clear()
        if not self.stopping.is_set():
            log.warning("ingest disconnected reason=%s; reconnecting", reason_code)

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        payload = msg.payload
        oversized = len(payload) > self._size_limit(payload)
        props = getattr(msg, "properties", None)
        received = Received(msg.topic, payload[:self.settings.ingest.rejected_keep_bytes] if oversized else payload,
                            msg.qos, msg.mid, bool(msg.retain), clock.now_ms(), len(payload),
                            hashlib.sha256(payload).hexdigest(), oversized,
                            echoable(getattr(props, "CorrelationData", None)))
        self.inbox.put(received)

    # -- main thread: write, sync, ack -----------------------------------------------------

    def start(self) -> None:
        recovered = self.landing.recover() + self.rejected.recover()
        if recovered:
            log.warning("ingest recovered records=%d from files left open by a previous run", recovered)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = self.settings.ingest.session_expiry_s
        props.ReceiveMaximum = self.settings.ingest.receive_maximum
        broker = self.settings.broker
        self.client.connect_async(broker.host, broker.port, keepalive=broker.keepalive_s, clean_start=False,
                                  properties=props)
        self.client.loop_start()

    def run(self) -> None:
        """Commit loop: runs until ``stop()``; always leaves the landing zone closed."""
        self.start()
        cfg = self.settings.ingest
        try:
            while not self.stopping.is_set():
                batch = self._collect(cfg.commit_max_messages, cfg.commit_interval_ms / 1000)
                if batch:
                    self._commit(batch)
                    self._last_message = time.monotonic()
                self.landing.roll_if_due()
                self.rejected.roll_if_due()
                if self.retiring and self._drained():
                    log.info("ingest retired worker=%d client_id=%s: its session's backlog is landed, "
                             "session deleted", self.worker, self.client_id)
                    self.retired = True
                    break
            # Commit what paho already handed over; anything later is redelivered next time.
            pending = self._collect(self.settings.ingest.commit_max_messages, 0.0)
            while pending:
                self._commit(pending)
                pending = self._collect(self.settings.ingest.commit_max_messages, 0.0)
        finally:
            self._disconnect()
            self.client.loop_stop()
            self.landing.close()
            self.rejected.close()
            self.marker.close()
            self.feed.close()
            self._write_figures(force=True)
            log.info("ingest stopped %s", " ".join(f"{k}={v}" for k, v in self.counters.items()))

    def stop(self) -> None:
        self.stopping.set()

    def _drained(self) -> bool:
        """A retiring worker is done once subscribed-away and idle for ``retire_idle_s``."""
        return (self._unsubscribed.is_set() and self.inbox.empty()
                and time.monotonic() - self._last_message >= self.settings.ingest.retire_idle_s)

    def _disconnect(self) -> None:
        """Disconnect; a retired worker also ends its session, so the broker stops queuing for it."""
        if not self.retired:
            self.client.disconnect()
            return
        props = Properties(PacketTypes.DISCONNECT)
        props.SessionExpiryInterval = 0
        self.client.disconnect(properties=props)

    def _collect(self, limit: int, linger_s: float) -> list[Received]:
        try:
            first = self.inbox.get(timeout=0.2) if linger_s > 0 else self.inbox.get_nowait()
        except queue.Empty:
            return []
        batch = [first]
        deadline = time.monotonic() + linger_s
        while len(batch) < limit:
            remaining = deadline - time.monotonic()
            try:
                batch.append(self.inbox.get(timeout=remaining) if remaining > 0 else self.inbox.get_nowait())
            except queue.Empty:
                break
        return batch

    def _commit(self, batch: list[Received]) -> None:
        """Make a group of messages durable, then acknowledge them all."""
        began = time.monotonic()
        events = [m for m in batch if m.topic.endswith("/events")]
        others = [m for m in batch if not m.topic.endswith("/events")]
        for msg in events:
            self._handle(None, msg)
        if others:
            with transaction(self.db) as conn:
                for msg in others:
                    self._handle(conn, msg)
        self.marker.clear()
        self.landing.sync()
        self.rejected.sync()
        for msg in batch:
            if msg.qos > 0:
                self.client.ack(msg.mid, msg.qos)
        if any(e.get("kind") == "match" for e in self._landed):
            self._landed_failpoint.tick()
        self._acknowledge_landed(events)
        self._feed_landed()
        self.counters["commits"] += 1
        self.figures.commit_seconds += time.monotonic() - began
        log.debug("ingest commit messages=%d", len(batch))
        self._write_figures()

    def _write_figures(self, force: bool = False) -> None:
        """This worker's row of ingest_workers, at most every WRITE_INTERVAL_S; its failure stops nothing."""
        now = time.monotonic()
        if not force and now < self._figures_due:
            return
        self._figures_due = now + ingest_figures.WRITE_INTERVAL_S
        self.figures.updated_ms = clock.now_ms()
        try:
            ingest_figures.write(self.db.conn, self.figures)
        except sqlite3.Error as exc:
            if self._reject_log.allow("figures"):
                log.warning("ingest figures not written error=%r suppressed_since_last=%d", str(exc),
                            self._reject_log.take_suppressed("figures"))

    def _acknowledge_landed(self, events: list[Received]) -> None:
        """Tell each gateway the keys of its messages of this group (all durable now)."""
        keys: dict[str, list[str]] = {}
        for msg in events:
            if msg.key is not None:
                try:
                    keys.setdefault(topics.landed_topic(topics.gateway_from_topic(msg.topic)), []).append(msg.key)
                except topics.TopicError:
                    pass
        for topic, landed in keys.items():
            for payload in encode_landed(landed):
                self.client.publish(topic, payload, qos=1)
                self.counters["landed_acks"] += 1

    def _handle(self, conn: Any, msg: Received) -> None:
        """Store one message, or quarantine it: nothing about one message may stop ingest.

        Status and ack writes run in a savepoint of the group's transaction, so a
        message that fails halfway leaves no row behind.
        """
        strikes = self.marker.strikes(msg.sha256)
        if strikes >= STRIKES_TO_QUARANTINE:
            self._reject(msg, f"ingest died {strikes} times while handling this message; not decoded again",
                         ingest_figures.CRASH_SUSPECT)
            self.marker.resolve(msg.sha256)
            return
        if msg.oversized:
            self._reject(msg, f"payload of {msg.size} bytes (at most {self._size_limit(msg.payload)})",
                         ingest_figures.OVERSIZED)
            return
        self.marker.mark(msg.sha256)
        if self._payload_failpoint and self._payload_failpoint in msg.payload:
            failpoints.crash("ingest_payload")
        if conn is not None:
            conn.execute("SAVEPOINT message")
        try:
            self._store(conn, msg)
        except Exception as exc:   # quarantine, whatever it was: a redelivery would fail the same way
            if conn is not None:
                conn.execute("ROLLBACK TO message")
            kind = next((reason for error, reason in _REJECT_REASONS if isinstance(exc, error)), None)
            self._reject(msg, str(exc) if kind else f"unexpected {type(exc).__name__} while decoding: {exc}",
                         kind or ingest_figures.UNEXPECTED)
        finally:
            if conn is not None:
                conn.execute("RELEASE message")
        if strikes:
            self.marker.resolve(msg.sha256)    # it survived this time: no longer a suspect

    def _store(self, conn: Any, msg: Received) -> None:
        limits = self.limits
        gateway = topics.gateway_from_topic(msg.topic)
        kind = topics.topic_kind(msg.topic)
        if kind == "events":
            if is_batch(msg.payload):
                self._store_batch(msg, gateway)
            else:
                self._land(_checked(decode_event(msg.payload, limits), gateway, msg.topic), msg)
        elif kind == "status":
            status = parse_status(msg.payload, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
            if status.get("gateway") not in (None, gateway):
                raise StatusError(f"status for gateway {str(status['gateway'])[:60]!r} published on {msg.topic}")
            if record_status(conn, gateway, status, msg.received_ms, retained=msg.retain):
                self.counters["status"] += 1
        elif kind == "config/ack":
            ack = parse_ack(msg.payload, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
            if ack.get("gateway") not in (None, gateway):
                raise AckError(f"ack for gateway {ack.get('gateway')!r} published on {msg.topic}")
            record_ack(conn, gateway, ack, msg.received_ms)
            self.counters["acks"] += 1

    def _size_limit(self, payload: bytes) -> int:
        """The largest payload of this form ingest reads: a batch has a limit of its own."""
        return self.limits.max_batch_bytes if is_batch(payload) else self.limits.max_bytes

    def _land(self, event: dict[str, Any], msg: Received) -> None:
        event["ingestTime"] = msg.received_ms
        self.landing.append(event, msg.received_ms)
        self._landed.append(event)
        self.counters["events"] += 1

    def _store_batch(self, msg: Received, gateway: str) -> None:
        """Land a batch's events in order. A batch that cannot be read raises (the caller
        quarantines it whole, nothing of it landed); an event of it that fails the checks of a
        single event is quarantined alone, with the reason and its place in the batch, and the
        others land: they were sent, and are valid, independently of it."""
        raw = decode_batch(msg.payload, self.limits)
        checked: list[dict[str, Any] | EventError] = []
        for event in raw:
            try:
                checked.append(_checked(check_event(event, self.limits), gateway, msg.topic))
            except EventError as exc:
                checked.append(exc)
        self.counters["batches"] += 1
        for i, (event, outcome) in enumerate(zip(raw, checked)):
            if isinstance(outcome, EventError):
                self._reject(msg, f"{outcome} (event {i + 1} of {len(raw)} of a batch)", ingest_figures.INVALID_EVENT,
                             payload=encode_event(event),
                             batch={"sha256": msg.sha256, "bytes": msg.size, "index": i, "events": len(raw)})
            else:
                self._land(outcome, msg)

    def _feed_landed(self) -> None:
        """Show the group's events (durable now) in the live feed; its failure stops nothing."""
        landed, self._landed = self._landed, []
        try:
            self.feed.append(landed)
        except sqlite3.Error as exc:
            self.counters["feed_errors"] += 1
            if self._reject_log.allow("live feed"):
                log.error("ingest live feed not written events=%d error=%r feed_errors=%d suppressed_since_last=%d",
                          len(landed), str(exc), self.counters["feed_errors"],
                          self._reject_log.take_suppressed("live feed"))

    def _reject(self, msg: Received, reason: str, kind: str, *, payload: bytes | None = None,
                batch: dict[str, Any] | None = None) -> None:
        """Keep the message (or its first bytes) with the reason in the rejected files and count it
        under ``kind`` (ingest_figures.REJECT_REASONS); ``payload`` and ``batch``: one event of a
        batch instead, and where in which batch it was."""
        self.counters["rejected"] += 1
        self.figures.rejected[kind] = self.figures.rejected.get(kind, 0) + 1
        size, sha256 = msg.size, msg.sha256
        if payload is not None:
            size, sha256 = len(payload), hashlib.sha256(payload).hexdigest()
        key = reason.split(":", 1)[0][:60]
        if self._reject_log.allow(key):
            log.warning("ingest rejected topic=%s bytes=%d sha256=%s reason=%r rejected_total=%d "
                        "suppressed_since_last=%d", msg.topic[:200], size, sha256, reason[:300],
                        self.counters["rejected"], self._reject_log.take_suppressed(key))
        sample = (msg.payload if payload is None else payload)[:self.settings.ingest.rejected_keep_bytes]
        record: dict[str, Any] = {"topic": msg.topic, "reason": reason, "ingestTime": msg.received_ms,
                                  "bytes": size, "sha256": sha256, "truncated": len(sample) < size}
        if batch is not None:
            record["batch"] = batch
        try:
            record["payload"] = sample.decode("utf-8")
        except UnicodeDecodeError:
            record["payloadBase64"] = base64.b64encode(sample).decode("ascii")
        self.rejected.append(record, msg.received_ms)


# The messages a decoder refuses for a reason it names, by the reason they are counted under.
_REJECT_REASONS = ((EventError, ingest_figures.INVALID_EVENT), (StatusError, ingest_figures.INVALID_STATUS),
                   (AckError, ingest_figures.INVALID_ACK), (topics.TopicError, ingest_figures.INVALID_TOPIC))


def _checked(event: dict[str, Any], gateway: str, topic: str) -> dict[str, Any]:
    """``event``, if it is the gateway's whose topic it came on."""
    if event["gateway"] != gateway:
        raise EventError(f"event for gateway {event['gateway']!r} published on {topic}")
    return event


def run_ingest(settings: CloudSettings, worker: int = 0, *, retiring: bool = False) -> int:
    """``edgewave-cloud ingest [--worker N] [--retire]``: run until SIGTERM or SIGINT (or, retiring, drained)."""
    ingest = Ingest(settings, worker, retiring=retiring)
    stop_on_signals(log, "ingest", ingest.stop)
    ingest.run()
    return 0
