"""The platform's floor for replay timing: the least a replayer can do, and nothing more.

Reads a JSON list of ``[recorded_ms, topic, payload]``, connects one paho client (TCP_NODELAY,
QoS 0, no network thread, SCHED_FIFO when allowed, as ``edgewave-sim replay --realtime`` does)
and publishes each message when its recorded time comes, with nothing but ``time.sleep``
between. Through the same broker to the same subscriber, its arrival times show how late
this machine delivers a perfectly paced stream; the replay test holds the replay to that.

Usage: python bare_publisher.py MESSAGES.json HOST PORT
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time

import paho.mqtt.client as mqtt


def main(path: str, host: str, port: int) -> int:
    messages = json.loads(open(path, encoding="utf-8").read())
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bare-publisher-{os.getpid()}")
    client.on_socket_open = lambda c, u, sock: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connected = []
    client.on_connect = lambda c, u, flags, rc, props: connected.append(rc)
    client.connect(host, port)
    deadline = time.monotonic() + 10
    while not connected and time.monotonic() < deadline:
        client.loop(timeout=0.05)
    if not connected:
        print("bare publisher: broker did not accept the connection", file=sys.stderr)
        return 1
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (AttributeError, PermissionError, OSError):
        pass
    origin = time.monotonic() - messages[0][0] / 1000.0
    for ms, topic, payload in messages:
        delay = origin + ms / 1000.0 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        client.publish(topic, payload, qos=0)
    while client.want_write():
        client.loop(timeout=0.01)
    client.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
