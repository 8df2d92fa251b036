"""The live feed: bounded, de-duplicated by event id, followed by seq, readable before ingest ever ran."""
from __future__ import annotations

import sqlite3

from edgewave.cloud.live_feed import LiveFeedWriter, read_feed
from edgewave.shared.events import match_event, significant_event

TRIPLE = ("<http://example.org/obs/{}>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", '"{}"')


def landed(i: int, gateway: str = "gw1") -> dict:
    triple = (TRIPLE[0].format(i), TRIPLE[1], TRIPLE[2].format(i))
    event = match_event(gateway, "fire", {"room": f"<http://example.org/room{i}>"}, i, i + 10, [(triple, i)], i + 11)
    record = {k: v for k, v in event.items() if k != "@context"}
    record["ingestTime"] = i + 20
    return record


def test_a_feed_that_does_not_exist_yet_reads_empty(tmp_path):
    assert read_feed(tmp_path / "live.db") == []
    assert not (tmp_path / "live.db").exists(), "a reader must not create the file"


def test_events_come_back_in_order_with_their_bindings_and_triples(tmp_path):
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=100)
    assert feed.append([landed(1), landed(2, "gw2")]) == 2
    rows = read_feed(tmp_path / "live.db")
    assert [r["id"] for r in rows] == [landed(1)["id"], landed(2, "gw2")["id"]]
    assert rows[0]["bindings"] == [{"variable": "room", "value": "<http://example.org/room1>"}]
    assert rows[0]["triples"] == landed(1)["triples"]
    assert rows[0]["window_end"] == 11 and rows[0]["ingest_ms"] == 21
    assert [r["gateway"] for r in read_feed(tmp_path / "live.db", gateway="gw2")] == ["gw2"]
    assert read_feed(tmp_path / "live.db", after_seq=rows[-1]["seq"]) == []


def test_a_redelivered_event_is_shown_once(tmp_path):
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=100)
    feed.append([landed(1)])
    assert feed.append([landed(1), landed(2)]) == 1
    assert len(read_feed(tmp_path / "live.db")) == 2


def test_only_the_newest_max_rows_are_kept_and_seq_never_goes_back(tmp_path):
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=10)
    for start in range(0, 50, 5):
        feed.append([landed(i) for i in range(start, start + 5)])
    rows = read_feed(tmp_path / "live.db", limit=100)
    assert [r["window_start"] for r in rows] == list(range(40, 50))
    newest = read_feed(tmp_path / "live.db", limit=3, newest_first=True)
    assert [r["window_start"] for r in newest] == [49, 48, 47]
    feed.append([landed(100)])
    assert read_feed(tmp_path / "live.db", after_seq=rows[-1]["seq"])[0]["window_start"] == 100


def test_significant_events_carry_sensor_property_and_result(tmp_path):
    event = significant_event("gw1", "<http://example.org/s1>", "<http://example.org/temp>", '"21"', 5, [], 6)
    record = {k: v for k, v in event.items() if k != "@context"} | {"ingestTime": 7}
    LiveFeedWriter(tmp_path / "live.db", max_rows=10).append([record])
    [row] = read_feed(tmp_path / "live.db")
    assert (row["kind"], row["sensor"], row["property"], row["result"], row["pattern"]) == \
        ("significant", "<http://example.org/s1>", "<http://example.org/temp>", '"21"', None)


ENTAILED = [{"triple": "<http://example.org/room3> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> "
                       "<http://example.org/Room> .",
             "from": "<http://example.org/sensor7> <https://acme.example/ns#locatedIn> <http://example.org/room3> .",
             "axioms": ["<https://acme.example/ns#locatedIn> <http://www.w3.org/2000/01/rdf-schema#range> "
                        "<https://acme.example/ns#Space> .",
                        "<https://acme.example/ns#Space> <http://www.w3.org/2000/01/rdf-schema#subClassOf> "
                        "<http://example.org/Room> ."]}]


def test_a_match_keeps_its_entailed_evidence_and_other_events_have_none(tmp_path):
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=10)
    significant = significant_event("gw1", "<http://example.org/s1>", "<http://example.org/temp>", '"21"', 5, [], 6)
    feed.append([landed(1) | {"entailed": ENTAILED}, landed(2),
                 {k: v for k, v in significant.items() if k != "@context"} | {"ingestTime": 7}])
    rows = read_feed(tmp_path / "live.db")
    assert [r["entailed"] for r in rows] == [ENTAILED, [], None]


HEARTBEAT = "<http://example.org/gw1/sensor7> <http://example.org/beat> ?n ."
RULE_MATCHES = ["urn:edgewave:event:" + "a" * 32, "urn:edgewave:event:" + "b" * 32]


def test_an_absence_keeps_what_was_expected_and_a_chained_match_the_matches_it_was_built_from(tmp_path):
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=10)
    feed.append([landed(1) | {"expected": [HEARTBEAT]}, landed(2) | {"derivedFrom": RULE_MATCHES}, landed(3)])
    rows = read_feed(tmp_path / "live.db")
    assert [(r["expected"], r["derived_from"]) for r in rows] == [([HEARTBEAT], None), (None, RULE_MATCHES),
                                                                  (None, None)]


OLD_SCHEMA = """
CREATE TABLE recent_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, gateway TEXT NOT NULL, kind TEXT NOT NULL,
    pattern TEXT, window_start INTEGER, window_end INTEGER, emitted_at INTEGER, ingest_ms INTEGER NOT NULL,
    sensor TEXT, property TEXT, result TEXT, bindings TEXT NOT NULL, triples TEXT NOT NULL);
INSERT INTO recent_events (id, gateway, kind, pattern, window_start, window_end, emitted_at, ingest_ms,
    bindings, triples) VALUES ('urn:edgewave:event:old', 'gw1', 'match', 'fire', 1, 2, 3, 4, '[]', '[]');
"""


def test_a_feed_from_before_the_evidence_columns_is_read_as_it_is_and_migrated_by_the_next_writer(tmp_path):
    path = tmp_path / "live.db"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA)
    conn.close()
    [old] = read_feed(path)                      # the dashboard before ingest restarts
    assert old["id"] == "urn:edgewave:event:old"
    assert (old["entailed"], old["expected"], old["derived_from"]) == (None, None, None)
    LiveFeedWriter(path, max_rows=10).append([landed(1) | {"entailed": ENTAILED, "expected": [HEARTBEAT],
                                                           "derivedFrom": RULE_MATCHES}])
    LiveFeedWriter(path, max_rows=10).close()    # a second writer (another ingest worker) finds it migrated
    assert [(r["entailed"], r["expected"], r["derived_from"]) for r in read_feed(path)] == \
        [(None, None, None), (ENTAILED, [HEARTBEAT], RULE_MATCHES)]


def test_a_feed_from_before_expected_and_derived_from_is_migrated_too(tmp_path):
    """A feed that already had ``entailed`` but not the two later columns."""
    path = tmp_path / "live.db"
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SCHEMA + "ALTER TABLE recent_events ADD COLUMN entailed TEXT;")
    conn.close()
    assert read_feed(path)[0]["expected"] is None
    LiveFeedWriter(path, max_rows=10).append([landed(1) | {"expected": [HEARTBEAT]}])
    assert [r["expected"] for r in read_feed(path)] == [None, [HEARTBEAT]]
