"""The live feed: bounded, de-duplicated by event id, followed by seq, readable before ingest ever ran."""
from __future__ import annotations

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
