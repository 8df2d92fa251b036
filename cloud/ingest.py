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

Bad input (not an event, an event claiming another gateway's topic, a
malformed ack) is logged, counted, kept in ``<landing_zone>/rejected/`` with
the reason, and acknowledged: it will not get better by redelivery.
"""
from __future__ import annotations

import base64
import logging
import queue
import signal
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.shared import topics
from edgewave.shared.events import EventError, decode_event

from .database import open_database, transaction
from .landing import LandingZone
from .registry import AckError, ensure_registry_schema, parse_ack, record_ack, record_status
from .settings import BrokerSettings, CloudSettings

log = logging.getLogger(__name__)

SUBSCRIPTIONS = (topics.ALL_EVENTS, topics.ALL_STATUS, topics.ALL_CONFIG_ACKS)


@dataclass
class Received:
    """A message handed from paho's thread to the committing thread."""

    topic: str
    payload: bytes
    qos: int
    mid: int
    retain: bool
    received_ms: int


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

    def __init__(self, settings: CloudSettings) -> None:
        self.settings = settings
        cfg = settings.ingest
        self.landing = LandingZone(settings.events_dir, roll_bytes=cfg.roll_bytes, roll_seconds=cfg.roll_seconds)
        self.rejected = LandingZone(settings.rejected_dir, roll_bytes=cfg.roll_bytes, roll_seconds=cfg.roll_seconds)
        self.db = open_database(settings.database)
        ensure_registry_schema(self.db)
        self.inbox: queue.Queue[Received] = queue.Queue()
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self.counters = {"events": 0, "status": 0, "acks": 0, "rejected": 0, "commits": 0}
        self.client = mqtt_client(settings.broker, cfg.client_id, manual_ack=True)
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
        log.info("ingest connected broker=%s:%d session_present=%s", self.settings.broker.host,
                 self.settings.broker.port, flags.session_present)
        client.subscribe([(t, 1) for t in SUBSCRIPTIONS])
        self.connected.set()

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason_code: Any,
                       properties: Any) -> None:
        self.connected.clear()
        if not self.stopping.is_set():
            log.warning("ingest disconnected reason=%s; reconnecting", reason_code)

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        self.inbox.put(Received(msg.topic, msg.payload, msg.qos, msg.mid, bool(msg.retain),
                                int(time.time() * 1000)))

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
                self.landing.roll_if_due()
                self.rejected.roll_if_due()
            # Commit what paho already handed over; anything later is redelivered next time.
            pending = self._collect(self.settings.ingest.commit_max_messages, 0.0)
            while pending:
                self._commit(pending)
                pending = self._collect(self.settings.ingest.commit_max_messages, 0.0)
        finally:
            self.client.disconnect()
            self.client.loop_stop()
            self.landing.close()
            self.rejected.close()
            log.info("ingest stopped %s", " ".join(f"{k}={v}" for k, v in self.counters.items()))

    def stop(self) -> None:
        self.stopping.set()

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
            self._store(None, msg)
        if others:
            with transaction(self.db) as conn:
                for msg in others:
                    self._store(conn, msg)
        self.landing.sync()
        self.rejected.sync()
        for msg in batch:
            if msg.qos > 0:
                self.client.ack(msg.mid, msg.qos)
        self.counters["commits"] += 1
        log.debug("ingest commit messages=%d", len(batch))

    def _store(self, conn: Any, msg: Received) -> None:
        try:
            gateway = topics.gateway_from_topic(msg.topic)
            kind = topics.topic_kind(msg.topic)
            if kind == "events":
                event = decode_event(msg.payload)
                if event["gateway"] != gateway:
                    raise EventError(f"event for gateway {event['gateway']!r} published on {msg.topic}")
                record = {k: v for k, v in event.items() if k != "@context"}
                record["ingestTime"] = msg.received_ms
                self.landing.append(record, msg.received_ms)
                self.counters["events"] += 1
            elif kind == "status":
                if record_status(conn, gateway, msg.payload, msg.received_ms, retained=msg.retain):
                    self.counters["status"] += 1
            elif kind == "config/ack":
                ack = parse_ack(msg.payload)
                if ack.get("gateway") not in (None, gateway):
                    raise AckError(f"ack for gateway {ack.get('gateway')!r} published on {msg.topic}")
                record_ack(conn, gateway, ack, msg.received_ms)
                self.counters["acks"] += 1
        except (EventError, AckError, topics.TopicError) as exc:
            self._reject(msg, str(exc))

    def _reject(self, msg: Received, reason: str) -> None:
        self.counters["rejected"] += 1
        log.warning("ingest rejected topic=%s bytes=%d reason=%s rejected_total=%d", msg.topic, len(msg.payload),
                    reason, self.counters["rejected"])
        try:
            payload: dict[str, Any] = {"payload": msg.payload.decode("utf-8")}
        except UnicodeDecodeError:
            payload = {"payloadBase64": base64.b64encode(msg.payload).decode("ascii")}
        self.rejected.append({"topic": msg.topic, "reason": reason, "ingestTime": msg.received_ms, **payload},
                             msg.received_ms)


def run_ingest(settings: CloudSettings) -> int:
    """``edgewave-cloud ingest``: run until SIGTERM or SIGINT."""
    ingest = Ingest(settings)

    def _stop(signum: int, frame: Any) -> None:
        log.info("ingest stopping signal=%d", signum)
        ingest.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    ingest.run()
    return 0
