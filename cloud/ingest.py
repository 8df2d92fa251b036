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

One bad message never stops ingest. Every payload is read within limits
(``ingest.limits``: size, nesting depth, triples and bindings per event) that a
JSON bomb cannot pass, and whatever goes wrong while one message is decoded,
validated or recorded (not an event, beyond a limit, an event claiming another
gateway's topic, a malformed ack, or an error nobody foresaw) quarantines that
message: it is kept in ``<landing_zone>/rejected/`` with the reason (above
``rejected_keep_bytes`` only its first bytes, its size and its SHA-256),
counted, logged (at most once a minute per reason) and acknowledged. It will
not get better by redelivery.

Should the process die on a message all the same (a crash in C code, the
kernel's OOM killer), the broker would redeliver it into a crash loop. So before
each message is handled, its SHA-256 goes into a small in-flight marker file
(one write, no fsync: it must survive the process, not the machine). On start,
a marker left behind names the message that was being handled when the process
died. A message that was in flight at two deaths is quarantined on its next
delivery without being decoded again; one death alone could be a coincidence
(a kill, a power cut), so that message is tried once more.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import queue
import signal
import sqlite3
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.shared import topics
from edgewave.shared.events import EventError, decode_event
from edgewave.shared.log_limit import LogLimiter

from .database import open_database, transaction
from .landing import LandingZone
from .live_feed import LiveFeedWriter
from .registry import (AckError, StatusError, ensure_registry_schema, parse_ack, parse_status, record_ack,
                       record_status)
from .settings import BrokerSettings, CloudSettings

log = logging.getLogger(__name__)



def subscriptions(worker: int, share_group: str) -> list[str]:
    """What one ingest worker subscribes to.

    Events go through an MQTT 5 shared subscription, so the broker hands each
    event to one worker of the group and adding a worker adds capacity. Status
    messages and config acks (few, retained status included, which a shared
    subscription would not deliver) go to worker 0 alone, the one writer of the
    registry.
    """
    events = f"$share/{share_group}/{topics.ALL_EVENTS}"
    return [events, topics.ALL_STATUS, topics.ALL_CONFIG_ACKS] if worker == 0 else [events]


class WorkerRoster:
    """How many ingest workers have sessions on the broker, kept in ``<landing_zone>/ingest-workers.json``.

    Each worker's persistent session belongs to the shared subscription, so the
    broker keeps handing it its share of the events while it is stopped. When
    ``run`` starts fewer workers than before, the others must retire: land what
    their sessions hold and end them, or their share would wait there until the
    session expires.
    """

    def __init__(self, landing_zone: str | Path) -> None:
        self.path = Path(landing_zone) / "ingest-workers.json"

    def count(self) -> int:
        try:
            return max(1, int(json.loads(self.path.read_text())["workers"]))
        except (OSError, ValueError, KeyError, TypeError):
            return 1

    def start(self, workers: int) -> list[int]:
        """Record ``workers`` starting; returns the workers of an earlier run that must retire."""
        before = self.count()
        self._write(max(before, workers))
        return list(range(workers, before))

    def retired(self, workers: int) -> None:
        """Every retiring worker has ended its session: only ``workers`` remain."""
        self._write(workers)
        log.info("ingest workers=%d recorded", workers)

    def _write(self, workers: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"workers": workers}))
        os.replace(tmp, self.path)


def worker_client_id(client_id: str, worker: int) -> str:
    """Worker 0 keeps the configured id (and so an existing session's queue); worker i adds ``-i``."""
    return client_id if worker == 0 else f"{client_id}-{worker}"


STRIKES_TO_QUARANTINE = 2     # deaths with a message in flight before it is quarantined unread
MAX_SUSPECTS = 100


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


class InFlightMarker:
    """The digest of the message being handled, in a file that outlives the process.

    ``suspects`` maps the digest of a message that was in flight when an earlier
    ingest process died to how many deaths it was in flight at (kept in
    ``<marker>.suspects`` until that message comes again).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.suspects_path = path.with_name(path.name + ".suspects")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.suspects: dict[str, int] = {}
        if self.suspects_path.exists():
            try:
                loaded = json.loads(self.suspects_path.read_text())
                self.suspects = {str(k): int(v) for k, v in loaded.items()}
            except (ValueError, TypeError, AttributeError):
                log.warning("ingest in-flight suspects file unreadable path=%s action=ignored", self.suspects_path)
        left = path.read_text(errors="replace").split() if path.exists() else []
        if left:
            digest = left[0]
            self.suspects[digest] = self.suspects.get(digest, 0) + 1
            log.warning("ingest died while handling a message sha256=%s deaths_in_flight=%d action=%s", digest,
                        self.suspects[digest], "quarantine on redelivery"
                        if self.suspects[digest] >= STRIKES_TO_QUARANTINE else "retry once more")
            self._save_suspects()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.clear()

    def strikes(self, digest: str) -> int:
        return self.suspects.get(digest, 0)

    def mark(self, digest: str) -> None:
        """This message is being handled now."""
        os.pwrite(self._fd, digest.encode("ascii") + b"\n", 0)

    def clear(self) -> None:
        """No message is being handled."""
        os.pwrite(self._fd, b" " * 65, 0)

    def resolve(self, digest: str) -> None:
        """A suspect came again and was handled (stored or quarantined): forget it."""
        if self.suspects.pop(digest, None) is not None:
            self._save_suspects()

    def _save_suspects(self) -> None:
        while len(self.suspects) > MAX_SUSPECTS:
            del self.suspects[next(iter(self.suspects))]
        tmp = self.suspects_path.with_name(self.suspects_path.name + ".tmp")
        tmp.write_text(json.dumps(self.suspects))
        os.replace(tmp, self.suspects_path)

    def close(self) -> None:
        self.clear()
        os.close(self._fd)


def mqtt_client(broker: BrokerSettings, client_id: str, *, manual_ack: bool = False) -> mqtt.Client:
    """A paho 2.x MQTT 5 client configured from cloud.yaml (credentials, TLS)."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv5, manual_ack=manual_ack)
    if broker.username:
        client.username_pw_set(broker.username, broker.password)
    if broker.tls_ca or broker.tls_cert:
        client.tls_set(ca_certs=broker.tls_ca, certfile=broker.tls_cert, keyfile=broker.tls_key,
                       tls_version=ssl.PROTOCOL_TLS_CLIENT)
    return client


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
        self.limits = cfg.limits
        self.marker = InFlightMarker(Path(settings.landing_zone) / f"{self.client_id}.inflight")
        self.inbox: queue.Queue[Received] = queue.Queue()
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self.feed = LiveFeedWriter(settings.live_feed_path, settings.live_feed.max_rows)
        self._landed: list[dict[str, Any]] = []     # this group's events, for the live feed
        self.counters = {"events": 0, "status": 0, "acks": 0, "rejected": 0, "commits": 0, "feed_errors": 0}
        self._reject_log = LogLimiter(period_s=60.0)
        self._failpoint = _payload_failpoint()
        self.client = mqtt_client(settings.broker, self.client_id, manual_ack=True)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(min_delay=1, max_delay=30)

    # -- paho's thread: hand over only ---------------------------------------------------

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                    properties: Any) -> None:
        if reason_code.is_failure:
            log.error("ingest connect refused reason=%s", reason_code)
            return
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
        oversized = len(payload) > self.limits.max_bytes
        received = Received(msg.topic, payload[:self.settings.ingest.rejected_keep_bytes] if oversized else payload,
                            msg.qos, msg.mid, bool(msg.retain), int(time.time() * 1000), len(payload),
                            hashlib.sha256(payload).hexdigest(), oversized)
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
        self._feed_landed()
        self.counters["commits"] += 1
        log.debug("ingest commit messages=%d", len(batch))

    def _handle(self, conn: Any, msg: Received) -> None:
        """Store one message, or quarantine it: nothing about one message may stop ingest.

        Status and ack writes run in a savepoint of the group's transaction, so a
        message that fails halfway leaves no row behind.
        """
        strikes = self.marker.strikes(msg.sha256)
        if strikes >= STRIKES_TO_QUARANTINE:
            self._reject(msg, f"ingest died {strikes} times while handling this message; not decoded again")
            self.marker.resolve(msg.sha256)
            return
        if msg.oversized:
            self._reject(msg, f"payload of {msg.size} bytes (at most {self.limits.max_bytes})")
            return
        self.marker.mark(msg.sha256)
        if self._failpoint and self._failpoint in msg.payload:
            _die("ingest_payload")
        if conn is not None:
            conn.execute("SAVEPOINT message")
        try:
            self._store(conn, msg)
        except Exception as exc:   # quarantine, whatever it was: a redelivery would fail the same way
            if conn is not None:
                conn.execute("ROLLBACK TO message")
            known = isinstance(exc, (EventError, AckError, StatusError, topics.TopicError))
            self._reject(msg, str(exc) if known else f"unexpected {type(exc).__name__} while decoding: {exc}")
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
            event = decode_event(msg.payload, limits)
            if event["gateway"] != gateway:
                raise EventError(f"event for gateway {event['gateway']!r} published on {msg.topic}")
            event["ingestTime"] = msg.received_ms
            self.landing.append(event, msg.received_ms)
            self._landed.append(event)
            self.counters["events"] += 1
        elif kind == "status":
            status = parse_status(msg.payload, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
            if record_status(conn, gateway, status, msg.received_ms, retained=msg.retain):
                self.counters["status"] += 1
        elif kind == "config/ack":
            ack = parse_ack(msg.payload, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
            if ack.get("gateway") not in (None, gateway):
                raise AckError(f"ack for gateway {ack.get('gateway')!r} published on {msg.topic}")
            record_ack(conn, gateway, ack, msg.received_ms)
            self.counters["acks"] += 1

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

    def _reject(self, msg: Received, reason: str) -> None:
        """Keep the message (or its first bytes) with the reason in the rejected files."""
        self.counters["rejected"] += 1
        key = reason.split(":", 1)[0][:60]
        if self._reject_log.allow(key):
            log.warning("ingest rejected topic=%s bytes=%d sha256=%s reason=%r rejected_total=%d "
                        "suppressed_since_last=%d", msg.topic[:200], msg.size, msg.sha256, reason[:300],
                        self.counters["rejected"], self._reject_log.take_suppressed(key))
        sample = msg.payload[:self.settings.ingest.rejected_keep_bytes]
        record: dict[str, Any] = {"topic": msg.topic, "reason": reason, "ingestTime": msg.received_ms,
                                  "bytes": msg.size, "sha256": msg.sha256, "truncated": len(sample) < msg.size}
        try:
            record["payload"] = sample.decode("utf-8")
        except UnicodeDecodeError:
            record["payloadBase64"] = base64.b64encode(sample).decode("ascii")
        self.rejected.append(record, msg.received_ms)


def _payload_failpoint() -> bytes | None:
    """Fault injection for the crash tests: EDGEWAVE_CLOUD_FAILPOINT=ingest_payload:<text> kills
    ingest (SIGKILL, as a crash in C code would) when it is about to handle a payload holding <text>."""
    spec = os.environ.get("EDGEWAVE_CLOUD_FAILPOINT", "")
    name, _, text = spec.partition(":")
    return text.encode() if name == "ingest_payload" and text else None


def _die(name: str) -> None:
    log.warning("failpoint %s reached: killing ingest", name)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def run_ingest(settings: CloudSettings, worker: int = 0, *, retiring: bool = False) -> int:
    """``edgewave-cloud ingest [--worker N] [--retire]``: run until SIGTERM or SIGINT (or, retiring, drained)."""
    ingest = Ingest(settings, worker, retiring=retiring)

    def _stop(signum: int, frame: Any) -> None:
        log.info("ingest stopping signal=%d", signum)
        ingest.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ingest.run()
    return 0
