"""The landed acknowledgement's wire form (shared/landed_acks.py): keys the agent makes and
parses back, what ingest echoes, and acknowledgements read within bounds."""
from __future__ import annotations

import json
import threading

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.shared.bounded_json import PayloadError
from edgewave.shared.broker import BrokerSettings
from edgewave.shared.landed_acks import (MAX_KEYS_PER_MESSAGE, decode_landed, echoable, encode_landed, message_key,
                                         parse_message_key)
from edgewave.shared.mqtt_client import CorrelationData, new_client


def test_a_key_names_the_outbox_and_its_range_of_rows():
    key = message_key(0xBEEF, 12, 40)
    assert key == b"beef:12-40"
    assert parse_message_key(key.decode()) == (0xBEEF, 12, 40)


@pytest.mark.parametrize("text", ["", "beef", "beef:12", "beef:40-12", "xyz:1-2", "beef:1-2 ", "beef:-1-2",
                                  "b" * 17 + ":1-2", "beef:" + "9" * 20 + "-1"])
def test_anything_else_is_not_a_key(text):
    assert parse_message_key(text) is None


def test_ingest_echoes_only_short_printable_ascii():
    assert echoable(b"beef:1-2") == "beef:1-2"
    assert echoable(None) is None and echoable(b"") is None
    assert echoable(b"a b") is None and echoable(b"\xff") is None and echoable(b"x" * 65) is None


def test_a_large_group_is_split_and_reads_back():
    keys = [f"a:{i}-{i}" for i in range(MAX_KEYS_PER_MESSAGE * 2 + 3)]
    messages = list(encode_landed(keys))
    assert len(messages) == 3
    assert [k for m in messages for k in decode_landed(m)] == keys


@pytest.mark.parametrize("payload", [b"", b"[]", b'{"landed": "a:1-1"}', b'{"landed": [1]}', b"\xff",
                                     b'{"landed": [[["a"]]]}', json.dumps({"landed": ["x" * 200_000]}).encode()])
def test_a_bad_acknowledgement_is_refused_with_a_reason(payload):
    with pytest.raises(PayloadError):
        decode_landed(payload)


@pytest.mark.parametrize("size", [0, 1, 25, 124, 125, 126, 127, 128, 300, 16_380, 16_381, 65_535])
def test_the_uplinks_encoded_key_is_what_paho_would_encode(size):
    data = bytes(i % 251 for i in range(size))
    props = Properties(PacketTypes.PUBLISH)
    props.CorrelationData = data
    assert CorrelationData(data).pack() == props.pack()


def test_a_key_too_long_for_the_property_is_refused():
    with pytest.raises(ValueError, match="at most 65,535"):
        CorrelationData(b"x" * 65_536)


def test_a_subscriber_reads_the_key_the_uplink_encoded(mqtt_broker):
    """Through a real broker: what ingest reads from a message published with the encoded key."""
    got: list = []
    arrived = threading.Event()
    sub = new_client(BrokerSettings(host=mqtt_broker.host, port=mqtt_broker.port), "key-reader")
    sub.on_connect = lambda c, u, f, rc, p: c.subscribe("ew/gw1/events", qos=1)
    sub.on_message = lambda c, u, msg: (got.append(msg.properties.CorrelationData), arrived.set())
    subscribed = threading.Event()
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.connect(mqtt_broker.host, mqtt_broker.port)
    sub.loop_start()
    pub = new_client(BrokerSettings(host=mqtt_broker.host, port=mqtt_broker.port), "key-writer")
    pub.connect(mqtt_broker.host, mqtt_broker.port)
    pub.loop_start()
    try:
        assert subscribed.wait(10)
        key = message_key(0xBEEF, 12, 40)
        pub.publish("ew/gw1/events", b"{}", qos=1, properties=CorrelationData(key)).wait_for_publish(10)
        assert arrived.wait(10)
        assert got == [key] and echoable(got[0]) == "beef:12-40"
    finally:
        for client in (pub, sub):
            client.loop_stop()
            client.disconnect()
