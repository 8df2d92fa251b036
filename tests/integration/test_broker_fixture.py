"""The broker fixture is a real Mosquitto: QoS 1 publish/subscribe with paho-mqtt 2.x."""
from __future__ import annotations

import threading
import time

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion


def _client(broker, client_id: str, **kw) -> mqtt.Client:
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv5, **kw)
    if broker.username:
        client.username_pw_set(broker.username, broker.password)
    return client


def _roundtrip(broker) -> list[tuple[str, bytes, int]]:
    received: list[tuple[str, bytes, int]] = []
    subscribed = threading.Event()
    got = threading.Event()
    sub = _client(broker, "sub")
    sub.on_subscribe = lambda c, u, mid, rcs, props: subscribed.set()

    def on_message(c, u, msg):
        received.append((msg.topic, msg.payload, msg.qos))
        if len(received) == 3:
            got.set()

    sub.on_message = on_message
    sub.on_connect = lambda c, u, f, rc, props: c.subscribe("ew/in/#", qos=1)
    sub.connect(broker.host, broker.port)
    sub.loop_start()
    assert subscribed.wait(10), "subscription not acknowledged"

    pub = _client(broker, "pub")
    pub.connect(broker.host, broker.port)
    pub.loop_start()
    infos = [pub.publish(f"ew/in/fire/s{i}", f"<urn:s{i}> <urn:p> <urn:o> .".encode(), qos=1) for i in range(3)]
    for info in infos:
        info.wait_for_publish(10)
        assert info.is_published()
    assert got.wait(10), f"only {len(received)} messages arrived"
    for c in (pub, sub):
        c.loop_stop()
        c.disconnect()
    return received


def test_qos1_publish_subscribe(mqtt_broker):
    received = _roundtrip(mqtt_broker)
    assert [(t, q) for t, _, q in received] == [(f"ew/in/fire/s{i}", 1) for i in range(3)]
    assert received[0][1] == b"<urn:s0> <urn:p> <urn:o> ."


def test_auth_broker_accepts_credentials_and_refuses_anonymous(mqtt_broker_auth):
    assert len(_roundtrip(mqtt_broker_auth)) == 3
    anon = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="anon", protocol=mqtt.MQTTv5)
    result: list = []
    done = threading.Event()
    anon.on_connect = lambda c, u, f, rc, props: (result.append(rc), done.set())
    anon.connect(mqtt_broker_auth.host, mqtt_broker_auth.port)
    anon.loop_start()
    assert done.wait(10)
    anon.loop_stop()
    assert result[0].is_failure, "anonymous client was let in"


def test_restart_keeps_queued_messages_for_persistent_session(mqtt_broker):
    """What store-and-forward relies on: a stopped broker comes back with queued QoS 1 messages."""
    got: list[bytes] = []
    sub = _client(mqtt_broker, "durable-sub")
    connected = threading.Event()
    sub.on_connect = lambda c, u, f, rc, props: (c.subscribe("ew/gw1/events", qos=1), connected.set())
    sub.on_message = lambda c, u, msg: got.append(msg.payload)
    props = mqtt.Properties(mqtt.PacketTypes.CONNECT)
    props.SessionExpiryInterval = 3600
    sub.connect(mqtt_broker.host, mqtt_broker.port, clean_start=False, properties=props)
    sub.loop_start()
    assert connected.wait(10)
    time.sleep(0.3)
    sub.loop_stop()
    sub.disconnect()

    pub = _client(mqtt_broker, "pub2")
    pub.connect(mqtt_broker.host, mqtt_broker.port)
    pub.loop_start()
    pub.publish("ew/gw1/events", b"e1", qos=1).wait_for_publish(10)
    pub.loop_stop()
    pub.disconnect()

    mqtt_broker.stop()
    mqtt_broker.start()

    sub2 = _client(mqtt_broker, "durable-sub")
    sub2.on_message = lambda c, u, msg: got.append(msg.payload)
    sub2.connect(mqtt_broker.host, mqtt_broker.port, clean_start=False, properties=props)
    sub2.loop_start()
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    sub2.loop_stop()
    sub2.disconnect()
    assert got == [b"e1"]
