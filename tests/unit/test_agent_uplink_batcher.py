"""Which outbox rows share an MQTT message (agent/uplink_batch.py), and what the events carry."""
from __future__ import annotations

import time

from edgewave.agent.config import UplinkBatchSettings, settings_from_dict
from edgewave.agent.uplink_batch import Batcher
from edgewave.shared.events import encode_event, event_id, match_event, significant_event
from edgewave.shared.uplink_batch import decode_batch, is_batch

TRIPLE = ("<urn:o1>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", '"21.5"')


def significant(n: int) -> bytes:
    return encode_event(significant_event("gw1", "<urn:s1>", "<urn:temp>", f'"{n}"', n,
                                          [(f"<urn:o{n}>",) + TRIPLE[1:]], n))


def match(n: int) -> bytes:
    return encode_event(match_event("gw1", "p", {"n": f'"{n}"'}, n, n, [((f"<urn:e{n}>", "<urn:p>", f'"{n}"'), n)], n))


def batcher(**kw) -> Batcher:
    return Batcher(UplinkBatchSettings(**{"linger_ms": 1000.0, **kw}))


def test_significant_observations_wait_for_company_and_a_match_takes_them_along() -> None:
    b = batcher()
    b.add([(1, significant(1)), (2, significant(2))])
    now = time.monotonic()
    assert b.ready(now) == 0 and 0.9 < b.wait_s(now) <= 1.0
    assert b.ready(now + 1.0) == 2                  # lingered long enough
    b.add([(3, match(3))])
    assert b.ready(now) == 3                        # a match never waits
    payload, sent = b.encode(b.take(3))
    assert sent == 3 and is_batch(payload)
    assert [e["kind"] for e in decode_batch(payload)] == ["significant", "significant", "match"]
    assert len(b) == 0


def test_a_message_is_full_at_max_events_or_max_bytes() -> None:
    b = batcher(max_events=4)
    b.add((n, significant(n)) for n in range(1, 11))
    assert b.ready(time.monotonic()) == 4
    per_event = len(significant(1))
    b = batcher(max_bytes=3 * per_event + 10)
    b.add((n, significant(n)) for n in range(1, 11))
    assert b.ready(time.monotonic()) == 3
    b = batcher(max_bytes=1024)
    big = encode_event(match_event("gw1", "p", {"x": '"' + "y" * 2000 + '"'}, 1, 1, [], 1))
    b.add([(1, big), (2, match(2))])
    assert b.ready(time.monotonic()) == 1           # larger than max_bytes: it goes alone


def test_flushing_and_one_at_a_time() -> None:
    b = batcher()
    b.add((n, significant(n)) for n in range(1, 6))
    now = time.monotonic()
    assert b.ready(now) == 0 and b.ready(now, flush=True) == 5 and b.ready(now, flush=True, limit=1) == 1
    taken = b.take(2)
    b.put_back(taken)
    assert [row.seq for row in b.take(5)] == [1, 2, 3, 4, 5]


def test_with_batching_off_each_row_is_its_own_json_message_at_once() -> None:
    b = Batcher(UplinkBatchSettings(enabled=False))
    b.add([(1, significant(1)), (2, significant(2))])
    assert b.ready(time.monotonic()) == 1
    assert b.encode(b.take(1)) == (significant(1), 1)
    assert Batcher(None).max_events == 1


def test_a_row_that_is_not_an_event_goes_alone_as_stored() -> None:
    b = batcher()
    b.add([(1, significant(1)), (2, b"not json"), (3, match(3))])
    now = time.monotonic()
    for expected in ([1], [2], [3]):
        taken = b.take(b.ready(now))
        payload, sent = b.encode(taken)
        b.put_back(taken[sent:])
        assert [row.seq for row in taken[:sent]] == expected
        assert (payload == b"not json") == (expected == [2])
    assert len(b) == 0


def test_an_event_a_batch_would_not_shrink_goes_as_stored(monkeypatch) -> None:  # noqa: ANN001
    """JSON always shrinks in practice; were it not to, ingest's single-event limit still holds."""
    import edgewave.agent.uplink_batch as module
    monkeypatch.setattr(module, "encode_batch", lambda events: b"\xff" * 5000)
    b = batcher()
    b.add([(1, match(1))])
    assert b.encode(b.take(1)) == (match(1), 1)


def test_only_a_match_is_urgent_whatever_its_strings_say() -> None:
    b = batcher()
    tricky = encode_event(significant_event("gw1", "<urn:s1>", "<urn:p>", '"kind":"match"', 1, [], 1))
    b.add([(1, tricky)])
    assert b.ready(time.monotonic()) == 0


def test_event_content_options_keep_the_id() -> None:
    triples = [(TRIPLE, 5)]
    full = match_event("gw1", "p", {"a": "<urn:a>"}, 1, 5, triples, 6)
    bare = match_event("gw1", "p", {"a": "<urn:a>"}, 1, 5, triples, 6, content="none")
    assert bare["id"] == full["id"] == event_id("gw1", "match", "p", triples)
    assert full["triples"] and full["entailed"] == [] and bare["triples"] is None and bare["entailed"] is None
    with_t = significant_event("gw1", "<urn:s>", "<urn:p>", '"1"', 5, [TRIPLE], 6)
    without = significant_event("gw1", "<urn:s>", "<urn:p>", '"1"', 5, [TRIPLE], 6, with_triples=False)
    assert with_t["id"] == without["id"] and without["triples"] is None
    assert (without["sensor"], without["property"], without["result"], without["windowStart"]) == \
        ("<urn:s>", "<urn:p>", '"1"', 5)


def test_the_shipped_defaults_batch_and_leave_significant_triples_out() -> None:
    s = settings_from_dict({}).uplink
    assert s.batch.enabled and s.match_content == "full" and s.significant_triples is False


def test_the_pipeline_makes_events_with_the_configured_content() -> None:
    from agent_harness import ALARM, alarm, config_document, observation

    from edgewave.agent.pipeline import Pipeline
    from edgewave.agent.reconfigure import compile_document
    from edgewave.agent.status import Counters

    def events(uplink: dict) -> list[dict]:
        settings = settings_from_dict({"config": {"key": "k"}, "uplink": uplink})
        pipeline = Pipeline(settings, Counters())
        pipeline.rebuild(compile_document(1, "trig", config_document(1, patterns={"alarm": ALARM}), settings))
        return [*pipeline.handle("ew/in/alarm/s1", alarm(1), 1_000).events,
                *pipeline.handle("ew/in/air/t1", observation("o1", "t1", "temperature", 20.5), 1_001).events]

    shipped = events({})
    assert [e["kind"] for e in shipped] == ["match", "significant"]
    assert shipped[0]["triples"] and shipped[0]["entailed"] == [] and shipped[1]["triples"] is None
    other = events({"match_content": "none", "significant_triples": True})
    assert other[0]["triples"] is None and other[0]["entailed"] is None and len(other[1]["triples"]) == 3
    assert [e["id"] for e in other] == [e["id"] for e in shipped]
