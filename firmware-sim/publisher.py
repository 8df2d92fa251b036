"""Where messages go: a gateway's local MQTT broker, or standard output.

``MqttSink`` keeps one MQTT connection per gateway (the gateway's radio bridge: its
sensors' messages go out in order on one connection), publishing each message on its
sensor's topic. A message that cannot be sent (broker gone) is counted and logged, not
retried: sensor firmware with QoS 0 loses it too; paho reconnects in the background.
"""
from __future__ import annotations

import logging
import socket
import sys
import time
from typing import IO

import paho.mqtt.client as mqtt

from edgewave.shared.mqtt_client import MQTT_V311, new_client

from .config import SensorBrokerSettings
from .fleet import Message
from .recording import message_text

log = logging.getLogger("edgewave.firmware_sim.publisher")


class SinkError(RuntimeError):
    """A sink that cannot start (broker unreachable)."""


class StdoutSink:
    """Writes messages as a recording (header + lines, or a payload line) to a text stream."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout
        self.sent = 0
        self.dropped = 0

    def open(self) -> None:
        pass

    def send(self, message: Message) -> None:
        out = self.out
        out.write(message_text(message))
        out.flush()
        self.sent += 1

    def idle(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        self.out.flush()


class _Connection:
    """One MQTT connection whose network loop runs in the publishing thread.

    No paho network thread: ``publish`` then writes to the socket at once, so a message
    leaves exactly when the pacer says (a network thread would add a thread hand-off per
    message). ``service`` reads acknowledgements, sends keepalives and reconnects.
    """

    def __init__(self, name: str, broker: SensorBrokerSettings, connect_timeout_s: float,
                 nodelay: bool = True) -> None:
        self.name = name
        self.nodelay = nodelay
        self.broker = broker
        self.connected = False
        self.closing = False
        try:
            self.client = new_client(broker, broker.client_id(name), protocol=MQTT_V311, max_inflight=1000)
        except OSError as exc:     # the password file, or TLS files that cannot be read
            raise SinkError(f"cannot set up the MQTT connection for {name}: {exc}") from None
        self.client.on_socket_open = self._on_socket_open
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.last_info: mqtt.MQTTMessageInfo | None = None
        self._retry_at = 0.0
        self._backoff = 1.0
        try:
            self.client.connect(broker.host, broker.port, keepalive=broker.keepalive_s)
        except OSError as exc:
            raise SinkError(f"cannot connect to MQTT broker {broker.host}:{broker.port} for {name}: {exc}") from None
        deadline = time.monotonic() + connect_timeout_s
        while not self.connected and time.monotonic() < deadline:
            self.client.loop(timeout=0.05)
        if not self.connected:
            self.client.disconnect()
            raise SinkError(f"MQTT broker {broker.host}:{broker.port} did not accept {name} "
                            f"within {connect_timeout_s} s")

    def _on_socket_open(self, client, userdata, sock) -> None:
        # Paced messages must leave when published: without TCP_NODELAY, Nagle's algorithm
        # holds one back until the previous is acknowledged (up to 40 ms, delayed ACK). At
        # full speed Nagle is welcome: it packs many messages into one segment.
        if not self.nodelay:
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            pass

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            log.error("mqtt_connect_refused gateway=%s broker=%s:%s reason=%s", self.name, self.broker.host,
                      self.broker.port, reason_code)
            return
        log.info("mqtt_connected gateway=%s broker=%s:%s", self.name, self.broker.host, self.broker.port)
        self.connected = True
        self._backoff = 1.0

    def _on_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        if self.closing:
            log.info("mqtt_closed gateway=%s", self.name)
        elif self.connected:
            log.warning("mqtt_disconnected gateway=%s reason=%s", self.name, reason_code)
        self.connected = False
        self._retry_at = time.monotonic() + self._backoff

    def service(self, timeout_s: float = 0.0) -> None:
        """Run the network loop once (up to ``timeout_s`` waiting for input); reconnect when due."""
        if self.connected:
            self.client.loop(timeout=timeout_s)
            return
        now = time.monotonic()
        if now >= self._retry_at:
            try:
                self.client.reconnect()
                log.info("mqtt_reconnecting gateway=%s broker=%s:%s", self.name, self.broker.host, self.broker.port)
            except OSError as exc:
                self._backoff = min(30.0, self._backoff * 2)
                self._retry_at = now + self._backoff
                log.warning("mqtt_reconnect_failed gateway=%s reason=%r next_try_s=%.0f", self.name, str(exc),
                            self._backoff)
                return
        self.client.loop(timeout=0.0)


class MqttSink:
    """Publishes each message to its gateway's broker; ``brokers["*"]`` is one shared connection
    for any gateway not listed (replay uses only that, so the broker sees the recorded order)."""

    SERVICE_EVERY = 200  # at full speed, run the network loops every this many messages

    def __init__(self, brokers: dict[str, SensorBrokerSettings], *, connect_timeout_s: float = 10.0,
                 paced: bool = True) -> None:
        self.brokers = brokers
        self.paced = paced
        self.connect_timeout_s = connect_timeout_s
        self.connections: dict[str, _Connection] = {}
        self.sent = 0
        self.dropped = 0
        self._last_drop_log = 0.0
        self._since_service = 0

    def connection(self, gateway: str) -> _Connection:
        """The gateway's own connection, or the shared one (``"*"``) that keeps global order."""
        key = gateway if gateway in self.brokers else "*"
        conn = self.connections.get(key)
        if conn is None:
            broker = self.brokers.get(key)
            if broker is None:
                raise SinkError(f"no broker configured for gateway {gateway!r}")
            conn = _Connection("replay" if key == "*" else key, broker, self.connect_timeout_s, nodelay=self.paced)
            self.connections[key] = conn
        return conn

    def open(self) -> None:
        """Connect every configured broker now, so the first message is not late by a handshake."""
        for key in self.brokers:
            self.connection(key)

    def idle(self, seconds: float) -> None:
        """Wait (the pacer's sleep) while keeping the connections serviced."""
        conns = list(self.connections.values())
        if len(conns) == 1 and conns[0].connected:
            conns[0].service(max(0.0, seconds))  # select() on the socket: wakes for input or at the deadline
            return
        began = time.monotonic()
        for conn in conns:
            conn.service(0.0)
        rest = seconds - (time.monotonic() - began)
        if rest > 0:
            time.sleep(rest)

    def send(self, message: Message) -> None:
        conn = self.connection(message.gateway)
        self._since_service += 1
        if self._since_service >= self.SERVICE_EVERY:
            self._since_service = 0
            for c in self.connections.values():
                c.service(0.0)
        info = conn.client.publish(message.topic, message.payload, qos=conn.broker.qos) if conn.connected else None
        if info is None or info.rc != mqtt.MQTT_ERR_SUCCESS:
            self.dropped += 1
            now = time.monotonic()
            if now - self._last_drop_log > 5.0:
                self._last_drop_log = now
                log.warning("publish_failed gateway=%s topic=%s rc=%s dropped_total=%d", message.gateway,
                            message.topic, "not_connected" if info is None else info.rc, self.dropped)
            return
        conn.last_info = info
        self.sent += 1

    def close(self, timeout_s: float = 30.0) -> None:
        """Write out what is still buffered (QoS 1/2: wait for the acknowledgements), then disconnect."""
        deadline = time.monotonic() + timeout_s
        for conn in self.connections.values():
            while conn.connected and time.monotonic() < deadline:
                pending = conn.client.want_write() or (
                    conn.last_info is not None and not conn.last_info.is_published())
                if not pending:
                    break
                conn.service(0.01)
            if conn.connected:
                conn.closing = True
                conn.client.disconnect()
                conn.client.loop(timeout=0.1)
        self.connections.clear()
