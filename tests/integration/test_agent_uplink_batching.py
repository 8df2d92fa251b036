"""Batches on the uplink with a real Mosquitto: several events a message, each still its own
outbox row, deleted on that message's PUBACK, in order across a broker restart."""
from __future__ import annotations

import time

from agent_harness import CloudWatcher, wait_for

from edgewave.agent.config import ReconnectSettings, SessionBrokerSettings, UplinkBatchSettings
from edgewave.agent.mqtt_link import MqttLink
from edgewave.agent.outbox import Outbox
from edgewave.agent.uplink import Uplink
from edgewave.shared.events import encode_event, match_event, significant_event


def event(n: int) -> dict:
    """Every fifth a match, the others significant observations."""
    if n % 5 == 4:
        return match_event("gw1", "p", {"n": f'"{n}"'}, n, n, [((f"<urn:e{n}>", "<urn:p>", f'"{n}"'), n)], n)
    return significant_event("gw1", "<urn:s1>", "<urn:temp>", f'"{n}"', n,
                             [(f"<urn:o{n}>", "<urn:p>", f'"{n}"')], n)


def number(e: dict) -> int:
    return int((e["result"] or e["bindings"][0]["value"]).strip('"'))


def make_uplink(tmp_path, broker, batch: UplinkBatchSettings, **kw):
    outbox = Outbox(tmp_path / "outbox.db", max_bytes=10_000_000, max_age_s=3600)
    link = MqttLink("cloud", SessionBrokerSettings(host=broker.host, port=broker.port), ReconnectSettings(0.1, 0.5),
                    client_id="uplink-batch-test", persistent=True, max_inflight=kw.get("max_inflight", 10))
    uplink = Uplink(outbox, link, "ew/gw1/events", max_inflight=kw.get("max_inflight", 10),
                    max_rate_per_s=kw.get("max_rate_per_s", 1000), resend_after_s=2, batch=batch)
    link.on_published = uplink.on_published
    link.on_connected = uplink.on_connected
    return outbox, link, uplink


def store(outbox: Outbox, n: int) -> tuple[int, bytes]:
    payload = encode_event(event(n))
    seq = outbox.append(event(n)["id"], event(n)["kind"], payload)
    assert seq is not None
    return seq, payload


def test_a_backlog_goes_up_in_batches_in_order_and_is_deleted_on_their_pubacks(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, UplinkBatchSettings(max_events=32, linger_ms=200))
    for n in range(250):
        store(outbox, n)
    try:
        uplink.start()
        link.start()
        wait_for(lambda: len(watcher.events) >= 250, 30, lambda: f"250 events (got {len(watcher.events)})")
        wait_for(lambda: outbox.stats().depth == 0, 10, "outbox emptied by PUBACKs")
        assert [number(e) for e in watcher.events] == list(range(250))
        assert [e["id"] for e in watcher.events] == [event(n)["id"] for n in range(250)]
        sizes = [count for count, _ in watcher.event_messages]
        assert max(sizes) <= 32 and len(sizes) < 250 / 8, sizes
        wait_for(lambda: uplink.forwarded == 250, 5, "every event counted")
        assert uplink.bytes_forwarded == sum(size for _, size in watcher.event_messages)
        assert uplink.bytes_forwarded * 10 < sum(len(encode_event(event(n))) for n in range(250))
        assert uplink.inflight == 0
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def test_significant_observations_linger_and_a_match_takes_them_along_at_once(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, UplinkBatchSettings(linger_ms=1500))
    try:
        uplink.start()
        link.start()
        assert link.wait_connected(15)
        fresh = [store(outbox, n) for n in (0, 1)]
        link.call(lambda: uplink.notify(fresh))                 # on the network thread, as the agent does
        time.sleep(0.5)
        assert watcher.events == []                             # waiting for company
        sent = time.monotonic()
        fresh = [store(outbox, 4)]                              # a match
        link.call(lambda: uplink.notify(fresh))
        wait_for(lambda: len(watcher.events) == 3, 5, "the match and the two before it")
        assert time.monotonic() - sent < 1.0
        assert [number(e) for e in watcher.events] == [0, 1, 4] and watcher.event_messages[0][0] == 3
        fresh = [store(outbox, 5)]                              # alone: goes once its linger is over
        started = time.monotonic()
        link.call(lambda: uplink.notify(fresh))
        wait_for(lambda: len(watcher.events) == 4, 5, "the lingering observation")
        assert 1.2 < time.monotonic() - started < 3.0
        fresh = [store(outbox, 6)]
        link.call(lambda: uplink.notify(fresh))
        assert uplink.drain(5)                                  # shutting down: nothing waits
        assert [number(e) for e in watcher.events] == [0, 1, 4, 5, 6] and outbox.stats().depth == 0
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def test_broker_restart_mid_stream_keeps_batched_events_in_order(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, UplinkBatchSettings(max_events=8, linger_ms=50),
                                       max_rate_per_s=200)
    try:
        uplink.start()
        link.start()
        assert link.wait_connected(15)
        for n in range(200):
            store(outbox, n)
            uplink.notify()
            if n == 60:
                mqtt_broker.stop()
            if n == 140:
                mqtt_broker.start()
            time.sleep(0.005)
        wait_for(lambda: len({e["id"] for e in watcher.events}) == 200, 60,
                 lambda: f"200 distinct events (got {len({e['id'] for e in watcher.events})}, "
                         f"outbox {outbox.stats()}, in flight {uplink.inflight})")
        seen, got = set(), []
        for e in watcher.events:
            if e["id"] not in seen:
                seen.add(e["id"])
                got.append(number(e))
        assert got == list(range(200))
        wait_for(lambda: outbox.stats().depth == 0, 20, "outbox emptied")
        assert link.connects >= 2
    finally:
        uplink.stop()
        link.stop()
        watcher.close()
