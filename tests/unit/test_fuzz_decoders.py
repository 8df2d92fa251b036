"""Every decoder of outside input against hostile input (property-based, hypothesis).

Each decoder must return a result or raise its one documented error: never
RecursionError, a ValueError from int(), UnicodeError, MemoryError, IndexError...; never
hang (a deadline per example, a timeout per test) and never take memory out of
proportion to its input. What can be written back (events, N-Triples statements,
envelopes, RSP-QL terms) must read back equal.

The hostile inputs: deep nesting (JSON brackets, quoted triples, SPARQL groups and
brackets, Turtle collections and blank nodes), 5,000-digit numbers, lone surrogates
(escaped, and raw in str input), NUL bytes, invalid UTF-8, every cut of real valid
samples, very long IRIs and literals, every N-Triples escape, valid and invalid.
Examples are derandomized (the same every run, no database) and bounded so that the
file runs in well under a minute; the coverage-guided fuzzing is tests/fuzz/.
"""
from __future__ import annotations

import json
import sqlite3
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.query import QuerySyntaxError, TriplePattern, is_var
from edgewave.agent.engine.rspql import MAX_NESTING, parse_query
from edgewave.cloud.landing import LandingZone
from edgewave.cloud.registry import (AckError, StatusError, ensure_registry_schema, parse_ack, parse_status,
                                     record_ack, record_status)
from edgewave.firmware_sim.datasets import DatasetError, convert
from edgewave.firmware_sim.recording import parse_messages, read_messages
from edgewave.shared import ntriples
from edgewave.shared.configdoc import (ConfigRejected, build_config_document, load_config_document, sign_envelope,
                                       verify_envelope)
from edgewave.shared.events import FIELDS, EventError, decode_event, encode_event, match_event, significant_event
from edgewave.shared.ntriples import NTriplesError, literal_parts, make_iri, make_literal, parse, parse_line, serialize
from edgewave.shared.recorded import RecordedStreamError, read_recorded

REPO = Path(__file__).resolve().parent.parent.parent
NT_DATA = REPO / "tests" / "data" / "ntriples"
PATTERNS = sorted((REPO / "configs" / "patterns").glob("*.rq"))
GATEWAY_CONFIG = REPO / "configs" / "gateway-config.trig"
XSD = "http://www.w3.org/2001/XMLSchema#"
EX = "http://example.org/"

# Generous for a loaded two-core machine, far below what a hang or a quadratic blow-up
# takes; pytest's timeout ends a test whose example never returns.
FUZZ = settings(max_examples=300, deadline=timedelta(seconds=10), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])
pytestmark = pytest.mark.timeout(180)

# ---------------------------------------------------------------------------------------
# hostile pieces, shared by every decoder
# ---------------------------------------------------------------------------------------

DEPTHS = st.sampled_from([2, 33, 65, 200, 1_000, 5_000, 50_000])
HUGE_NUMBERS = st.sampled_from(["9" * 5000, "-" + "1" * 5000, "1" * 4301, "1e99999", "0." + "0" * 5000 + "1",
                                "123456789012345678901", "9223372036854775808", "-9223372036854775809"])
SURROGATE_ESCAPES = st.sampled_from(["\\ud800", "\\udfff", "\\uDC00\\uD800", "\\ud83d\\ude00", "\\U0000D800",
                                     "\\ud800\\u0041"])
RAW_ODDITIES = st.sampled_from(["\ud800", "\udfff", "\udc80", "\x00", "\ufeff", "\u2028", "\U0010ffff", "\x7f",
                                "\r", "\t", "\x0b"])
BAD_UTF8 = st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                            b"\xe2\x82", b"\x80", b"\x00"])
LONG = st.sampled_from([100, 10_000, 200_000]).map(lambda n: "a" * n)


def splice(base: str, pieces: list[tuple[int, str]]) -> str:
    """``base`` with each piece inserted at a position (taken modulo the length)."""
    for position, piece in pieces:
        position %= len(base) + 1
        base = base[:position] + piece + base[position:]
    return base


def nested(spec: tuple[str, ...], depth: int, inner: str | None = None) -> str:
    """``prefix + open * depth + inner + close * depth + suffix``; ``inner`` defaults to the
    spec's fifth item (what makes the shallow nesting valid), or nothing."""
    prefix, open_, close, suffix = spec[:4]
    inner = (spec[4] if len(spec) > 4 else "") if inner is None else inner
    return prefix + open_ * depth + inner + close * depth + suffix


def hostile_text(samples: list[str], nest: list[tuple[str, str, str, str]]) -> st.SearchStrategy[str]:
    """Valid samples damaged in every hostile way, plus nesting (``nest``: prefix, opening,
    closing, suffix), unclosed nesting and random text."""
    piece = st.one_of(HUGE_NUMBERS, SURROGATE_ESCAPES, RAW_ODDITIES, LONG,
                      st.sampled_from([n[1] for n in nest] + [n[2] for n in nest]),
                      st.text(max_size=8))
    damaged = st.builds(splice, st.sampled_from(samples), st.lists(st.tuples(st.integers(0, 10**6), piece),
                                                                   max_size=4))
    deep = st.builds(nested, st.sampled_from(nest), DEPTHS, st.sampled_from([s[:200] for s in samples] + [""]))
    unclosed = st.builds(lambda spec, depth: spec[0] + spec[1] * depth, st.sampled_from(nest), DEPTHS)
    return st.one_of(damaged, deep, unclosed, st.text(max_size=300))


def hostile_bytes(text: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Hostile text as UTF-8 (lone surrogates kept as their 3 bytes), with invalid bytes spliced in."""
    encoded = text.map(lambda s: s.encode("utf-8", "surrogatepass"))
    spliced = st.builds(lambda data, cuts: _splice_bytes(data, cuts), encoded,
                        st.lists(st.tuples(st.integers(0, 10**6), BAD_UTF8), max_size=3))
    return st.one_of(spliced, st.binary(max_size=500))


def _splice_bytes(data: bytes, cuts: list[tuple[int, bytes]]) -> bytes:
    for position, piece in cuts:
        position %= len(data) + 1
        data = data[:position] + piece + data[position:]
    return data


def prefixes(data, step: int = 1):
    """Every cut of ``data`` (or every ``step``-th), the whole excluded."""
    return [data[:i] for i in range(0, len(data), step)]


def peak_memory(function, *args) -> int:
    """Peak bytes Python allocated while ``function(*args)`` ran (its error ignored)."""
    tracemalloc.start()
    try:
        function(*args)
    except Exception:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# ---------------------------------------------------------------------------------------
# uplink events: decode_event -> EventError
# ---------------------------------------------------------------------------------------

_TRIPLES = [((f"<{EX}obs/1>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", f'"21.5"^^<{XSD}decimal>'), 1767600120000),
            ((f"<< <{EX}a> <{EX}b> \"c\"@en >>", f"<{EX}confidence>", '"0.9"'), 1767600121000)]
EVENT = match_event("gw1", "fire", {"room": f"<{EX}room/3>"}, 1767600060000, 1767600120000, _TRIPLES, 1767600120500)
EVENT_BYTES = encode_event(EVENT)
EVENT_SAMPLES = [EVENT_BYTES.decode(), encode_event(significant_event(
    "gw1", f"<{EX}s>", f"<{EX}T>", '"1"', 5, [t for t, _ in _TRIPLES], 6)).decode()]
JSON_NEST = [("", "[", "]", ""), ("", "{\"a\":", "}", ""), ("{\"bindings\":", "[{\"b\":", "}]", "}")]


def _decode_event_or_error(payload) -> None:
    try:
        event = decode_event(payload)
    except EventError:
        return
    assert decode_event(encode_event(event)) == event


@FUZZ
@given(hostile_bytes(hostile_text(EVENT_SAMPLES, JSON_NEST)))
def test_an_event_payload_is_an_event_or_an_event_error(payload: bytes) -> None:
    _decode_event_or_error(payload)


@FUZZ
@given(hostile_text(EVENT_SAMPLES, JSON_NEST))
def test_an_event_given_as_str_with_raw_surrogates_is_an_event_or_an_event_error(payload: str) -> None:
    _decode_event_or_error(payload)


def test_every_cut_of_a_real_event_is_refused_with_an_event_error() -> None:
    for cut in prefixes(EVENT_BYTES):
        with pytest.raises(EventError):
            decode_event(cut)


_TEXT = st.text(max_size=30)  # hypothesis' text has no lone surrogates: what encode_event can write
_LONGS = st.integers(-(2**63), 2**63 - 1)


@FUZZ
@given(_TEXT, _TEXT, st.dictionaries(_TEXT, _TEXT, max_size=4), _LONGS, _LONGS, _LONGS,
       st.lists(st.tuples(st.tuples(_TEXT, _TEXT, _TEXT), _LONGS), max_size=4))
def test_an_event_reads_back_as_written(gateway, pattern, bindings, start, end, emitted, triples) -> None:
    event = match_event(gateway, pattern, bindings, start, end, triples, emitted)
    assert decode_event(encode_event(event)) == {f.name: event[f.name] for f in FIELDS}


# ---------------------------------------------------------------------------------------
# N-Triples(-star): parse_line / parse_lines / parse -> NTriplesError
# ---------------------------------------------------------------------------------------

NT_LINES = [line for folder in ("positive", "edgewave") for path in sorted((NT_DATA / folder).glob("*.nt"))
            if not path.name.endswith(".expected.nt")
            for line in path.read_text(encoding="utf-8").split("\n") if line.strip() and line[0] != "#"]
NT_NEST = [("", "<< ", " <http://a> <http://b> >>", " <http://b> <http://c> ."),
           ("<http://a> <http://b> ", "<<", ">>", " ."), ("", "<", ">", ""), ("", '"', '"', "")]
ESCAPES_VALID = {"\\t": "\t", "\\b": "\b", "\\n": "\n", "\\r": "\r", "\\f": "\f", '\\"': '"', "\\'": "'",
                 "\\\\": "\\", "\\u00e9": "\u00e9", "\\u0000": "\x00", "\\U0001F600": "\U0001F600",
                 "\\uD83D\\uDE00": "\U0001F600", "\\U0010FFFF": "\U0010FFFF"}
ESCAPES_INVALID = ["\\a", "\\x41", "\\u12", "\\u12G4", "\\U0011FFFF", "\\UFFFFFFFF", "\\ud800", "\\uDC00\\uD800",
                   "\\U0000DFFF", "\\", "\\ ", "\\0"]


def _parse_line_or_error(line: str) -> None:
    try:
        triple = parse_line(line)
    except NTriplesError as exc:
        assert exc.column >= 1 and exc.reason
        return
    if triple is not None:
        assert parse_line(serialize(triple)) == triple


@FUZZ
@given(hostile_text(NT_LINES, NT_NEST))
@example("<< " * 10_000 + "<http://a> <http://b> <http://c>" + " >> <http://b> <http://c>" * 10_000 + " .")
@example("<http://a> <http://b> \"" + "x" * 1_000_000 + "\" .")
@example("<http://a/" + "i" * 1_000_000 + "> <http://b> <http://c> .")
def test_a_line_is_a_triple_or_an_n_triples_error(line: str) -> None:
    _parse_line_or_error(line)


@pytest.mark.parametrize("escape, char", sorted(ESCAPES_VALID.items()))
def test_every_valid_literal_escape_reads_as_its_character_and_writes_back(escape: str, char: str) -> None:
    triple = parse_line(f'<{EX}s> <{EX}p> "a{escape}z" .')
    assert literal_parts(triple[2])[0] == f"a{char}z"
    assert parse_line(serialize(triple)) == triple


@pytest.mark.parametrize("escape", ESCAPES_INVALID)
@pytest.mark.parametrize("where", ["literal", "iri"])
def test_every_invalid_escape_is_an_n_triples_error(escape: str, where: str) -> None:
    line = f'<{EX}s> <{EX}p> "a{escape}z" .' if where == "literal" else f"<{EX}s{escape}> <{EX}p> <{EX}o> ."
    with pytest.raises(NTriplesError):
        parse_line(line)


@pytest.mark.parametrize("escape", [e for e in ESCAPES_VALID if e[1] not in "uU"])
def test_character_escapes_are_refused_in_an_iri(escape: str) -> None:
    with pytest.raises(NTriplesError):
        parse_line(f"<{EX}s{escape}> <{EX}p> <{EX}o> .")


def test_every_cut_of_every_sample_line_is_a_triple_or_an_n_triples_error() -> None:
    for line in NT_LINES:
        for cut in prefixes(line):
            _parse_line_or_error(cut)


@FUZZ
@given(st.lists(hostile_text(NT_LINES, NT_NEST), max_size=5).map("\n".join))
def test_a_document_parses_strictly_or_with_its_bad_lines_counted(text: str) -> None:
    try:
        strict = parse(text)
    except NTriplesError:
        strict = None
    errors: list[NTriplesError] = []
    lenient = parse(text, errors=errors)
    if strict is not None:
        assert lenient == strict and errors == []
    else:
        assert errors


_IRI_TEXT = st.text(min_size=1, max_size=20)
_TERMS = st.one_of(
    st.builds(lambda s: make_iri(EX + s), _IRI_TEXT),
    st.builds(make_literal, st.text(max_size=20)),
    st.builds(lambda v, lang: make_literal(v, lang=lang), st.text(max_size=10),
              st.from_regex(r"[a-zA-Z]{1,8}(-[a-zA-Z0-9]{1,8}){0,2}", fullmatch=True)),
    st.builds(lambda v, dt: make_literal(v, datatype=EX + dt), st.text(max_size=10), _IRI_TEXT),
)
_SUBJECTS = st.builds(lambda s: make_iri(EX + s), _IRI_TEXT)


@st.composite
def _quoted(draw, depth: int = 3):
    s = draw(_SUBJECTS if depth == 0 else st.one_of(_SUBJECTS, _quoted(depth - 1)))
    o = draw(_TERMS if depth == 0 else st.one_of(_TERMS, _quoted(depth - 1)))
    return ntriples.make_quoted((s, draw(_SUBJECTS), o))


@FUZZ
@given(st.one_of(_SUBJECTS, _quoted()), _SUBJECTS, st.one_of(_TERMS, _quoted()))
def test_a_statement_of_canonical_terms_reads_back_as_written(s: str, p: str, o: str) -> None:
    assert parse_line(serialize((s, p, o))) == (s, p, o)


# ---------------------------------------------------------------------------------------
# recorded streams: read_recorded -> RecordedStreamError / NTriplesError; the match CLI's lean reader
# ---------------------------------------------------------------------------------------

RECORDED = [f"{1767600120000 + i}\t{line}" for i, line in enumerate(NT_LINES)]


@FUZZ
@given(st.lists(hostile_bytes(hostile_text(RECORDED, NT_NEST)), min_size=1, max_size=4))
@example([b"9" * 5000 + b"\t<http://a> <http://b> <http://c> ."])
@example([b"\xef\xbb\xbf1\t<http://a> <http://b> <http://c> .", b"\xff\t<http://a> <http://b> <http://c> ."])
def test_a_recorded_stream_is_read_strictly_or_with_its_bad_lines_counted(lines: list[bytes]) -> None:
    try:
        strict = list(read_recorded(lines))
    except NTriplesError:  # RecordedStreamError is one
        strict = None
    errors: list[NTriplesError] = []
    lenient = list(read_recorded(lines, errors))
    assert all(isinstance(e, RecordedStreamError) for e in errors)
    if strict is not None:
        assert lenient == strict and errors == []


def test_a_timestamp_beyond_64_bits_is_a_recorded_stream_error_naming_it() -> None:
    for ts in ("9223372036854775808", "9" * 5000):
        with pytest.raises(RecordedStreamError, match="beyond a signed 64-bit integer"):
            list(read_recorded([f"{ts}\t<{EX}a> <{EX}b> <{EX}c> ."]))
    assert list(read_recorded([f"9223372036854775807\t<{EX}a> <{EX}b> <{EX}c> ."]))[0][0] == 2**63 - 1


# Timestamps below 10**18: beyond, the lean reader is known to differ (tests/unit/test_fuzz_reported.py).
_SHORT_TS = st.integers(0, 10**18 - 1).map(str)


@FUZZ
@given(st.lists(st.tuples(_SHORT_TS, hostile_text(NT_LINES, NT_NEST),
                          st.sampled_from(["\n", "\r\n", ""])), min_size=1, max_size=5),
       st.lists(st.tuples(st.integers(0, 10**6), BAD_UTF8), max_size=2))
def test_the_match_clis_lean_reader_agrees_with_read_recorded(lines, bad_bytes) -> None:
    one_line = [(ts, statement.replace("\n", " ").replace("\r", " "), end) for ts, statement, end in lines]
    raw = _splice_bytes("".join(f"{ts}\t{s_}{end}" for ts, s_, end in one_line).encode("utf-8", "surrogatepass"),
                        bad_bytes)
    text = raw.decode("utf-8", "surrogateescape").splitlines(keepends=True)  # as edgewave match reads a file
    ours, theirs = [], []
    items = list(read_recorded(iter(text), ours))
    assert items == list(read_recorded([line.encode("utf-8", "surrogateescape") for line in text], theirs))
    assert [(e.line, e.column, e.reason) for e in ours] == [(e.line, e.column, e.reason) for e in theirs]


# ---------------------------------------------------------------------------------------
# RSP-QL: parse_query -> QuerySyntaxError (line and column inside the text)
# ---------------------------------------------------------------------------------------

QUERIES = [path.read_text() for path in PATTERNS]
W = "SELECT * WHERE { ?s ?p ?o "
SPARQL_NEST = [("SELECT * WHERE ", "{ ", " }", "", "?s ?p ?o"), ("SELECT * WHERE { ", "{ ?s ?p ?o . ", " }", " }"),
               (W + "FILTER", "(", ")", " }", "?o"), ("SELECT * WHERE { ?s ?p ", "[ ?p ", " ]", " }", "?o"),
               ("SELECT * WHERE { ", "<< ", " ?p ?o >>", " ?p ?o }", "?s"), (W, "{| ?p ?o ", " |}", " }"),
               (W + "FILTER(", "!", "", ") }", "?o"), (W + "FILTER(", "STR(", ")", ") }", "?o"),
               (W + "FILTER(", "?o IN (", ")", ") }", "1"), (W + "FILTER(", "?o || ", "", "?o) }"),
               (W + "FILTER(", "1 + ", "", "1 > 0) }")]


def _parse_query_or_error(text: str) -> None:
    try:
        parse_query(text)
    except QuerySyntaxError as exc:
        assert 1 <= exc.line <= text.count("\n") + 1 and exc.column >= 1, str(exc)
        assert str(exc).startswith(f"line {exc.line}, column {exc.column}: ")


@FUZZ
@given(hostile_text(QUERIES, SPARQL_NEST))
@example("BASE <http://[/> SELECT * WHERE { <a> ?p ?o }")
@example("SELECT * FROM STREAM <http://s> [RANGE " + "9" * 5000 + "s] WHERE { ?s ?p ?o }")
@example("SELECT * FROM STREAM <http://s> [RANGE PT" + "9" * 30 + "S] WHERE { ?s ?p ?o }")
@example(W + "FILTER(?o" + " || ?o" * 100_000 + ") }")
@example(W + "FILTER(" + "-" * 100_000 + "1 > 0) }")
@example(W + "{ ?s ?p ?o } " + "SEQ { ?s ?p ?o } " * 10_000 + "}")
@example(W + "FILTER NOT EXISTS { ?s ?p ?o " * 100 + "}" * 100 + " WITHIN PT1S }")
@example("REGISTER RSTREAM <x> AS CONSTRUCT { " + "?s ?p ?o . " * 10_000 + "} " + W + "}")
def test_a_query_is_a_query_or_a_located_syntax_error(text: str) -> None:
    _parse_query_or_error(text)


def test_every_cut_of_the_demos_patterns_is_a_query_or_a_located_syntax_error() -> None:
    for query in QUERIES:
        for cut in prefixes(query):
            _parse_query_or_error(cut)


@pytest.mark.parametrize("spec", SPARQL_NEST)
def test_nesting_is_refused_past_the_limit_with_its_position(spec) -> None:
    with pytest.raises(QuerySyntaxError, match="nested deeper than") as caught:
        parse_query(nested(spec, 5 * MAX_NESTING))
    assert caught.value.line == 1 and caught.value.column < 5 * MAX_NESTING * len(spec[1]) + len(spec[0])
    parse_query(nested(spec, 5))  # a few levels are fine
    shallow = W + "{ " * 5 + "?a ?b [ ?c << ?d ?e ?f >> ] " + "} " * 5 + "FILTER(STR((((!(?o + 1))))) = '1') }"
    assert len(parse_query(shallow).patterns) == 3


@pytest.mark.parametrize("text, message", [
    ("SELECT * FROM STREAM <http://s> [RANGE " + "9" * 5000 + "s] WHERE { ?s ?p ?o }", "at most"),
    ("BASE <http://[/> SELECT * WHERE { <a> ?p ?o }", "cannot resolve <a>"),
    (W + "FILTER(?o = '\ud800') }", "lone UTF-16 surrogate"),
    (W + "FILTER(?o = '\\ud800') }", "lone surrogate"),
])
def test_what_used_to_crash_the_parser_is_a_located_syntax_error(text: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError, match=message) as caught:
        parse_query(text)
    assert caught.value.line == 1 and 1 <= caught.value.column <= len(text)


def _ground_terms(pattern):
    for term in pattern.terms():
        if isinstance(term, TriplePattern):
            yield from _ground_terms(term)
        elif not is_var(term):
            yield term


@FUZZ
@given(st.one_of(_TERMS, _quoted(2)))
@example(make_literal("x", datatype=EX + "a b"))
def test_a_term_written_in_a_query_is_the_n_triples_codecs_term(term: str) -> None:
    query = parse_query(f"SELECT * WHERE {{ ?s ?p {term} }}")
    assert query.patterns[0].o == term


# ---------------------------------------------------------------------------------------
# config documents and envelopes -> ConfigRejected
# ---------------------------------------------------------------------------------------

FIRE = (REPO / "configs" / "patterns" / "fire.rq").read_text()
SMALL_DOC = build_config_document({"fire": FIRE}, [], [(f"<{EX}room/3>", "<https://edgewave.dev/ns#inBuilding>",
                                                        f"<{EX}b1>")])
KEY = b"fuzz-key"
ENVELOPE = sign_envelope("gw1", 3, SMALL_DOC, "trig", KEY)
TURTLE_NEST = [("<http://a> <http://b> ", "( ", " )", " ."), ("<http://a> <http://b> ", "[ <http://b> ", " ]", " ."),
               ("", "<< ", " <http://b> <http://c> >>", " <http://b> <http://c> ."), ("", "{ ", " }", ""),
               ("<urn:g> { <http://a> <http://b> ", "( ", " )", " . }")]
DOC_SAMPLES = [SMALL_DOC, "<http://a> <http://b> ( 1 2.5 -3e2 true [ <http://c> 'x'@en ] ) .\n"]


def _load_or_rejected(text: str, fmt: str) -> None:
    try:
        load_config_document(text, fmt)
    except ConfigRejected as exc:
        assert exc.reason


@FUZZ
@given(hostile_text(DOC_SAMPLES, TURTLE_NEST), st.sampled_from(["trig", "turtle"]))
@example("<http://a> <http://b> " + "( " * 50_000 + " .", "turtle")
@example("<http://a> <http://b> '\ud800' .", "turtle")
@example("<http://a> <http://b> '\\ud800' .", "trig")
@example("@prefix ew: <https://edgewave.dev/ns#> . <urn:x> a ew:GatewayConfig ; ew:version " + "9" * 5000 + " .",
         "turtle")
def test_a_config_document_loads_or_is_rejected(text: str, fmt: str) -> None:
    _load_or_rejected(text, fmt)


def test_every_cut_of_a_config_document_loads_or_is_rejected() -> None:
    for cut in prefixes(SMALL_DOC):
        _load_or_rejected(cut, "trig")
    text = GATEWAY_CONFIG.read_text()
    for cut in prefixes(text, step=997):  # 51 cuts through the demo's 50 kB document
        _load_or_rejected(cut, "trig")


@FUZZ
@given(hostile_bytes(hostile_text([ENVELOPE.decode()], JSON_NEST)))
def test_an_envelope_is_verified_or_rejected(payload: bytes) -> None:
    try:
        verify_envelope(payload, KEY, "gw1")
    except ConfigRejected as exc:
        assert exc.reason


def test_every_cut_of_an_envelope_is_rejected() -> None:
    for cut in prefixes(ENVELOPE):
        with pytest.raises(ConfigRejected):
            verify_envelope(cut, KEY, "gw1")


@FUZZ
@given(st.text(max_size=20), st.integers(0, 2**63 - 1), st.text(max_size=200), st.sampled_from(["trig", "turtle"]))
def test_a_signed_envelope_verifies_as_written(gateway: str, version: int, document: str, fmt: str) -> None:
    envelope = verify_envelope(sign_envelope(gateway, version, document, fmt, KEY), KEY, gateway)
    assert (envelope.gateway, envelope.version, envelope.document, envelope.format) == (gateway, version,
                                                                                        document, fmt)


# ---------------------------------------------------------------------------------------
# the simulator's recordings and data sets: problems listed / DatasetError
# ---------------------------------------------------------------------------------------

RECORDING = ["# ew:message topic=ew/in/building/gw1-room3-smoke gateway=gw1 lines=2",
             f"1767600120000\t<{EX}a> <{EX}b> <{EX}c> .", f"1767600120000\t<{EX}a> <{EX}b> \"d\" .",
             f"1767600121000\t<{EX}a> <{EX}b> \"e\"@en .",
             '# ew:payload topic=zigbee2mqtt/room3-smoke gateway=gw1 ms=1767600122000 {"smoke":true,"battery":97}']
HEADER_PIECES = st.sampled_from(["# ew:message topic=t gateway=g lines=" + "9" * 5000,
                                 "# ew:message topic=t gateway=g lines=99999999999999999999",
                                 "# ew:message topic=t gateway= lines=0", "# ew:message "])


@FUZZ
@given(st.lists(st.one_of(hostile_text(RECORDING, NT_NEST), HEADER_PIECES), min_size=1, max_size=6))
@example(["9" * 5000 + f"\t<{EX}a> <{EX}b> <{EX}c> ."])
def test_a_recording_yields_only_publishable_messages_and_lists_its_problems(lines: list[str]) -> None:
    errors: list[str] = []
    for message in parse_messages(lines, errors=errors):
        if message.body is not None:   # a device payload: no lines, a non-empty UTF-8 payload
            assert not message.lines and message.body.decode("utf-8")
            continue
        assert message.lines and all(parse_line(line) is not None for line in message.lines)
        "\n".join(message.lines).encode("utf-8")  # what the simulator publishes is UTF-8


@FUZZ
@given(hostile_bytes(hostile_text(["\n".join(RECORDING)], NT_NEST)))
def test_a_recording_file_that_is_not_utf8_is_read_with_its_bad_lines_listed(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("rec") / "r.tsv"
    path.write_bytes(data)
    errors: list[str] = []
    for message in read_messages(path, errors=errors):
        "\n".join(message.lines).encode("utf-8")


def test_a_recording_line_that_is_not_utf8_is_listed_and_the_rest_replayed(tmp_path: Path) -> None:
    path = tmp_path / "r.tsv"
    path.write_bytes(f"1\t<{EX}a> <{EX}b> \"".encode() + b"\xff\xfe" + f"\" .\n2\t<{EX}a> <{EX}b> <{EX}c> .\n".encode())
    errors: list[str] = []
    assert [m.ms for m in read_messages(path, errors=errors)] == [2]
    assert errors == [f"{path}:1: invalid UTF-8 (invalid start byte)"]


@pytest.mark.parametrize("line, problem", [
    ("# ew:message topic=t gateway=g lines=" + "9" * 5000, "malformed message header"),
    ("9" * 5000 + f"\t<{EX}a> <{EX}b> <{EX}c> .", "beyond a signed 64-bit integer"),
])
def test_a_recording_line_with_a_huge_number_is_listed(line: str, problem: str) -> None:
    errors: list[str] = []
    assert list(parse_messages([line], errors=errors)) == []
    assert len(errors) == 1 and problem in errors[0]


OCCUPANCY = ('"id","Date","Temperature","Humidity","Light","CO2","HumidityRatio","Occupancy"\n'
             '"1","2015-02-02 14:19:00",23.7,26.272,585.2,749.2,0.0047641,1\n'
             '"2","2015-02-02 14:19:59",23.718,26.29,578.4,760.4,0.0047726,0\n')
AIRQUALITY = ("Date,Time,CO_GT,PT08_S1_CO,NMHC_GT,C6H6_GT,PT08_S2_NMHC,NOx_GT,PT08_S3_NOx,NO2_GT,PT08_S4_NO2,"
              "PT08_S5_O3,T,RH,AH\n10/03/2004,18:00:00,2.6,1360,150,11.9,1046,166,1056,113,1692,1268,13.6,48.9,0.75\n")
CSV_PIECES = st.sampled_from(["inf", "-inf", "nan", "1e400", "9" * 5000, '"', "\x00", ",", "\n", "-200"])


def _convert_or_error(tmp_path: Path, name: str, data: bytes) -> list:
    path = tmp_path / "data.csv"
    path.write_bytes(data)
    try:
        messages = list(convert(name, path))
    except DatasetError:
        return []
    for message in messages:
        "\n".join(message.lines).encode("utf-8")
        assert all(parse_line(line) is not None for line in message.lines)
    return messages


@FUZZ
@given(st.sampled_from([("uci-occupancy", OCCUPANCY), ("uci-airquality", AIRQUALITY)]),
       st.lists(st.tuples(st.integers(0, 10**6), CSV_PIECES), max_size=4),
       st.lists(st.tuples(st.integers(0, 10**6), BAD_UTF8), max_size=1))
def test_a_data_set_file_converts_or_is_a_dataset_error(tmp_path_factory, dataset, pieces, bad) -> None:
    name, text = dataset
    data = _splice_bytes(splice(text, pieces).encode("utf-8", "surrogatepass"), bad)
    _convert_or_error(tmp_path_factory.mktemp("csv"), name, data)


def test_non_finite_values_in_a_data_set_are_skipped_as_missing(tmp_path: Path) -> None:
    data = OCCUPANCY.replace("23.7,", "inf,").replace("26.272,", "nan,").replace(",1\n", ",1e400\n")
    messages = _convert_or_error(tmp_path, "uci-occupancy", data.encode())
    assert len(messages) == 12 - 3
    assert not any('"inf"' in line or '"nan"' in line for m in messages for line in m.lines)


@pytest.mark.parametrize("data", [b"\xff\xfe" + OCCUPANCY.encode(), OCCUPANCY.encode() + b'"3",\xff\n',
                                  OCCUPANCY.encode() + b'"3","' + b"x" * 200_000 + b'"\n'])
def test_a_data_set_file_that_is_not_utf8_csv_is_a_dataset_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(data)
    with pytest.raises(DatasetError):
        list(convert("uci-occupancy", path))


# ---------------------------------------------------------------------------------------
# the cloud: status and acks (StatusError / AckError), landing recovery (never raises)
# ---------------------------------------------------------------------------------------

STATUS = '{"state":"online","config_version":3,"at":1767600120000}'
ACK = '{"gateway":"gw1","version":3,"status":"applied","reason":null,"appliedVersion":2,"at":1767600120000}'


@pytest.fixture(scope="module")
def registry():
    db = sqlite_utils.Database(memory=True)
    ensure_registry_schema(db)
    yield db.conn
    db.close()


@FUZZ
@given(hostile_bytes(hostile_text([STATUS, ACK, "offline"], JSON_NEST)))
def test_a_status_or_ack_is_refused_with_its_error_or_can_be_recorded(registry, payload: bytes) -> None:
    try:
        try:
            record_status(registry, "gw1", parse_status(payload), 1)
        except StatusError:
            pass
        try:
            record_ack(registry, "gw1", parse_ack(payload), 1)
        except AckError:
            pass
    except sqlite3.Error as exc:
        pytest.fail(f"an accepted payload cannot be recorded: {exc}")
    finally:
        registry.rollback()


LANDING = (json.dumps({"id": "urn:edgewave:event:1", "kind": "match"}) + "\n"
           + json.dumps({"id": "urn:edgewave:event:2", "triples": ["<a> <b> \"é\" ."]}, ensure_ascii=False)
           + "\n").encode()


def _recover(root: Path, data: bytes) -> None:
    part = root / "date=2026-01-01"
    part.mkdir(parents=True)
    (part / "part-1-000001-abcdef01.jsonl.inprogress").write_bytes(data)
    records = LandingZone(root).recover()
    kept = data[: data.rfind(b"\n") + 1]
    assert not list(root.rglob("*.inprogress"))
    closed = list(root.rglob("*.jsonl"))
    assert [p.read_bytes() for p in closed] == ([kept] if kept else [])
    assert records == kept.count(b"\n")


def test_recovery_keeps_the_complete_lines_of_every_cut_of_a_landing_file(tmp_path: Path) -> None:
    for i, cut in enumerate(prefixes(LANDING)):
        _recover(tmp_path / str(i), cut)


@FUZZ
@given(st.binary(max_size=300), st.lists(st.tuples(st.integers(0, 10**6), BAD_UTF8), max_size=3))
def test_recovery_of_a_garbage_landing_file_never_raises(tmp_path_factory, data: bytes, bad) -> None:
    _recover(tmp_path_factory.mktemp("landing"), _splice_bytes(data, bad))


# ---------------------------------------------------------------------------------------
# memory: a hostile megabyte costs a bounded multiple of itself
# ---------------------------------------------------------------------------------------

MB = 1024 * 1024


@pytest.mark.parametrize("name, decode, payload, factor", [
    ("event: a megabyte of brackets", decode_event, b"[" * MB, 16),
    ("event: a megabyte of small integers", decode_event, b"[" + b"1," * (MB // 2 - 2) + b"1]", 16),
    ("status: a megabyte of nesting", parse_status, b"{" * MB, 16),
    # decoding escapes costs some 230 bytes each while the line is parsed: the worst here
    ("n-triples: a megabyte of escapes", parse_line, '<http://a> <http://b> "' + "\\t" * (MB // 2) + '" .', 160),
    ("n-triples: a megabyte literal", parse_line, '<http://a> <http://b> "' + "a" * MB + '" .', 16),
    ("n-triples: a megabyte of quoted-triple openings", parse_line, "<< " * (MB // 3), 16),
    ("rsp-ql: a megabyte of groups", parse_query, "SELECT * WHERE " + "{" * MB, 16),
    ("rsp-ql: a megabyte of negations", parse_query, W + "FILTER(" + "!" * MB + "?o) }", 16),
    ("config: a megabyte of collections", lambda t: load_config_document(t, "turtle"),
     "<http://a> <http://b> " + "(" * MB + " .", 16),
])
def test_a_hostile_megabyte_takes_a_bounded_multiple_of_its_size(name, decode, payload, factor) -> None:
    peak = peak_memory(decode, payload)
    assert peak < factor * len(payload), f"{name}: {peak / MB:.0f} MB"
