"""The paho-mqtt client every edgewave tier connects with, configured from ``BrokerSettings``.

One place decides how a broker's settings become a paho 2.x client (callback API v2, the
MQTT protocol version, credentials, TLS with the broker's certificate and host name
verified, a Last Will, reconnect delays), so the agent, the cloud and the simulator
connect alike and a TLS or credential option works the same in each. The caller sets
its callbacks and runs the network loop its own way. Needs paho-mqtt (every tier that
talks MQTT installs it; the rest of ``edgewave.shared`` does not).
"""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edgewave.shared.broker import BrokerSettings, ReconnectSettings

MQTT_V5 = mqtt.MQTTv5
MQTT_V311 = mqtt.MQTTv311


@dataclass(frozen=True)
class Will:
    """The Last Will the broker publishes when the connection drops without a DISCONNECT."""

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


def new_client(broker: BrokerSettings, client_id: str, *, protocol: int = MQTT_V5, manual_ack: bool = False,
               will: Will | None = None, reconnect: ReconnectSettings | None = None,
               max_inflight: int | None = None) -> mqtt.Client:
    """A paho client for ``broker``, not yet connected.

    ``manual_ack``: QoS 1/2 messages are acknowledged only when the application calls
    ``client.ack`` (after it has made them durable). ``reconnect``: the delays of paho's own
    reconnects (``loop_start``/``loop_forever``). ``max_inflight``: QoS 1/2 messages sent and not yet
    acknowledged, at most. Raises OSError when ``broker.password_file`` cannot be read."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=protocol, manual_ack=manual_ack)
    if broker.username:
        client.username_pw_set(broker.username, broker.secret())
    tls = broker.tls
    if tls.enabled:
        client.tls_set(ca_certs=tls.ca, certfile=tls.cert, keyfile=tls.key, cert_reqs=ssl.CERT_REQUIRED,
                       tls_version=ssl.PROTOCOL_TLS_CLIENT)
        if tls.insecure:
            client.tls_insecure_set(True)
    if will is not None:
        client.will_set(will.topic, will.payload, qos=will.qos, retain=will.retain)
    if reconnect is not None:
        client.reconnect_delay_set(min_delay=reconnect.min_delay_s, max_delay=reconnect.max_delay_s)
    if max_inflight is not None:
        client.max_inflight_messages_set(max_inflight)
    return client


def send_at_once(client: mqtt.Client) -> None:
    """Turn Nagle's algorithm off on the client's connected socket (paho leaves it on).

    With it on, a small packet written while an earlier one is unacknowledged waits for the
    peer's delayed ACK, up to 40 ms on Linux: an agent that both publishes events and
    acknowledges the landed acknowledgements it receives held every event up to that long.
    Call it once connected (the socket is new after every reconnect)."""
    sock = client.socket()
    if sock is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass          # not a TCP socket (a Unix socket, a test double): nothing to turn off


class CorrelationData:
    """The properties of a PUBLISH that carries only a Correlation Data, encoded once.

    The uplink keys every message it publishes (shared/landed_acks.py). paho's ``Properties``
    is a general object that validates each attribute set and encodes itself on every
    publish (and again on a re-send); for one property that is a few hundred bytecodes a
    message on the agent's busiest path. paho only ever calls ``pack()`` on a publish's
    properties, so this gives it the encoded bytes: the same bytes ``Properties(PUBLISH)``
    with ``CorrelationData`` set packs to (tested against it)."""

    __slots__ = ("data", "_packed")

    IDENTIFIER = b"\x09"      # MQTT 5, 2.2.2.2: Correlation Data, binary data

    def __init__(self, data: bytes) -> None:
        if len(data) > 0xFFFF:
            raise ValueError(f"Correlation Data of {len(data)} bytes: at most 65,535")
        body = self.IDENTIFIER + len(data).to_bytes(2, "big") + data
        self.data = data
        self._packed = _variable_byte_integer(len(body)) + body

    def pack(self) -> bytes:
        return self._packed

    def __repr__(self) -> str:       # paho's debug log prints a message's properties
        return f"[CorrelationData : {self.data!r}]"


def _variable_byte_integer(value: int) -> bytes:
    """MQTT's length encoding (1.5.5): seven bits a byte, the high bit set on all but the last."""
    out = bytearray()
    while True:
        value, digit = value >> 7, value & 0x7F
        out.append(digit | 0x80 if value else digit)
        if not value:
            return bytes(out)
