"""SenML in CBOR (RFC 8428 section 6): the same records and triples as the JSON form, and hostile CBOR refused.

The RFC's own CBOR example (tests/data/payloads/senml-rfc8428-6.cbor) and the JSON examples
re-encoded with cbor2 map exactly as their JSON forms do. Hostile input (every tag, huge
declared lengths, deep nesting, truncation, missing breaks, bad UTF-8, NaN, random bytes and
random cbor2 values) is refused with a reason from REASONS, never another exception and never
a large allocation, or maps to valid triples.
"""
from __future__ import annotations

import datetime
import decimal
import fractions
import json
import math
import re
import tracemalloc
import uuid
from pathlib import Path

import cbor2
import pytest
import rdflib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.mapping import (PRESETS, REASONS, PayloadLimits, PayloadRejected, compile_mappings, preset_path,
                                    preset_triples)
from edgewave.agent.mapping.cbor_walk import check_cbor, decode_cbor
from edgewave.agent.mapping.payload_formats import decode_json, decode_senml_cbor
from edgewave.agent.mapping.senml import CBOR_LABELS
from edgewave.shared.ntriples import parse, parse_line, serialize

REPO = Path(__file__).resolve().parent.parent.parent
PAYLOADS = REPO / "tests" / "data" / "payloads"
BASE = "http://example.org/gw1/"
STREAM = "http://example.org/stream/building"
ARRIVAL = 1764407663123
LIMITS = PayloadLimits()
LABEL_OF = {name: label for label, name in CBOR_LABELS.items()}

MAPPING = """
@prefix rml: <http://w3id.org/rml/> . @prefix ew: <https://edgewave.dev/ns#> . @prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
<http://example.org/m#Records> a rml:TriplesMap ;
  rml:logicalSource [ rml:source [ a ew:MqttStream ; ew:topicFilter "rfc/+" ; ew:payloadFormat "%s" ;
                                   ew:baseIRI "http://example.org/gw1/" ] ;
                      rml:iterator "$[*]" ] ;
  rml:subjectMap [ rml:template "obs/{$.n}/{ew:resultMs}" ] ;
  rml:predicateObjectMap
    [ rml:predicate ex:v ; rml:objectMap [ rml:reference "$.v" ; rml:datatype xsd:decimal ] ] ,
    [ rml:predicate ex:vs ; rml:objectMap [ rml:reference "$.vs" ] ] ,
    [ rml:predicate ex:vb ; rml:objectMap [ rml:reference "$.vb" ] ] ,
    [ rml:predicate ex:vd ; rml:objectMap [ rml:reference "$.vd" ] ] ,
    [ rml:predicate ex:s ; rml:objectMap [ rml:reference "$.s" ; rml:datatype xsd:decimal ] ] ,
    [ rml:predicate ex:u ; rml:objectMap [ rml:reference "$.u" ] ] ,
    [ rml:predicate ex:name ; rml:objectMap [ rml:reference "$.name" ] ] ,
    [ rml:predicate ex:time ; rml:objectMap [ rml:reference "ew:resultTime" ; rml:datatype xsd:dateTime ] ] ,
    [ rml:predicate ex:timeSource ; rml:objectMap [ rml:reference "ew:timeSource" ; rml:termType rml:IRI ] ] .
"""


def compile_text(text: str, **options):
    graph = rdflib.Graph()
    graph.parse(data=text, format="turtle")
    return compile_mappings(parse(graph.serialize(format="nt")), **options)


[JSON_ROUTE] = compile_text(MAPPING % "senml+json")
[CBOR_ROUTE] = compile_text(MAPPING % "senml+cbor")
[SMALL_CBOR_ROUTE] = compile_text(MAPPING % "senml+cbor",
                                  limits=PayloadLimits(max_bytes=512, max_depth=4, max_entries=16, max_triples=8))
PRESET_ROUTES = {name: compile_mappings(preset_triples(name, stream=STREAM, base_iri=BASE))
                 for name in ("senml", "senml-cbor")}


def to_cbor(pack: list, text_labels: bool = False) -> bytes:
    """A JSON SenML pack as CBOR with RFC 8428's integer labels (``vd`` as bytes), or its text labels kept."""
    import base64

    records = []
    for record in pack:
        out = {}
        for key, value in record.items():
            if key == "vd":
                value = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            out[key if text_labels or key not in LABEL_OF else LABEL_OF[key]] = value
        records.append(out)
    return cbor2.dumps(records)


def preset_map(name: str, device: str, payload: bytes, arrival: int = ARRIVAL) -> set:
    [route] = PRESET_ROUTES[name]
    topic = route.topic_filter.replace("+", device)
    return set(route.map(payload, topic, arrival))


def refused(payload: bytes, route=CBOR_ROUTE) -> PayloadRejected:
    with pytest.raises(PayloadRejected) as caught:
        route.map(payload, "rfc/a", ARRIVAL)
    exc = caught.value
    assert exc.reason in REASONS
    assert not exc.detail.startswith("decoder error"), exc.detail
    return exc


# --- the RFC's example and the JSON examples ------------------------------------------------------------------


def test_the_rfc_cbor_example_is_its_json_form():
    cbor = (PAYLOADS / "senml-rfc8428-6.cbor").read_bytes()
    assert len(cbor) == 0xC3 and cbor[:3] == bytes.fromhex("87a721")
    as_json = (PAYLOADS / "senml-rfc8428-6.json").read_bytes()
    assert decode_senml_cbor(cbor, LIMITS) == decode_json(as_json, LIMITS)
    got = CBOR_ROUTE.map(cbor, "rfc/a", 0)
    assert set(got) == set(JSON_ROUTE.map(as_json, "rfc/a", 0))
    assert len(got) == 7 * 5
    assert ("<http://example.org/gw1/obs/urn%3Adev%3Aow%3A10e2073a0108006%3Acurrent/1276020071001>",
            "<http://example.org/v>", '"1.2"^^<http://www.w3.org/2001/XMLSchema#decimal>') in got
    assert ("<http://example.org/gw1/obs/urn%3Adev%3Aow%3A10e2073a0108006%3Acurrent/1276020076001>",
            "<http://example.org/u>", '"A"') in got          # the base unit, and 1.5 read from a half float
    assert ("<http://example.org/gw1/obs/urn%3Adev%3Aow%3A10e2073a0108006%3Acurrent/1276020074001>",
            "<http://example.org/v>", '"1.5"^^<http://www.w3.org/2001/XMLSchema#decimal>') in got


@pytest.mark.parametrize("file", sorted(p.name for p in PAYLOADS.glob("senml-*.json")))
@pytest.mark.parametrize("text_labels", [False, True])
def test_the_json_examples_encoded_with_cbor2_map_alike(file: str, text_labels: bool):
    as_json = (PAYLOADS / file).read_bytes()
    cbor = to_cbor(json.loads(as_json), text_labels)
    assert set(CBOR_ROUTE.map(cbor, "rfc/a", ARRIVAL)) == set(JSON_ROUTE.map(as_json, "rfc/a", ARRIVAL))


def test_every_kind_of_value_and_base_field_maps_alike():
    pack = [{"bn": "urn:dev:mac:0024befffe804ff1/", "bt": 1.7e9, "bu": "Cel", "bv": 20, "bs": 100, "bver": 10,
             "n": "temperature", "v": 1.5, "t": -1.25},
            {"n": "count", "s": 3, "u": "count", "ut": 60},
            {"n": "door", "vs": "open"}, {"n": "motion", "vb": True}, {"n": "blob", "vd": "AAECA_-8"},
            {"n": "ext", "v": -2, "x": [1, {"y": None}]},
            {"n": "big", "v": 18446744073709551615}, {"n": "neg", "v": -9999999999999999999}]
    as_json = json.dumps(pack).encode()
    got = CBOR_ROUTE.map(to_cbor(pack), "rfc/a", ARRIVAL)
    assert set(got) == set(JSON_ROUTE.map(as_json, "rfc/a", ARRIVAL))
    assert any(o == '"AAECA_-8"' for _, _, o in got)            # vd: bytes back to base64url without padding
    assert any(o == '"18446744073709551635"^^<http://www.w3.org/2001/XMLSchema#decimal>' for _, _, o in got)  # + bv


def test_the_senml_cbor_preset_maps_as_the_senml_preset():
    pack = [{"bn": "urn:dev:mac:0024befffe804ff1/", "bt": 1.7e9, "n": "temperature", "u": "Cel", "v": 21.5},
            {"n": "humidity", "u": "%RH", "v": 48}, {"n": "co2", "u": "ppm", "v": 612},
            {"n": "smoke", "t": 1, "vb": False}, {"n": "motion", "vb": True}, {"n": "door", "vs": "closed"},
            {"n": "battery", "v": 97}]
    as_json = preset_map("senml", "room3-temp", json.dumps(pack).encode())
    assert len(as_json) == 6 * 6 + 3
    assert preset_map("senml-cbor", "room3-temp", to_cbor(pack)) == as_json
    for pack in ([{"n": "humidity", "u": "%RH", "v": 48}], [{"n": "temperature", "u": "Cel", "t": -3, "v": 19}]):
        assert preset_map("senml-cbor", "d", to_cbor(pack)) == preset_map("senml", "d", json.dumps(pack).encode())


def test_the_senml_cbor_preset_is_the_senml_preset_on_another_source():
    """Only the source differs (name, topic filter, format); every triples map is the same."""
    from rdflib.compare import isomorphic

    def maps(name: str) -> rdflib.Graph:
        graph = rdflib.Graph()
        graph.parse(preset_path(name), format="turtle")
        text = graph.serialize(format="nt").replace("https://edgewave.dev/mappings/senml-cbor#",
                                                    "https://edgewave.dev/mappings/senml#")
        graph = rdflib.Graph()
        graph.parse(data=text, format="nt")
        graph.remove((rdflib.URIRef("https://edgewave.dev/mappings/senml#source"), None, None))
        return graph

    assert "senml-cbor" in PRESETS
    assert isomorphic(maps("senml-cbor"), maps("senml"))
    [route] = PRESET_ROUTES["senml-cbor"]
    assert (route.topic_filter, route.payload_format, route.name) == ("senml-cbor/+", "senml+cbor", "senml-cbor")


# --- SenML rules on CBOR ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("pack, reason, detail", [
    ([{0: "a", 2: 1, "v": 2}], "malformed", "'v' twice"),
    ([{0: "a", 9: 1, 2: 1}], "malformed", "no SenML label"),
    ([{0: "a", -7: 1, 2: 1}], "malformed", "no SenML label"),
    ([{0: "a", 8: "AAEC"}], "wrong_type", "vd must be a byte string"),
    ([{0: b"temperature", 2: 1}], "wrong_type", "n must be a string"),
    ([{0: "a", 2: b"\x01"}], "wrong_type", "v must be a number"),
    ([{0: "a", 4: 1}], "wrong_type", "vb must be a boolean"),
    ([{0: "a", 2: 1, "x_": 1}], "malformed", "must be understood"),
    ([{0: "a", 2: 1, 3: "x"}], "malformed", "more than one value"),
    ({0: "a", 2: 1}, "malformed", "CBOR array of records"),
    ([[0, "a"]], "malformed", "not a CBOR map"),
    ([{0: "a", 2: 1, 6: 2 ** 64 - 1}], "not_finite", "out of range"),
    ([{0: "a", 2: 1e308, -5: 1e308}], "not_finite", "bv + v"),
    ([{0: "a b", 2: 1}], "malformed", "not a SenML name"),
])
def test_senml_rules_apply_to_cbor_packs(pack, reason: str, detail: str):
    exc = refused(cbor2.dumps(pack))
    assert exc.reason == reason and detail in exc.detail, exc


# --- hostile CBOR ---------------------------------------------------------------------------------------------


def _head(major: int, argument: int) -> bytes:
    if argument < 24:
        return bytes([major << 5 | argument])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if argument < 1 << (8 * size):
            return bytes([major << 5 | info]) + argument.to_bytes(size, "big")
    raise ValueError(argument)


TAGS = [0, 1, 2, 3, 4, 5, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 32, 33, 34, 35, 36, 37, 38, 256, 258, 260, 261,
        262, 263, 270, 1004, 55799, 2 ** 32, 2 ** 64 - 1]


@pytest.mark.parametrize("tag", TAGS)
def test_every_tag_is_refused_wherever_it_is(tag: int):
    tagged = _head(6, tag) + cbor2.dumps("x")
    for payload in (tagged,
                    b"\x81" + tagged,                                             # [tag]
                    b"\x81\xa2\x00" + cbor2.dumps("temperature") + b"\x02" + tagged,   # a record's value
                    b"\x81\xa2" + tagged + b"\x01\x00\x61a"):                    # a map key
        exc = refused(payload)
        assert exc.reason == "malformed" and "tag" in exc.detail, exc


@pytest.mark.parametrize("value", [
    re.compile("(a+)+$"), cbor2.CBORTag(36, "Content-Type: text/plain\n\nhi"), {1, 2}, frozenset({3}),
    decimal.Decimal("1e-999999"),
    fractions.Fraction(1, 3), datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), datetime.date(2026, 1, 1),
    uuid.UUID(int=7), 2 ** 64, -(2 ** 64) - 1, 10 ** 400, cbor2.CBORTag(99999, [1]), cbor2.undefined,
    cbor2.CBORSimpleValue(99),
], ids=lambda v: type(v).__name__)
def test_what_cbor2_would_turn_into_objects_is_refused(value):
    for payload in (cbor2.dumps(value), cbor2.dumps([{0: "temperature", 2: value}])):
        exc = refused(payload)
        assert exc.reason == "malformed", exc


def test_shared_and_string_references_are_refused():
    shared = [1]
    payload = cbor2.dumps([{0: "a", 2: 1, "x": shared, "y": shared}], value_sharing=True)
    assert refused(payload).reason == "malformed"
    payload = cbor2.dumps([{0: "temperature", 2: 1, "long-extension": "long text", "z": "long text"}],
                          string_referencing=True)
    assert refused(payload).reason == "malformed"
    assert refused(bytes.fromhex("d81c81d81d00")).reason == "malformed"      # 28([29(0)]): a self-reference


@pytest.mark.parametrize("major", [2, 3, 4, 5])
@pytest.mark.parametrize("length", [2 ** 32, 2 ** 63, 2 ** 64 - 1, 17000, 20])
def test_declared_lengths_beyond_the_payload_allocate_nothing(major: int, length: int):
    for payload in (_head(major, length) + b"\x00" * 5, b"\x81" + _head(major, length) + b"abc",
                    b"\x81\xa1\x00" + _head(major, length) + b"\x01\x02"):
        tracemalloc.start()
        try:
            exc = refused(payload)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert exc.reason == "malformed" and "remain" in exc.detail, exc
        assert peak < 64 * 1024, peak


def test_deep_nesting_is_refused_before_anything_is_built():
    for opener in (b"\x81", b"\x9f", b"\xa1\x00"):
        payload = opener * 100_000 + b"\x00"
        assert refused(payload).reason == "oversized"
        big = PayloadLimits(max_bytes=1_000_000)
        tracemalloc.start()
        try:
            with pytest.raises(PayloadRejected) as caught:
                decode_cbor(payload, big)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert caught.value.reason == "too_deep", caught.value
        assert peak < 1024 * 1024 + 64 * 1024, peak          # the payload's copy, little more
    nested = b"\x81" * 16 + b"\x00"
    assert decode_cbor(nested, LIMITS) is not None
    assert refused(b"\x81" * 17 + b"\x00").reason == "too_deep"


def test_entries_are_bounded_before_the_container_is_read():
    assert refused(b"\x99\x07\xd0" + b"\x00" * 2000).reason == "too_many_entries"            # 2,000 items
    assert refused(b"\x9f" + b"\x00" * 2000 + b"\xff").reason == "too_many_entries"          # indefinite
    assert refused(b"\xbf" + b"\x00\x00" * 1100 + b"\xff").reason == "too_many_entries"
    assert refused(b"\x82" + b"\x99\x02\x00" + b"\x00" * 512 + b"\x99\x02\x01" + b"\x00" * 513).reason \
        == "too_many_entries"
    assert len(decode_cbor(b"\x99\x03\xff" + b"\x00" * 1023, LIMITS)) == 1023


def test_every_truncation_of_the_rfc_example_is_refused():
    cbor = (PAYLOADS / "senml-rfc8428-6.cbor").read_bytes()
    for end in range(len(cbor)):
        exc = refused(cbor[:end])
        assert exc.reason == "malformed", (end, exc)
    assert refused(cbor + b"\x00").reason == "malformed"           # a second data item


@pytest.mark.parametrize("payload, detail", [
    (b"\x9f\x01\x02", "ends inside"),
    (b"\x9f\xa1\x00\x61a", "ends inside"),
    (b"\xbf\x00\x01", "ends inside"),
    (b"\xbf\x00\xff", "key without its value"),
    (b"\x82\x01\xff", "ends nothing"),
    (b"\xff", "ends nothing"),
    (b"\x7f\x61a\xff", "indefinite-length string"),
    (b"\x5f\x41a\xff", "indefinite-length string"),
    (b"\x1f", "reserved or indefinite"),
    (b"\x1c", "reserved or indefinite"),
    (b"\xdf", "reserved or indefinite"),
    (b"\xf7", "not false, true, null or a float"),
    (b"\xf8\x20", "not false, true, null or a float"),
    (b"\xe0", "not false, true, null or a float"),
    (b"\xa1\xf5\x00", "not an integer or text"),
    (b"\xa1\xfb\x00\x00\x00\x00\x00\x00\x00\x00\x00", "not an integer or text"),
    (b"\xa1\x41a\x00", "not an integer or text"),
    (b"\xa1\x80\x00", "not an integer or text"),
    (b"\xbf\xa0\x00\xff", "not an integer or text"),
    (b"\x81\xa2\x00\x61a\x00\x61b", "Duplicate"),
    (b"", "empty"),
])
def test_broken_structure_is_malformed(payload: bytes, detail: str):
    exc = refused(payload)
    assert exc.reason == "malformed" and detail in exc.detail, exc


@pytest.mark.parametrize("text", [b"\xff\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"a\xf4\x90\x80\x80"])
def test_text_that_is_not_utf8_and_lone_surrogates_are_malformed(text: bytes):
    for payload in (_head(3, len(text)) + text,
                    b"\x81\xa2\x00" + _head(3, len(text)) + text + b"\x02\x01",
                    b"\x81\xa3\x00\x61a\x02\x01" + _head(3, len(text)) + text + b"\x01"):
        assert refused(payload).reason == "malformed"


@pytest.mark.parametrize("number", ["f97c00", "f9fc00", "f97e00", "f97c01", "fa7f800000", "faff800000", "fa7fc00000",
                                    "fb7ff0000000000000", "fbfff0000000000000", "fb7ff8000000000001"])
def test_nan_and_infinity_are_not_finite(number: str):
    raw = bytes.fromhex(number)
    for payload in (raw, b"\x81\xa2\x00\x61a\x02" + raw, b"\x81\xa3\x00\x61a\x02\x01\x61x" + raw):
        assert refused(payload).reason == "not_finite"


def test_integers_as_the_json_path_bounds_them():
    assert decode_cbor(cbor2.dumps(-9999999999999999999), LIMITS) == -9999999999999999999
    assert decode_cbor(cbor2.dumps(2 ** 64 - 1), LIMITS) == 2 ** 64 - 1
    assert refused(cbor2.dumps(-(10 ** 19))).reason == "not_finite"
    assert refused(cbor2.dumps(-(2 ** 64))).reason == "not_finite"
    assert refused(cbor2.dumps(-(10 ** 19)), JSON_ROUTE).reason == "malformed"    # (CBOR is not JSON)
    assert refused(b"-10000000000000000000", JSON_ROUTE).reason == "not_finite"


def test_floats_of_every_width_read_as_cbor2_reads_them():
    for raw in ("f93e00", "f90001", "f98000", "fa47c35000", "fb3ff199999999999a", "f97bff"):
        data = bytes.fromhex(raw)
        assert decode_cbor(data, LIMITS) == cbor2.loads(data)


# --- generated input ------------------------------------------------------------------------------------------

labels = st.sampled_from(list(CBOR_LABELS)) | st.sampled_from(["n", "v", "bn", "x", "x_", "vd"]) | st.integers(-9, 9)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 64), 2 ** 64 - 1) | st.floats(width=16) | st.floats(width=32)
    | st.floats() | st.text(max_size=12) | st.binary(max_size=12) | st.sampled_from(["temperature", "humidity", "door",
                                                                                       "open", "Cel", "%RH"]),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(labels | st.text(max_size=4), children,
                                                                      max_size=6),
    max_leaves=25)
tagged = st.builds(cbor2.CBORTag, st.sampled_from(TAGS), plain)
records = st.lists(st.dictionaries(labels, plain | tagged, max_size=7), min_size=1, max_size=5)


def hostile_cbor():
    return st.one_of(
        st.binary(max_size=300),
        st.binary(max_size=60).map(lambda b: b"\x81" + b),
        plain.map(cbor2.dumps),
        records.map(cbor2.dumps),
        st.recursive(plain, lambda children: st.lists(children, max_size=4) | st.builds(
            cbor2.CBORTag, st.sampled_from(TAGS), children), max_leaves=10).map(cbor2.dumps),
        st.tuples(records.map(cbor2.dumps), st.integers(0, 400), st.binary(min_size=1, max_size=3)).map(
            lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + len(t[2]):]),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=hostile_cbor())
def test_hostile_cbor_is_refused_with_a_reason_or_maps_to_valid_triples(payload: bytes):
    for route in [CBOR_ROUTE, SMALL_CBOR_ROUTE] + PRESET_ROUTES["senml-cbor"]:
        topic = route.topic_filter.replace("+", "dev-1")
        try:
            triples = route.map(payload, topic, ARRIVAL)
        except PayloadRejected as exc:
            assert exc.reason in REASONS, exc.reason
            assert not exc.detail.startswith("decoder error"), exc.detail
            continue
        assert 0 < len(triples) <= route.limits.max_triples
        for triple in triples:
            assert parse_line(serialize(triple)) == triple, triple


def _same(a, b) -> bool:
    if type(a) is float and type(b) is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(value=plain)
def test_plain_values_decode_as_cbor2_decodes_them(value):
    """The check lets through exactly the plain values it should, and they come out as cbor2 reads them."""
    data = cbor2.dumps(value)
    try:
        got = decode_cbor(data, PayloadLimits(max_entries=10_000))
    except PayloadRejected as exc:
        assert exc.reason == "not_finite", exc
        return
    assert _same(got, cbor2.loads(data))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_what_the_check_accepts_cbor2_reads_as_plain_values(data: bytes):
    try:
        check_cbor(data, LIMITS)
    except PayloadRejected as exc:
        assert exc.reason in REASONS
        return
    try:
        value = decode_cbor(data, LIMITS)
    except PayloadRejected as exc:                  # what only cbor2 checks: UTF-8, a key given twice
        assert exc.reason == "malformed" and ("text" in exc.detail or "Duplicate" in exc.detail), exc
        return
    stack = [value]
    while stack:
        item = stack.pop()
        assert type(item) in (int, float, bool, type(None), str, bytes, list, dict), type(item)
        if type(item) is list:
            stack.extend(item)
        elif type(item) is dict:
            assert all(type(k) in (int, str) for k in item)
            stack.extend(item.values())
