"""Uplink batches: the same events in one compressed payload, back exactly; hostile batches refused."""
from __future__ import annotations

import json
import struct
import zlib
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.evidence import Entailment
from edgewave.shared.bounded_json import load_json
from edgewave.shared.events import (CONTEXT, EARLIER_CONTEXT, FIELDS, GENERATION_CONTEXTS, EventError, EventLimits,
                                    decode_event, encode_event, instance_events, match_event, rows_dicts,
                                    significant_event)
from edgewave.shared.uplink_batch import (HEADER, MAGIC, MAX_DEPTH, ZDICT, BatchError, build_table, check_event,
                                          decode_batch, encode_batch, is_batch, window_bits)

DEMO = Path(__file__).resolve().parent.parent / "data" / "uplink" / "demo-events.jsonl"
EX = "http://example.org/"
SOSA = "http://www.w3.org/ns/sosa/"
PROPERTIES = settings(max_examples=200, deadline=timedelta(seconds=10), derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def demo_events() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


def raw_batch(body: bytes, count: int, *, declared: int | None = None, version: int = 1, codec: int = 0,
              compressed: bytes | None = None) -> bytes:
    """A batch written by hand, to say what a hostile sender could."""
    if compressed is None:
        packer = zlib.compressobj(6, zdict=ZDICT)
        compressed = packer.compress(body) + packer.flush()
    return HEADER.pack(MAGIC, version, codec, count, len(body) if declared is None else declared) + compressed


def body_of(table: list, events: list) -> bytes:
    return json.dumps([table, events], separators=(",", ":")).encode()


def compact(event: dict) -> list:
    return [1] + [event.get(f.name) for f in FIELDS]


# -- the round trip ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 8, 32, 36])
def test_the_demos_events_come_back_exactly_in_order_with_and_without_the_table(size):
    events = demo_events()
    for start in range(0, len(events), size):
        chunk = events[start:start + size]
        for shared in (True, False):
            payload = encode_batch(chunk, shared_table=shared)
            assert is_batch(payload)
            assert decode_batch(payload) == chunk
            assert [e["id"] for e in decode_batch(payload)] == [e["id"] for e in chunk]


def test_a_batch_is_much_smaller_than_its_events_one_by_one():
    events = demo_events()
    single = sum(len(encode_event(e)) for e in events[:32])
    assert len(encode_batch(events[:32])) * 10 < single
    assert len(encode_batch(events[:1])) * 4 < len(encode_event(events[0]))


def test_the_window_fitted_to_the_body_compresses_as_small_as_the_largest():
    """A batch is compressed with the smallest window that holds the dictionary and its body;
    it must come out exactly as small as with zlib's largest window, and decode the same."""
    events = demo_events() * 30     # up to well past 32 kB of body: the largest window again
    seen_bits = set()
    for size in (1, 2, 5, 32, 200, 1000):       # 1,000: ingest's most events a batch
        payload = encode_batch(events[:size])
        body = zlib.decompressobj(zdict=ZDICT).decompress(payload[HEADER.size:])
        largest = zlib.compressobj(6, zdict=ZDICT)
        assert len(payload) - HEADER.size == len(largest.compress(body) + largest.flush())
        assert decode_batch(payload) == events[:size]
        seen_bits.add(window_bits(len(body)))
    assert min(seen_bits) < zlib.MAX_WBITS and zlib.MAX_WBITS in seen_bits


def test_the_table_holds_the_iris_the_batch_repeats_and_references_resolve():
    events = demo_events()[:8]
    table = build_table(events)
    assert table and all(t.startswith("<") and t.endswith(">") for t in table)
    assert "<http://www.w3.org/ns/sosa/madeBySensor>" in table
    assert build_table(events[:1]) == []
    assert decode_batch(encode_batch(events)) == events


def test_an_event_without_context_stays_without_and_nulls_stay_null():
    event = {k: v for k, v in significant_event("gw1", f"<{EX}s>", f"<{EX}T>", '"1"', 5, [], 6).items()
             if k != "@context"}
    event["bindings"] = None
    assert decode_batch(encode_batch([event, event])) == [event, event]


def test_every_batched_event_lands_as_the_same_event_sent_alone():
    for event in demo_events():
        assert check_event(event) == decode_event(encode_event(event))


def test_no_json_payload_starts_with_the_magic_byte():
    assert not is_batch(encode_event(demo_events()[0]))
    assert not is_batch(b"")
    with pytest.raises(UnicodeDecodeError):
        bytes((MAGIC,)).decode("utf-8")


def test_the_encoder_refuses_what_is_not_an_event():
    event = demo_events()[0]
    with pytest.raises(BatchError, match="1 to 65535"):
        encode_batch([])
    with pytest.raises(BatchError, match="unknown keys"):
        encode_batch([{**event, "extra": 1}])
    with pytest.raises(BatchError, match="missing"):
        encode_batch([{k: v for k, v in event.items() if k != "entailed"}])
    with pytest.raises(BatchError, match="@context"):
        encode_batch([{**event, "@context": {"x": "y"}}])
    with pytest.raises(BatchError, match="integer"):
        encode_batch([{**event, "windowEnd": "1"}])
    with pytest.raises(BatchError):
        encode_batch([{**event, "triples": [1]}])
    with pytest.raises(BatchError, match="lone surrogate"):
        encode_batch([{**event, "gateway": "\ud800"}])


# -- hostile batches ----------------------------------------------------------------------

GOOD = demo_events()[:2]


@pytest.mark.parametrize("payload, reason", [
    (bytes((MAGIC,)), "shorter than its 9-byte header"),
    (raw_batch(b"[[],[]]", 1, version=2), "format version 2 is unknown"),
    (raw_batch(b"[[],[]]", 1, codec=7), "codec 7 is unknown"),
    (raw_batch(b"[[],[]]", 0), "batch of 0 events"),
    (raw_batch(b"[[],[]]", 1001), "batch of 1001 events"),
    (raw_batch(b"[[],[]]", 1, declared=9 * 1024 * 1024), "inflates to 9437184 bytes"),
    (raw_batch(b"[[],[]]", 1, compressed=b"not zlib at all"), "not zlib data"),
    (raw_batch(b"[[],[]]", 1, declared=3), "inflates to more than 4 bytes, not the 3"),
    (raw_batch(b"[[],[]]", 1, declared=100), "inflates to 7 bytes, not the 100"),
    (encode_batch(GOOD)[:-3], "cut short"),
    (encode_batch(GOOD) + b"tail", "followed by other data"),
    (raw_batch(b"[[],[]", 1), "batch body: not JSON"),
    (raw_batch(b"{}", 1), "must be [table, events]"),
    (raw_batch(b"[[1],[]]", 1), "table must hold strings"),
    (raw_batch(body_of([], [compact(GOOD[0])]), 2), "holds 1 events, its header says 2"),
    (raw_batch(body_of([], [compact(GOOD[0])[:-1]]), 1), "event 0: not an array"),
    (raw_batch(body_of([], [[True] + compact(GOOD[0])[1:]]), 1), "event 0: not an array"),
    (raw_batch(body_of(["a"], [compact({**GOOD[0], "gateway": 1})]), 1), "reference 1 outside the table of 1"),
    (raw_batch(body_of(["a"], [compact({**GOOD[0], "gateway": [0, -1]})]), 1), "reference -1 outside"),
    (raw_batch(body_of([], [compact({**GOOD[0], "gateway": []})]), 1), "non-empty array of pieces"),
    (raw_batch(body_of([], [compact({**GOOD[0], "gateway": [1.5]})]), 1), "a piece must be"),
    (raw_batch(body_of([], [compact({**GOOD[0], "windowEnd": "5"})]), 1), "windowEnd must be an integer"),
    (raw_batch(body_of([], [compact({**GOOD[0], "windowEnd": True})]), 1), "windowEnd must be an integer"),
    (raw_batch(body_of([], [compact({**GOOD[0], "triples": "x"})]), 1), "triples must be an array"),
    (raw_batch(body_of([], [compact({**GOOD[0], "bindings": [["a"]]})]), 1), "pairs"),
    (raw_batch(body_of([], [compact({**GOOD[0], "entailed": [["a", "b"]]})]), 1), "entries"),
    (raw_batch(b"[[]," + b"[" * 20 + b"]" * 20 + b"]", 1), "nesting depth"),
    (raw_batch(b'[["\\ud800"],[]]', 1), "lone UTF-16 surrogate"),
    (raw_batch(b"[[],[[1," + b"9" * 30 + b"]]]", 1), "digits"),
    (raw_batch(b'[["\xff"],[]]', 1), "not UTF-8"),
])
def test_a_hostile_batch_is_a_batch_error_naming_what_is_wrong(payload, reason):
    with pytest.raises(BatchError) as caught:
        decode_batch(payload)
    assert reason in str(caught.value)
    assert isinstance(caught.value, EventError)   # what ingest quarantines


def test_a_zlib_bomb_is_refused_before_or_while_inflating_never_in_full():
    bomb = zlib.compress(b"[" * 50_000_000, 9)
    assert len(bomb) < 100_000
    with pytest.raises(BatchError, match="inflates to 50000000"):
        decode_batch(HEADER.pack(MAGIC, 1, 0, 1, 50_000_000) + bomb)
    # A header that lies: inflating stops one byte past what it declared.
    packer = zlib.compressobj(9, zdict=ZDICT)
    lying = HEADER.pack(MAGIC, 1, 0, 1, 1000) + packer.compress(b" " * 50_000_000) + packer.flush()
    with pytest.raises(BatchError, match="more than 1001 bytes|not the 1000"):
        decode_batch(lying)


def test_references_cannot_expand_beyond_the_inflated_limit():
    big = "x" * 60_000
    event = compact({**GOOD[0], "triples": [0] * 200})
    payload = raw_batch(body_of([big], [event]), 1)
    assert len(payload) < 2_000
    with pytest.raises(BatchError, match="expand beyond max_inflated_bytes"):
        decode_batch(payload)
    small = EventLimits(max_inflated_bytes=100_000)
    with pytest.raises(BatchError, match="expand beyond"):
        decode_batch(raw_batch(body_of([big], [compact({**GOOD[0], "triples": [0, 0]})]), 1), small)


def test_the_batch_limits_are_configurable():
    payload = encode_batch(demo_events()[:8])
    with pytest.raises(BatchError, match="at most 100"):
        decode_batch(payload, EventLimits(max_batch_bytes=100))
    with pytest.raises(BatchError, match="1 to 4"):
        decode_batch(payload, EventLimits(max_batch_events=4))
    with pytest.raises(BatchError, match="at most 1000"):
        decode_batch(payload, EventLimits(max_inflated_bytes=1000))
    assert len(decode_batch(payload, EventLimits(max_batch_events=8))) == 8


def test_the_deepest_event_fits_the_batch_depth():
    entailed = [Entailment((f"<{EX}r>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{EX}Room>"), 1,
                           (f"<{EX}s>", f"<{EX}in>", f"<{EX}r>"), "O", f"<{EX}r>",
                           ((f"<{EX}in>", "<http://www.w3.org/2000/01/rdf-schema#range>", f"<{EX}Room>"),))]
    triples = [((f"<{EX}s>", f"<{EX}in>", f"<{EX}r>"), 1)]
    event = match_event("gw1", "p", {"room": f"<{EX}r>"}, 0, 1, triples, 2, entailed=entailed)
    payload = encode_batch([event, event])
    body = zlib.decompressobj(zdict=ZDICT).decompress(payload[HEADER.size:])
    assert load_json(body, max_depth=MAX_DEPTH)
    assert decode_batch(payload) == [event, event]


def test_a_checked_event_is_refused_as_a_single_event_would_be():
    event = {**GOOD[0], "kind": "other"}
    with pytest.raises(EventError, match="unknown kind"):
        check_event(decode_batch(encode_batch([event]))[0])
    with pytest.raises(EventError, match="beyond a signed 64-bit"):
        check_event(decode_batch(encode_batch([{**GOOD[0], "windowEnd": 2 ** 64}]))[0])


# -- property: encode -> decode is the identity -------------------------------------------------

_TEXT = st.text(max_size=30)   # no lone surrogates: what an agent can write
_IRIS = st.sampled_from([f"<{EX}gw1/room{i}>" for i in range(3)] + [f"<{SOSA}madeBySensor>", f"<{EX}a b>", "<>",
                                                                    "<<", ">>", "<x<y>"])
_TERM = st.one_of(_TEXT, _IRIS, st.lists(st.one_of(_IRIS, _TEXT), max_size=4).map(" ".join))
_LONGS = st.integers(-(2 ** 63), 2 ** 63 - 1)


@st.composite
def _event(draw) -> dict:
    triples = draw(st.lists(st.tuples(st.tuples(_TERM, _TERM, _TERM), _LONGS), max_size=4))
    if draw(st.booleans()):
        entailed = [Entailment(t, ts, draw(st.tuples(_TERM, _TERM, _TERM)), "S", t[0],
                               tuple(draw(st.lists(st.tuples(_TERM, _TERM, _TERM), max_size=3))))
                    for t, ts in triples]
        event = match_event(draw(_TEXT), draw(_TERM), draw(st.dictionaries(_TEXT, _TERM, max_size=3)),
                            draw(_LONGS), draw(_LONGS), triples, draw(_LONGS), entailed=entailed)
    else:
        event = significant_event(draw(_TEXT), draw(_TERM), draw(_TERM), draw(_TERM), draw(_LONGS),
                                  [t for t, _ in triples], draw(_LONGS))
    if draw(st.booleans()):
        del event["@context"]
    return event


@PROPERTIES
@given(st.lists(_event(), min_size=1, max_size=6), st.booleans())
def test_any_events_come_back_exactly_as_encoded(events, shared):
    payload = encode_batch(events, shared_table=shared)
    decoded = decode_batch(payload)
    assert decoded == events
    assert [check_event(e) for e in decoded] == [decode_event(encode_event(e)) for e in events]


def test_the_context_written_is_the_one_the_event_carried():
    """Events made now carry the standard context; the demo's recording, from before instance
    results, the earlier one: each comes back with its own."""
    fresh = instance_result(1) + [match_event("gw1", "p", {"x": "<a>"}, 1, 2, [(("<a>", "<b>", "<c>"), 1)], 3)]
    assert all(e["@context"] == CONTEXT for e in decode_batch(encode_batch(fresh)))
    assert all(e["@context"] == EARLIER_CONTEXT for e in decode_batch(encode_batch(GOOD)))


def test_the_header_is_what_the_docs_say():
    payload = encode_batch(GOOD)
    magic, version, codec, count, inflated = struct.unpack(">BBBHI", payload[:9])
    assert (magic, version, codec, count) == (0xFF, 1, 0, 2)
    assert len(zlib.decompressobj(zdict=ZDICT).decompress(payload[9:])) == inflated


# -- instance results and events from before them ---------------------------------------------

def instance_result(rows: int = 3) -> list[dict]:
    return instance_events("gw1", "co2-per-room", 60_000, 120_000, "RSTREAM",
                           [{"room": f"<{EX}gw1/room{i}>", "avg": f'"{400 + i}.5"^^<http://www.w3.org/2001/XMLSchema#decimal>'}
                            for i in range(rows)] + [{"room": f"<{EX}gw1/room9>"}], 125_000)


def test_an_instance_result_comes_back_exactly_beside_matches_and_observations():
    events = demo_events()[:5] + instance_result() + demo_events()[5:8]
    for shared in (True, False):
        decoded = decode_batch(encode_batch(events, shared_table=shared))
        assert decoded == events
        landed = check_event(decoded[5])
        assert landed["kind"] == "instance" and landed["operator"] == "RSTREAM"
        assert rows_dicts(landed)[-1] == {"room": f"<{EX}gw1/room9>"}    # the unbound ?avg is absent


def test_events_stored_before_instance_results_are_batched_and_landed_as_they_were():
    """An outbox kept across an upgrade holds events without operator and rows, under the
    earlier context: they go up unchanged and land with the two fields null."""
    old = {k: v for k, v in demo_events()[0].items() if k not in ("operator", "rows")}
    old["@context"] = EARLIER_CONTEXT
    assert decode_batch(encode_batch([old, *instance_result(1)])) == [old, *instance_result(1)]
    landed = check_event(old)
    assert landed["operator"] is None and landed["rows"] is None


def test_events_stored_before_absences_and_chained_rules_are_batched_and_landed_as_they_were():
    """An outbox kept across the next upgrade: an instance result and a match with operator
    and rows but without expected and derivedFrom, under that generation's context, beside
    an absence that carries them."""
    older = []
    for e in [*instance_result(1), demo_events()[1]]:
        e = {k: v for k, v in e.items() if k not in ("expected", "derivedFrom")}
        e["@context"] = GENERATION_CONTEXTS[1]
        e.setdefault("operator", None)
        e.setdefault("rows", None)
        older.append(e)
    absence = match_event("gw1", "silent", {"sensor": f"<{EX}gw1/s1>"}, 1_000, 46_000,
                          [((f"<{EX}gw1/s1>", "<http://ex.org/beat>", '"1"'), 1_000)], 46_010,
                          expected=[f"<{EX}gw1/s1> <http://ex.org/beat> ?n ."],
                          derived_from=["urn:edgewave:event:" + "0" * 32])
    events = [*older, absence]
    assert decode_batch(encode_batch(events)) == events
    assert decode_batch(encode_batch(events, shared_table=False)) == events
    landed = [check_event(e) for e in decode_batch(encode_batch(events))]
    assert [e["expected"] for e in landed] == [None, None, absence["expected"]]
    assert landed[-1]["derivedFrom"] == absence["derivedFrom"]


def test_a_large_instance_result_is_cut_into_events_ingest_accepts():
    events = instance_result(1_200)
    assert [len(e["rows"]) for e in events] == [500, 500, 201]
    assert len({e["id"] for e in events}) == 3
    assert all(check_event(e)["rows"] for e in events)
    assert events[0]["id"] == instance_result(1_200)[0]["id"]       # reported again: the same ids


@pytest.mark.parametrize("change,reason", [
    ({"operator": "XSTREAM"}, "operator"),
    ({"rows": None}, "needs pattern, rows"),
    ({"rows": [[{"variable": "a"}]]}, "rows must be an array of rows"),
    ({"rows": [{"variable": "a", "value": "b"}]}, "rows must be an array of rows"),
    ({"type": "Match"}, "does not go with kind"),
    ({"rows": [[{"variable": "a", "value": "<x>"}, {"variable": "a", "value": "<y>"}]]}, "binds a variable twice"),
])
def test_a_malformed_instance_event_is_refused_with_the_reason(change, reason):
    with pytest.raises(EventError, match=reason):
        check_event({**instance_result(1)[0], **change})


def test_ingest_holds_an_instance_result_to_max_rows():
    with pytest.raises(EventError, match="at most 100"):
        check_event(instance_result(200)[0], EventLimits(max_rows=100))
