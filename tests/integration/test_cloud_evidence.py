"""A match's evidence through real ingest: landed as sent, shown by the live feed, in an old live.db too.

The evidence is what the gateway says about a match beyond its triples: which of them it
entailed (``entailed``), for an absence the triple patterns that did not arrive by the
deadline (``expected``), and for a match of a chained rule's triples the rule matches that
made them (``derivedFrom``).
"""
from __future__ import annotations

import sqlite3

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from cloud_harness import CloudProcess, wait_for, write_config
from edgewave.agent.engine.evidence import Entailment
from edgewave.cloud.landing import read_records
from edgewave.cloud.live_feed import read_feed
from edgewave.shared import topics
from edgewave.shared.events import encode_event, match_event
from edgewave.shared.uplink_batch import encode_batch

EX = "http://example.org/gw1/"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
LOCATED = (f"<{EX}sensor7>", "<https://acme.example/ns#locatedIn>", f"<{EX}room3>")
IS_ROOM = (f"<{EX}room3>", RDF_TYPE, f"<{EX}Room>")
AXIOMS = (("<https://acme.example/ns#locatedIn>", "<http://www.w3.org/2000/01/rdf-schema#range>",
           "<https://acme.example/ns#Space>"),
          ("<https://acme.example/ns#Space>", "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", f"<{EX}Room>"))


def event(n: int, evidence: bool) -> dict:
    entailed = [Entailment(IS_ROOM, 1000 + n, LOCATED, "O", IS_ROOM[2], AXIOMS)] if evidence else []
    return match_event("gw1", "fire", {"room": f"<{EX}room3>", "n": f'"{n}"'}, 1000 + n, 1000 + n,
                       [(LOCATED, 1000 + n), (IS_ROOM, 1000 + n)], 2000 + n, entailed=entailed)


def publish(broker, events: list[dict], batched: list[dict] = ()) -> None:
    """Each of ``events`` in a message of its own, and ``batched`` in one uplink batch, as the agent sends them."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        payloads = [encode_event(e) for e in events] + ([encode_batch(batched)] if batched else [])
        for info in [client.publish(topics.events_topic("gw1"), p, qos=1) for p in payloads]:
            info.wait_for_publish(timeout=30)
    finally:
        client.disconnect()
        client.loop_stop()


def old_live_feed(path, *, entailed: bool) -> None:
    """A live.db written by an ingest from before the evidence columns (with ``entailed``: before the later two),
    with one event in it."""
    conn = sqlite3.connect(path)
    conn.executescript(f"""
        CREATE TABLE recent_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
            gateway TEXT NOT NULL, kind TEXT NOT NULL, pattern TEXT, window_start INTEGER, window_end INTEGER,
            emitted_at INTEGER, ingest_ms INTEGER NOT NULL, sensor TEXT, property TEXT, result TEXT,
            bindings TEXT NOT NULL, triples TEXT NOT NULL{", entailed TEXT" if entailed else ""});
        INSERT INTO recent_events (id, gateway, kind, pattern, window_start, window_end, emitted_at, ingest_ms,
            bindings, triples) VALUES ('urn:edgewave:event:0', 'gw1', 'match', 'fire', 1, 2, 3, 4, '[]', '[]');
    """)
    conn.close()


def test_entailed_evidence_lands_and_the_live_feed_shows_it_even_in_a_feed_from_before_the_column(tmp_path,
                                                                                                 mqtt_broker):
    old_live_feed(tmp_path / "live.db", entailed=False)
    config = write_config(tmp_path, mqtt_broker)
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest to connect", alive=ingest)
    sent = [event(1, True), event(2, False)]
    try:
        publish(mqtt_broker, sent)
        wait_for(lambda: len(read_records(tmp_path / "landing" / "events")) >= 2, 30, "events to land", alive=ingest)
        wait_for(lambda: len(read_feed(tmp_path / "live.db")) >= 3, 30, "the live feed", alive=ingest)
    finally:
        assert ingest.stop() == 0
    landed = {r["id"]: r for r in read_records(tmp_path / "landing" / "events")}
    assert [landed[e["id"]]["entailed"] for e in sent] == [sent[0]["entailed"], []]
    assert sent[0]["entailed"][0]["axioms"] == [f"{a[0]} {a[1]} {a[2]} ." for a in AXIOMS]
    feed = {r["id"]: r for r in read_feed(tmp_path / "live.db")}
    assert feed["urn:edgewave:event:0"]["entailed"] is None          # the old row: no evidence recorded
    assert [feed[e["id"]]["entailed"] for e in sent] == [sent[0]["entailed"], []]


HEARTBEAT = (f"<{EX}sensor7>", f"<{EX}beat>")
HOT_IN = (f"<{EX}room3>", f"<{EX}hotIn>", f"<{EX}building1>")


def absence_and_chain() -> tuple[dict, dict, dict, dict]:
    """An absence (sensor7's heartbeat, then none within 5 min), a rule match that made a triple, the match
    that used it, and a plain match."""
    beat = ((*HEARTBEAT, '"41"'), 10_000)
    absence = match_event("gw1", "silent-sensor", {"sensor": f"<{EX}sensor7>", "last": '"41"'}, 10_000, 310_000,
                          [beat], 310_400, expected=[f"{HEARTBEAT[0]} {HEARTBEAT[1]} ?next ."])
    rule = match_event("gw1", "hot-rooms", {"room": f"<{EX}room3>", "building": f"<{EX}building1>"}, 20_000,
                       21_000, [((f"<{EX}room3>", f"<{EX}temperature>", '"63"'), 21_000)], 21_100)
    chained = match_event("gw1", "building-alert", {"building": f"<{EX}building1>"}, 21_000, 21_000,
                          [(HOT_IN, 21_000)], 21_100, derived_from=[rule["id"]])
    return absence, rule, chained, event(3, False)


def test_an_absence_lands_with_what_was_expected_and_a_chained_match_with_what_it_was_built_from(tmp_path,
                                                                                                mqtt_broker):
    """Alone and in a batch, into a live.db from before the two columns (one ingest's later release wrote it)."""
    old_live_feed(tmp_path / "live.db", entailed=True)
    config = write_config(tmp_path, mqtt_broker)
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest to connect", alive=ingest)
    absence, rule, chained, plain = absence_and_chain()
    try:
        publish(mqtt_broker, [absence], batched=[rule, chained, plain])
        wait_for(lambda: len(read_records(tmp_path / "landing" / "events")) >= 4, 30, "events to land", alive=ingest)
        wait_for(lambda: len(read_feed(tmp_path / "live.db")) >= 5, 30, "the live feed", alive=ingest)
    finally:
        assert ingest.stop() == 0
    sent = [absence, rule, chained, plain]
    landed = {r["id"]: r for r in read_records(tmp_path / "landing" / "events")}
    assert [(landed[e["id"]]["expected"], landed[e["id"]]["derivedFrom"]) for e in sent] == [
        ([f"<{EX}sensor7> <{EX}beat> ?next ."], None), (None, None), (None, [rule["id"]]), (None, None)]
    assert landed[absence["id"]]["windowEnd"] == 310_000       # the deadline
    feed = {r["id"]: r for r in read_feed(tmp_path / "live.db")}
    assert (feed["urn:edgewave:event:0"]["expected"], feed["urn:edgewave:event:0"]["derived_from"]) == (None, None)
    assert [(feed[e["id"]]["expected"], feed[e["id"]]["derived_from"]) for e in sent] == [
        ([f"<{EX}sensor7> <{EX}beat> ?next ."], None), (None, None), (None, [rule["id"]]), (None, None)]
