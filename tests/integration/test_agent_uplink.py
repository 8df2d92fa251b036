"""Outbox -> cloud broker uplink with a real Mosquitto: deletion once landed (the watcher
acknowledges as ingest does), order, pacing, reconnects; one JSON event a message (batching
off), and batches (several events a message, each still its own outbox row, deleted once that
message is landed)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

import pytest
from agent_harness import CloudWatcher, wait_for

from edgewave.agent.config import ReconnectSettings, SessionBrokerSettings, UplinkBatchSettings, UplinkLandedSettings
from edgewave.agent.mqtt_link import Backoff, MqttLink
from edgewave.agent.outbox import Outbox
from edgewave.agent.uplink import Uplink
from edgewave.shared import topics
from edgewave.shared.events import encode_event, match_event, significant_event

pytestmark = pytest.mark.paced


def event(n: int) -> dict:
    return match_event("gw1", "p", {"n": f'"{n}"'}, n, n, [((f"<urn:e{n}>", "<urn:p>", f'"{n}"'), n)], n)


def mixed_event(n: int) -> dict:
    """Every fifth a match, the others significant observations (which may wait for company)."""
    if n % 5 == 4:
        return event(n)
    return significant_event("gw1", "<urn:s1>", "<urn:temp>", f'"{n}"', n, [(f"<urn:o{n}>", "<urn:p>", f'"{n}"')], n)


def make_uplink(tmp_path, broker, **kw):
    """An uplink wired as the agent wires it (agent/runtime.py, agent/links.py): the link
    subscribed to ingest's landed acknowledgements, which it hands to the uplink."""
    landed = kw.get("landed") or UplinkLandedSettings()
    outbox = Outbox(tmp_path / "outbox.db", max_bytes=10_000_000, max_age_s=3600)
    link = MqttLink("cloud", SessionBrokerSettings(host=broker.host, port=broker.port), ReconnectSettings(0.1, 0.5),
                    client_id="uplink-test", persistent=True, max_inflight=kw.get("max_inflight", 10),
                    subscriptions=[(topics.landed_topic("gw1"), 1)])
    uplink = Uplink(outbox, link, "ew/gw1/events", max_inflight=kw.get("max_inflight", 10),
                    max_rate_per_s=kw.get("max_rate_per_s", 1000), resend_after_s=kw.get("resend_after_s", 2),
                    batch=kw.get("batch"), landed=landed)
    link.on_published = uplink.on_published
    link.on_connected = uplink.on_connected
    link.on_message = lambda topic, payload, retained, ack: uplink.on_landed(payload)
    return outbox, link, uplink


@contextmanager
def running(uplink: Uplink, link: MqttLink, watcher: CloudWatcher) -> Iterator[None]:
    """Both started; both stopped and the watcher closed however the test ends."""
    try:
        uplink.start()
        link.start()
        assert link.wait_connected(15)
        yield
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def store(outbox: Outbox, n: int, make=mixed_event) -> tuple[int, bytes]:  # noqa: ANN001
    e = make(n)
    seq = outbox.append_batch([(e["id"], e["kind"], encode_event(e))], None)[0]
    assert seq is not None
    return seq, encode_event(e)


def number(e: dict) -> int:
    return int((e["result"] or e["bindings"][0]["value"]).strip('"'))


def numbers(watcher: CloudWatcher) -> list[int]:
    seen, out = set(), []
    for e in watcher.events:
        if e["id"] not in seen:
            seen.add(e["id"])
            out.append(number(e))
    return out


def test_events_are_deleted_only_once_landed_and_arrive_in_order(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker)
    for n in range(50):
        outbox.append_batch([(event(n)["id"], "match", encode_event(event(n)))], None)
    assert outbox.stats().depth == 50          # nothing leaves before the link is up
    try:
        uplink.start()
        link.start()
        wait_for(lambda: len(watcher.events) == 50, 30, "50 events")
        wait_for(lambda: outbox.stats().depth == 0, 10, "outbox emptied by landed acknowledgements")
        assert numbers(watcher) == list(range(50))
        assert uplink.forwarded == 50 and uplink.bytes_forwarded == sum(len(encode_event(event(n))) for n in range(50))
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def test_just_stored_events_never_overtake_older_waiting_ones(tmp_path, mqtt_broker):
    """On the network thread the agent hands notify() the events it just stored, to publish
    them without reading them back; events stored earlier and not yet published must still
    go first."""
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, max_inflight=50)

    def store_and_notify(n: int) -> None:
        payload = encode_event(event(n))
        seq = outbox.append_batch([(event(n)["id"], "match", payload)], None)[0]
        uplink.notify([(seq, payload)])

    try:
        link.start()
        assert link.wait_connected(15)
        for n in range(3):      # stored while nothing published them
            outbox.append_batch([(event(n)["id"], "match", encode_event(event(n)))], None)
        for n in range(3, 8):
            link.call(lambda n=n: store_and_notify(n))
        wait_for(lambda: len(watcher.events) >= 8, 20, lambda: f"8 events (got {numbers(watcher)})")
        assert numbers(watcher) == list(range(8))
        assert len(watcher.events) == 8        # none twice
        uplink.start()
        wait_for(lambda: outbox.stats().depth == 0, 10, "outbox emptied by landed acknowledgements")
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def test_pacing_limits_the_publish_rate(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, max_rate_per_s=50, max_inflight=5)
    for n in range(60):
        outbox.append_batch([(event(n)["id"], "match", encode_event(event(n)))], None)
    try:
        link.start()
        assert link.wait_connected(15)
        started = time.monotonic()
        uplink.start()
        wait_for(lambda: len(watcher.events) == 60, 30, "60 events")
        elapsed = time.monotonic() - started
        # 60 messages at 50/s with a burst of at most 5: at least ~1.1 s. A floor, not a speed claim.
        assert elapsed >= 1.0, f"60 events in {elapsed:.2f}s: pacing not applied"
        assert numbers(watcher) == list(range(60))
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


@pytest.mark.parametrize("batch", [None, UplinkBatchSettings(max_events=8, linger_ms=50)], ids=["single", "batched"])
def test_broker_restart_mid_stream_keeps_everything_in_order(tmp_path, mqtt_broker, batch):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, max_rate_per_s=200, batch=batch)
    try:
        uplink.start()
        link.start()
        assert link.wait_connected(15)
        for n in range(100):
            store(outbox, n, event if batch is None else mixed_event)
            uplink.notify()
            if n == 40:
                mqtt_broker.stop()
            if n == 70:
                mqtt_broker.start()
            time.sleep(0.01)
        wait_for(lambda: len(set(e["id"] for e in watcher.events)) == 100, 60,
                 lambda: f"100 distinct events (got {len(set(e['id'] for e in watcher.events))}, "
                         f"outbox {outbox.stats()}, in flight {uplink.inflight})")
        got = numbers(watcher)
        assert sorted(got) == list(range(100)) and got == list(range(100))
        wait_for(lambda: outbox.stats().depth == 0, 20, "outbox emptied")
        assert link.connects >= 2
    finally:
        uplink.stop()
        link.stop()
        watcher.close()


def test_a_backlog_goes_up_in_batches_in_order_and_is_deleted_on_their_pubacks(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, batch=UplinkBatchSettings(max_events=32, linger_ms=200))
    for n in range(250):
        store(outbox, n)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) >= 250, 30, lambda: f"250 events (got {len(watcher.events)})")
        wait_for(lambda: outbox.stats().depth == 0, 10, "outbox emptied by landed acknowledgements")
        assert [number(e) for e in watcher.events] == list(range(250))
        assert [e["id"] for e in watcher.events] == [mixed_event(n)["id"] for n in range(250)]
        sizes = [count for count, _ in watcher.event_messages]
        assert max(sizes) <= 32 and len(sizes) < 250 / 8, sizes
        wait_for(lambda: uplink.forwarded == 250, 5, "every event counted")
        assert uplink.bytes_forwarded == sum(size for _, size in watcher.event_messages)
        assert uplink.bytes_forwarded * 10 < sum(len(encode_event(mixed_event(n))) for n in range(250))
        assert uplink.inflight == 0


def test_significant_observations_linger_and_a_match_takes_them_along_at_once(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, batch=UplinkBatchSettings(linger_ms=1500))

    def stored(*ns: int) -> None:      # stored and handed over on the network thread, as the agent does
        fresh = [store(outbox, n) for n in ns]
        link.call(lambda: uplink.notify(fresh))

    with running(uplink, link, watcher):
        stored(0, 1)
        time.sleep(0.5)
        assert watcher.events == []                             # waiting for company
        sent = time.monotonic()
        stored(4)                                               # a match
        wait_for(lambda: len(watcher.events) == 3, 5, "the match and the two before it")
        assert time.monotonic() - sent < 1.0
        assert [number(e) for e in watcher.events] == [0, 1, 4] and watcher.event_messages[0][0] == 3
        started = time.monotonic()
        stored(5)                                               # alone: goes once its linger is over
        wait_for(lambda: len(watcher.events) == 4, 5, "the lingering observation")
        assert 1.2 < time.monotonic() - started < 3.0
        stored(6)
        assert uplink.drain(5)                                  # shutting down: nothing waits
        assert numbers(watcher) == [0, 1, 4, 5, 6] and outbox.stats().depth == 0


def test_backoff_grows_exponentially_with_jitter():
    import random
    backoff = Backoff(0.5, 8.0, random.Random(1))
    delays = [backoff.next_delay() for _ in range(10)]
    assert all(0.5 <= d <= 8.0 for d in delays)
    ceilings = [min(8.0, 0.5 * 2 ** i) for i in range(10)]
    assert all(d <= c for d, c in zip(delays, ceilings))
    assert len(set(round(d, 6) for d in delays)) == 10           # jittered, not a fixed ladder
    backoff.reset()
    assert backoff.next_delay() == 0.5


# -- end to end: an event leaves the outbox once ingest has landed it ----------------------------

def test_a_pubacked_event_stays_in_the_outbox_until_ingest_says_it_landed(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker, acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, batch=UplinkBatchSettings(max_events=4, linger_ms=0),
                                       landed=UplinkLandedSettings(mode="required", resend_after_s=60))
    for n in range(20):
        store(outbox, n)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) == 20, 20, "20 events at the cloud")
        wait_for(lambda: uplink.inflight == 0, 5, "every PUBACK in")
        time.sleep(0.5)
        assert outbox.stats().depth == 20 and uplink.landed.events == 20     # sent, not landed
        assert uplink.landed.state() == "end_to_end" and uplink.landed.oldest_age_s() >= 0.5
        with watcher.lock:
            keys = list(watcher.keys)
        assert len(keys) == 5                                                # four events a message
        watcher.land(keys[:2])
        wait_for(lambda: outbox.stats().depth == 12, 5, "the two landed messages' eight events deleted")
        watcher.land(keys[2:] + ["0:1-999", "not a key"])    # another outbox's key, and junk: ignored
        wait_for(lambda: outbox.stats().depth == 0, 5, "the rest deleted")
        assert uplink.landed.events == 0 and uplink.landed.landed == 20 and len(watcher.events) == 20


def test_events_not_landed_in_time_are_sent_again_until_they_land(tmp_path, mqtt_broker):
    """An acknowledgement that never comes (ingest crashed before sending it, a broker that lost
    the message) costs a re-send after ``resend_after_s``, and the wait doubles while nothing lands."""
    watcher = CloudWatcher(mqtt_broker, acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker,
                                       landed=UplinkLandedSettings(mode="required", resend_after_s=0.5,
                                                                   max_resend_after_s=1.0))
    for n in range(10):
        store(outbox, n, event)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) >= 30, 20, lambda: f"three copies (got {len(watcher.events)})")
        assert outbox.stats().depth == 10
        assert uplink.landed.wait_s == 1.0                   # doubled from 0.5, capped
        watcher.acknowledge = True                           # ingest is back: the next copy lands
        wait_for(lambda: outbox.stats().depth == 0, 10, "the outbox emptied once the events landed")
        assert uplink.landed.wait_s == 0.5
        assert numbers(watcher) == list(range(10))
        assert uplink.landed.resends >= 2


def test_at_most_max_unlanded_events_wait_at_the_cloud_the_rest_in_the_outbox(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker, acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker, max_inflight=5,
                                       landed=UplinkLandedSettings(mode="required", resend_after_s=60,
                                                                   max_unlanded=12))
    for n in range(50):
        store(outbox, n, event)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) >= 12, 10, "the first twelve")
        time.sleep(1.0)
        assert len(watcher.events) == 12 and uplink.landed.events == 12 and outbox.stats().depth == 50
        watcher.acknowledge = True
        with watcher.lock:
            keys = list(watcher.keys)
        watcher.land(keys)
        wait_for(lambda: outbox.stats().depth == 0, 20, "everything, twelve at a time")
        assert numbers(watcher) == list(range(50)) and len(watcher.events) == 50


def test_a_cloud_that_never_acknowledges_gets_delete_on_puback_after_the_wait(tmp_path, mqtt_broker):
    """A gateway upgraded before its cloud: after ``older_cloud_after_s`` without any acknowledgement
    the agent deletes on PUBACK as before (its status says so); the cloud's first acknowledgement
    switches it to end to end for good, kept in the outbox file."""
    watcher = CloudWatcher(mqtt_broker, acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker,
                                       landed=UplinkLandedSettings(mode="auto", older_cloud_after_s=1.5))
    for n in range(10):
        store(outbox, n, event)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) == 10, 10, "ten events")
        assert outbox.stats().depth == 10 and uplink.landed.state() == "end_to_end"
        wait_for(lambda: outbox.stats().depth == 0, 10, "the older cloud's fallback: deleted on PUBACK")
        assert uplink.landed.state() == "older_cloud"
        for n in range(10, 15):
            store(outbox, n, event)
        uplink.notify()
        wait_for(lambda: len(watcher.events) == 15 and outbox.stats().depth == 0, 10, "deleted on PUBACK at once")
        watcher.acknowledge = True                             # the cloud is upgraded
        store(outbox, 15, event)
        uplink.notify()
        wait_for(lambda: uplink.landed.state() == "end_to_end", 10, "end to end from the first acknowledgement")
        wait_for(lambda: outbox.stats().depth == 0, 10, "the last event landed")
    assert numbers(watcher) == list(range(16))
    outbox.close()
    assert Outbox(tmp_path / "outbox.db", max_bytes=10_000_000, max_age_s=3600).flag("cloud_lands")


def test_required_never_falls_back_and_off_deletes_on_puback(tmp_path, mqtt_broker):
    watcher = CloudWatcher(mqtt_broker, acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path, mqtt_broker,
                                       landed=UplinkLandedSettings(mode="required", older_cloud_after_s=1.0,
                                                                   resend_after_s=60))
    for n in range(5):
        store(outbox, n, event)
    with running(uplink, link, watcher):
        wait_for(lambda: len(watcher.events) == 5, 10, "five events")
        time.sleep(2.0)
        assert outbox.stats().depth == 5 and uplink.landed.state() == "end_to_end"
    watcher = CloudWatcher(mqtt_broker, client_id="watcher-off", acknowledge=False)
    outbox, link, uplink = make_uplink(tmp_path / "off", mqtt_broker, landed=UplinkLandedSettings(mode="off"))
    for n in range(5):
        store(outbox, n, event)
    with running(uplink, link, watcher):
        wait_for(lambda: outbox.stats().depth == 0, 10, "deleted on PUBACK")
        assert uplink.landed.state() == "puback" and watcher.keys == []      # no key on the wire either
