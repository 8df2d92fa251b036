"""One MQTT 5 connection (paho-mqtt 2.x) that keeps itself connected.

paho runs the socket in its own thread (``loop_start``) and reconnects by itself; this
class adds what a gateway needs around it: credentials and TLS from the YAML, a
persistent session where asked (clean_start=False plus a session expiry, so retained
config and queued messages survive an outage), subscriptions renewed on every
connect, a Last Will, and reconnect delays that grow exponentially with full jitter
(a fleet of gateways that lost the same broker must not come back in lock-step).

The ``on_*`` callbacks (constructor arguments, or attributes set before ``start``) run on
paho's thread: they must only hand work over (queue, event), never call into the engine.
"""
from __future__ import annotations

import logging
import random
import ssl
import threading
from dataclasses import dataclass
from typing import Callable

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.agent.config import BrokerSettings, ReconnectSettings

log = logging.getLogger("edgewave.agent.mqtt")


class Backoff:
    """Exponential backoff with full jitter: attempt n waits uniform(min, min(max, min*2^n))."""

    def __init__(self, min_delay: float, max_delay: float, rng: random.Random | None = None) -> None:
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        ceiling = min(self.max_delay, self.min_delay * (2 ** self.attempt))
        self.attempt = min(self.attempt + 1, 32)
        return self._rng.uniform(self.min_delay, ceiling)

    def reset(self) -> None:
        self.attempt = 0


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


MessageHandler = Callable[[str, bytes, bool], None]   # topic, payload, retained


class MqttLink:
    """A named, self-healing MQTT connection to one broker."""

    def __init__(self, name: str, broker: BrokerSettings, reconnect: ReconnectSettings, *,
                 client_id: str, persistent: bool = False, will: Will | None = None,
                 subscriptions: list[tuple[str, int]] | None = None,
                 on_message: MessageHandler | None = None,
                 on_connected: Callable[[bool], None] | None = None,
                 on_disconnected: Callable[[], None] | None = None,
                 on_published: Callable[[int, int], None] | None = None,
                 max_inflight: int = 100) -> None:
        self.name = name
        self.broker = broker
        self.persistent = persistent
        self.subscriptions = list(subscriptions or [])
        self.connected = threading.Event()
        self.on_message = on_message
        self.on_connected = on_connected
        self.on_disconnected = on_disconnected
        self.on_published = on_published
        self._backoff = Backoff(reconnect.min_delay_s, reconnect.max_delay_s)
        self._started = False
        self.connects = 0

        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2,
                             client_id=client_id, protocol=mqtt.MQTTv5)
        if broker.username is not None:
            client.username_pw_set(broker.username, broker.password)
        if broker.tls.enabled:
            client.tls_set(ca_certs=broker.tls.ca, certfile=broker.tls.cert, keyfile=broker.tls.key,
                           cert_reqs=ssl.CERT_REQUIRED)
            if broker.tls.insecure:
                client.tls_insecure_set(True)
        if will is not None:
            client.will_set(will.topic, will.payload, qos=will.qos, retain=will.retain)
        client.max_inflight_messages_set(max_inflight)
        client.max_queued_messages_set(0)
        client.on_connect = self._handle_connect
        client.on_connect_fail = self._handle_connect_fail
        client.on_disconnect = self._handle_disconnect
        client.on_message = self._handle_message
        client.on_publish = self._handle_publish
        client.on_subscribe = self._handle_subscribe
        self.client = client
        self._set_next_delay()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background; returns at once, connection state is in ``connected``."""
        properties = None
        if self.persistent:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = int(self.broker.session_expiry_s)
        log.info("mqtt link=%s event=connecting host=%s port=%s persistent=%s tls=%s",
                 self.name, self.broker.host, self.broker.port, self.persistent, self.broker.tls.enabled)
        self.client.connect_async(self.broker.host, self.broker.port, keepalive=self.broker.keepalive_s,
                                  clean_start=not self.persistent, properties=properties)
        self._started = True
        self.client.loop_start()

    def stop(self) -> None:
        """Disconnect cleanly (no Last Will) and stop paho's thread."""
        if not self._started:
            return
        self._started = False
        try:
            self.client.disconnect()
        except Exception:  # already gone; the loop still has to stop
            pass
        self.client.loop_stop()
        self.connected.clear()
        log.info("mqtt link=%s event=stopped", self.name)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> mqtt.MQTTMessageInfo:
        return self.client.publish(topic, payload, qos=qos, retain=retain)

    def wait_connected(self, timeout: float) -> bool:
        return self.connected.wait(timeout)

    # -- paho callbacks (paho's thread) ----------------------------------------------------
    def _set_next_delay(self, client: mqtt.Client | None = None) -> float:
        # paho doubles from min_delay itself; we hand it our jittered delay as both bounds,
        # which also resets paho's own doubling, so the delay sequence is ours.
        delay = self._backoff.next_delay()
        (client or self.client).reconnect_delay_set(delay, delay)
        return delay

    def _handle_connect(self, client, userdata, flags, reason_code, properties) -> None:  # noqa: ANN001
        if reason_code.is_failure:
            delay = self._set_next_delay(client)
            log.warning("mqtt link=%s event=refused reason=%s retry_in_s=%.1f", self.name, reason_code, delay)
            return
        self._backoff.reset()
        self._set_next_delay(client)
        self.connects += 1
        session = bool(getattr(flags, "session_present", False))
        log.info("mqtt link=%s event=connected session_present=%s", self.name, session)
        for topic, qos in self.subscriptions:
            client.subscribe(topic, qos=qos)
        self.connected.set()
        if self.on_connected:
            self.on_connected(session)

    def _handle_connect_fail(self, client, userdata) -> None:  # noqa: ANN001
        delay = self._set_next_delay(client)
        log.warning("mqtt link=%s event=connect_failed host=%s port=%s attempt=%d retry_in_s=%.1f", self.name,
                    self.broker.host, self.broker.port, self._backoff.attempt, delay)

    def _handle_disconnect(self, client, userdata, flags, reason_code, properties) -> None:  # noqa: ANN001
        was = self.connected.is_set()
        self.connected.clear()
        self._set_next_delay(client)
        if was and self._started:
            log.warning("mqtt link=%s event=disconnected reason=%s", self.name, reason_code)
        if self.on_disconnected:
            self.on_disconnected()

    def _handle_message(self, client, userdata, message) -> None:  # noqa: ANN001
        if self.on_message:
            self.on_message(message.topic, message.payload, bool(message.retain))

    def _handle_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:  # noqa: ANN001
        failed = [str(rc) for rc in reason_codes if rc.is_failure]
        if failed:
            log.error("mqtt link=%s event=subscribe_refused reasons=%s", self.name, ",".join(failed))
        else:
            log.info("mqtt link=%s event=subscribed topics=%s", self.name,
                     ",".join(t for t, _ in self.subscriptions))

    def _handle_publish(self, client, userdata, mid, reason_code, properties) -> None:  # noqa: ANN001
        if self.on_published:
            self.on_published(mid, int(getattr(reason_code, "value", reason_code) or 0))
