"""One MQTT 5 connection (paho-mqtt 2.x) that keeps itself connected.

paho's socket is run by the agent's ``NetworkLoop`` (one thread for every link, see
network_loop.py), not by a paho thread of its own; this class adds what a gateway needs
around it: credentials and TLS from the YAML, a persistent session where asked
(clean_start=False plus a session expiry, so retained config and queued messages survive
an outage), subscriptions renewed on every connect, a Last Will, and reconnect delays
that grow exponentially with full jitter (a fleet of gateways that lost the same broker
must not come back in lock-step).

The ``on_*`` callbacks (constructor arguments, or attributes set before ``start``) run on
the loop thread. ``publish`` may be called from any thread; a thread holding a lock the
loop thread may wait for must use ``publish_soon``.

With ``ack_after_handling`` (a persistent session), a QoS 1/2 message is acknowledged
only when its handler says it is safe, by calling the ``ack`` it was given, from any
thread: until then the broker keeps it and delivers it again after a crash. paho would
otherwise acknowledge it as soon as ``on_message`` returns, which for a message the
application only queued is too early.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from functools import partial
from typing import Callable

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.agent.network_loop import NetworkLoop
from edgewave.shared.broker import ReconnectSettings, SessionBrokerSettings
from edgewave.shared.mqtt_client import CorrelationData, Will, new_client, send_at_once

__all__ = ["Ack", "Backoff", "MessageHandler", "MqttLink", "Will"]

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


Ack = Callable[[], None]
# topic, payload, retained, and the message's ack: None unless the link acknowledges after
# handling and the message has QoS 1 or 2; then the handler must call it exactly once.
MessageHandler = Callable[[str, bytes, bool, "Ack | None"], None]


class MqttLink:
    """A named, self-healing MQTT connection to one broker."""

    def __init__(self, name: str, broker: SessionBrokerSettings, reconnect: ReconnectSettings, *,
                 client_id: str, persistent: bool = False, will: Will | None = None,
                 subscriptions: list[tuple[str, int]] | None = None,
                 on_message: MessageHandler | None = None,
                 on_connected: Callable[[bool], None] | None = None,
                 on_disconnected: Callable[[], None] | None = None,
                 on_published: Callable[[int, int], None] | None = None,
                 max_inflight: int = 100, loop: NetworkLoop | None = None,
                 ack_after_handling: bool = False, receive_maximum: int | None = None) -> None:
        self.name = name
        self.broker = broker
        self.persistent = persistent
        self.ack_after_handling = ack_after_handling
        self.receive_maximum = receive_maximum     # MQTT 5: unacknowledged messages we accept
        self._ready_acks: deque[tuple[int, int, int]] = deque()   # (connection, mid, qos)
        self.subscriptions = list(subscriptions or [])
        self.connected = threading.Event()
        self.on_message = on_message
        self.on_connected = on_connected
        self.on_disconnected = on_disconnected
        self.on_published = on_published
        self._backoff = Backoff(reconnect.min_delay_s, reconnect.max_delay_s)
        self.loop = loop or NetworkLoop(f"mqtt-{name}")
        self._started = False
        self._next_attempt: float | None = None    # monotonic time of the next connect attempt
        self._attempting = False                    # a connect attempt runs on its own thread
        self.connects = 0
        self.acknowledged = 0        # messages whose acknowledgement went to the broker (manual acks)

        client = new_client(broker, client_id, manual_ack=ack_after_handling, will=will, max_inflight=max_inflight)
        client.on_connect = self._handle_connect
        client.on_disconnect = self._handle_disconnect
        client.on_message = self._handle_message
        client.on_publish = self._handle_publish
        client.on_subscribe = self._handle_subscribe
        client.on_unsubscribe = self._handle_unsubscribe
        self.client = client

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background; returns at once, connection state is in ``connected``."""
        properties = None
        if self.persistent or self.receive_maximum:
            properties = Properties(PacketTypes.CONNECT)
        if self.persistent:
            properties.SessionExpiryInterval = int(self.broker.session_expiry_s)
        if self.receive_maximum:
            properties.ReceiveMaximum = max(1, min(65535, int(self.receive_maximum)))
        log.info("mqtt link=%s event=connecting host=%s port=%s persistent=%s tls=%s",
                 self.name, self.broker.host, self.broker.port, self.persistent, self.broker.tls.enabled)
        self.client.connect_async(self.broker.host, self.broker.port, keepalive=self.broker.keepalive_s,
                                  clean_start=not self.persistent, properties=properties)
        self._started = True
        self._next_attempt = 0.0
        self.loop.add(self)

    def stop(self, timeout: float = 2.0) -> None:
        """Disconnect cleanly (no Last Will) and leave the loop."""
        if not self._started:
            return

        def disconnect() -> None:
            self._started = False
            self._next_attempt = None
            if self.client.socket() is not None and not self._attempting:
                self.client.disconnect()    # written at once; the broker then closes the socket

        self.loop.call(disconnect)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.loop.call(self.client.socket) is not None:
            time.sleep(0.01)
        sock = self.loop.call(self.client.socket)
        self.loop.remove(self)
        if sock is not None:
            sock.close()
        self.connected.clear()
        log.info("mqtt link=%s event=stopped", self.name)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False,
                properties: Properties | CorrelationData | None = None) -> mqtt.MQTTMessageInfo:
        """Publish (on the loop thread, waiting for it when called from another one)."""
        return self.loop.call(partial(self._publish_here, topic, payload, qos, retain, properties))

    def publish_soon(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        """Publish without waiting: for threads that hold a lock the loop thread may need."""
        self.loop.call_soon(partial(self._publish_here, topic, payload, qos, retain))

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the thread that runs this link's socket, and return its result."""
        return self.loop.call(fn)

    def on_loop_thread(self) -> bool:
        """True on the thread that runs this link's socket (a publish there is written at once)."""
        return self.loop.in_loop()

    def wait_connected(self, timeout: float) -> bool:
        return self.connected.wait(timeout)

    def _publish_here(self, topic: str, payload: bytes, qos: int, retain: bool,
                      properties: Properties | CorrelationData | None = None) -> mqtt.MQTTMessageInfo:
        if self._attempting:
            # paho is being reconnected on the connect thread; the caller's data stays where
            # it came from (outbox, next status) and is published after the reconnect.
            raise ConnectionError(f"mqtt link {self.name} is reconnecting")
        return self.client.publish(topic, payload, qos=qos, retain=retain, properties=properties)

    # -- called by the loop (its thread) ---------------------------------------------------
    def due(self, now: float) -> float | None:
        """When to try connecting next; None while connected, attempting or stopped."""
        return self._next_attempt if self._started and not self._attempting else None

    def begin_connect(self) -> Callable[[], BaseException | None] | None:
        """The blocking connect attempt, for the loop to run on a thread of its own."""
        if not self._started:
            return None
        self._next_attempt = None
        self._attempting = True
        client = self.client

        def attempt() -> BaseException | None:
            try:
                rc = client.reconnect()     # TCP connect, TLS handshake, CONNECT sent
            except Exception as exc:        # refused, unreachable, TLS or DNS failure
                return exc
            if rc != mqtt.MQTT_ERR_SUCCESS:
                return ConnectionError(mqtt.error_string(rc))
            return None

        return attempt

    def connect_finished(self, error: BaseException | None) -> None:
        self._attempting = False
        if not self._started:
            sock = self.client.socket()
            if sock is not None:
                sock.close()
            return
        if error is not None:
            delay = self._retry_later()
            log.warning("mqtt link=%s event=connect_failed host=%s port=%s attempt=%d error=%r retry_in_s=%.1f",
                        self.name, self.broker.host, self.broker.port, self._backoff.attempt, str(error), delay)
        elif self.client.socket() is None and self._next_attempt is None:
            self._retry_later()             # lost while connecting: paho already said why

    def _retry_later(self) -> float:
        delay = self._backoff.next_delay()
        self._next_attempt = time.monotonic() + delay
        return delay

    def set_subscriptions(self, subscriptions: list[tuple[str, int]]) -> None:
        """Subscribe to these (topic filter, QoS) from now on, dropping the others; any thread.

        Renewed on every connect as before; when connected, the difference is sent at once
        (a persistent session keeps a removed filter's subscription until it is unsubscribed)."""
        wanted = list(subscriptions)

        def change() -> None:
            old = dict(self.subscriptions)
            self.subscriptions = wanted
            if not self.connected.is_set():
                return
            gone = [topic for topic in old if topic not in dict(wanted)]
            if gone:
                self.client.unsubscribe(gone)
                log.info("mqtt link=%s event=unsubscribing topics=%s", self.name, ",".join(gone))
            for topic, qos in wanted:
                if old.get(topic) != qos:
                    self.client.subscribe(topic, qos=qos)

        if self.loop.in_loop():
            change()
        else:
            self.loop.call_soon(change)

    def drop_unacknowledged(self) -> int:
        """Forget the QoS 1/2 messages paho holds unacknowledged, so it does not publish them
        again after a reconnect (for a caller that re-sends them itself); how many there were."""
        return len(self.client.drop_out_messages())

    # -- paho callbacks (the loop thread) --------------------------------------------------
    def _handle_connect(self, client, userdata, flags, reason_code, properties) -> None:  # noqa: ANN001
        if reason_code.is_failure:
            # paho closes the socket next and reports the disconnect, which schedules the retry
            log.warning("mqtt link=%s event=refused reason=%s", self.name, reason_code)
            return
        self._backoff.reset()
        send_at_once(client)
        self.connects += 1
        session = bool(getattr(flags, "session_present", False))
        log.info("mqtt link=%s event=connected session_present=%s", self.name, session)
        for topic, qos in self.subscriptions:
            client.subscribe(topic, qos=qos)
        self.connected.set()
        if self.on_connected:
            self.on_connected(session)

    def _handle_disconnect(self, client, userdata, flags, reason_code, properties) -> None:  # noqa: ANN001
        was = self.connected.is_set()
        self.connected.clear()
        if self._started and self._next_attempt is None:
            delay = self._retry_later()
            if was:
                log.warning("mqtt link=%s event=disconnected reason=%s retry_in_s=%.1f", self.name,
                            reason_code, delay)
        if self.on_disconnected:
            self.on_disconnected()

    def _handle_message(self, client, userdata, message) -> None:  # noqa: ANN001
        if self.on_message:
            ack = None
            if self.ack_after_handling and message.qos:
                ack = partial(self._acknowledge, self.connects, message.mid, message.qos)
            self.on_message(message.topic, message.payload, bool(message.retain), ack)

    # -- acknowledgements after handling (any thread) ------------------------------------------
    def _acknowledge(self, connection: int, mid: int, qos: int) -> None:
        """A message is handled: acknowledge it. Acks leave in the order handlers call this,
        which the agent keeps equal to the order messages arrived (MQTT asks for that)."""
        self._ready_acks.append((connection, mid, qos))
        if self.loop.in_loop():
            self._send_acks()
        else:
            self.loop.call_soon(self._send_acks)

    def _send_acks(self) -> None:
        ready = self._ready_acks
        while ready:
            connection, mid, qos = ready.popleft()
            # A message of an earlier connection is not acknowledged on this one: the broker
            # delivers it again (DUP) after the reconnect, and it is handled again.
            if connection == self.connects and self.connected.is_set():
                self.client.ack(mid, qos)
                self.acknowledged += 1

    def _handle_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:  # noqa: ANN001
        failed = [str(rc) for rc in reason_codes if rc.is_failure]
        if failed:
            log.error("mqtt link=%s event=subscribe_refused reasons=%s", self.name, ",".join(failed))
        else:
            log.info("mqtt link=%s event=subscribed topics=%s", self.name,
                     ",".join(t for t, _ in self.subscriptions))

    def _handle_unsubscribe(self, client, userdata, mid, reason_codes, properties) -> None:  # noqa: ANN001
        log.info("mqtt link=%s event=unsubscribed still_subscribed=%s", self.name,
                 ",".join(t for t, _ in self.subscriptions))

    def _handle_publish(self, client, userdata, mid, reason_code, properties) -> None:  # noqa: ANN001
        if self.on_published:
            self.on_published(mid, int(getattr(reason_code, "value", reason_code) or 0))
