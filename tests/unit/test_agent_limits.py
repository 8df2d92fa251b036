"""Limits on what comes from outside, checked before the parser they protect; and nothing a
message or document holds makes its reader raise (sensor intake, config envelopes and
documents, the agent's message handler)."""
from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from agent_harness import ALARM, alarm, config_document

from edgewave.agent.config import SettingsError, settings_from_dict
from edgewave.agent.intake import (DECODER_ERROR, MALFORMED, QUOTED_TOO_DEEP, REASONS, TOO_MANY_TRIPLES, Intake,
                                   Rejection, SensorEvent)
from edgewave.agent.reconfigure import APPLIED, DECODER_ERROR as CONFIG_DECODER_ERROR, REJECTED, VERDICT_KINDS, judge
from edgewave.agent import reconfigure
from edgewave.agent.engine.config_check import parse_document
from edgewave.agent.runtime import Agent
from edgewave.agent.status import COUNTER_NAMES
from edgewave.shared import configdoc, ntriples
from edgewave.shared.configdoc import ConfigRejected, DocumentLimits, document_shape
from edgewave.shared.log_limit import LogLimiter

REPO = Path(__file__).resolve().parents[2]
S, P, O = "<http://ex.org/s>", "<http://ex.org/p>", "<http://ex.org/o>"
HEAD = "@prefix ew: <https://edgewave.dev/ns#> .\n@prefix ex: <http://example.org/> .\n"


def intake(**input_settings) -> Intake:
    return Intake(settings_from_dict({"input": {"streams": {"fire": "http://ex.org/fire"}, **input_settings}}))


def nested(depth: int) -> str:
    """A statement whose object is a quoted triple nested ``depth`` deep."""
    term = f"<< {S} {P} {O} >>"
    for _ in range(depth - 1):
        term = f"<< {term} {P} {O} >>"
    return f"{S} {P} {term} .\n"


def _frames_free() -> int:
    """How many more calls fit on the stack here before RecursionError."""
    depth = 0

    def dive() -> None:
        nonlocal depth
        depth += 1
        dive()
    try:
        dive()
    except RecursionError:
        pass
    return depth


@contextmanager
def stack_left(frames: int) -> Iterator[None]:
    """Run the block with only about ``frames`` Python frames left before RecursionError."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit - _frames_free() + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


# -- sensor intake -------------------------------------------------------------------------

def test_quoted_triples_nested_beyond_the_limit_are_rejected_though_the_parser_takes_them():
    assert ntriples.parse(nested(4))                         # valid N-Triples-star
    assert isinstance(intake(max_quoted_depth=4).decode("ew/in/fire/s1", nested(4).encode(), 0), SensorEvent)
    result = intake(max_quoted_depth=4).decode("ew/in/fire/s1", nested(5).encode(), 0)
    assert isinstance(result, Rejection) and result.reason == QUOTED_TOO_DEEP
    assert "nested 5 deep > limit 4" in result.detail


def test_nesting_is_measured_before_parsing():
    """The parser gives up at 64 levels; the intake names the real depth, so it never parsed."""
    payload = (f"{S} {P} " + "<< " * 5000).encode()
    result = intake().decode("ew/in/fire/s1", payload, 0)
    assert result.reason == QUOTED_TOO_DEEP and "nested 5000 deep" in result.detail


def test_angle_brackets_in_literals_iris_and_comments_are_not_nesting():
    text = (f'{S} {P} "<< << << << << << << << << >>" .\n'
            f"<< {S} {P} {O} >> {P} {O} . # << << << << << << << << << <<\n")
    event = intake(max_quoted_depth=1).decode("ew/in/fire/s1", text.encode(), 0)
    assert isinstance(event, SensorEvent) and len(event.triples) == 2


def test_many_quoted_triples_side_by_side_are_not_deep():
    text = "".join(f"<< {S} {P} \"{i}\" >> {P} {O} .\n" for i in range(20))
    event = intake(max_quoted_depth=1).decode("ew/in/fire/s1", text.encode(), 0)
    assert isinstance(event, SensorEvent) and len(event.triples) == 20


def test_statements_per_message_are_bounded_blank_and_comment_lines_aside():
    lines = [f"<u:{i}> <u:p> <u:o> .\n" for i in range(10)]
    padded = "# a comment\n\n".join(lines)
    assert len(intake(max_triples_per_message=10).decode("ew/in/fire/s1", padded.encode(), 0).triples) == 10
    result = intake(max_triples_per_message=9).decode("ew/in/fire/s1", padded.encode(), 0)
    assert result.reason == TOO_MANY_TRIPLES and "more than 9" in result.detail


@pytest.mark.parametrize("payload", [
    f'{S} {P} "a\\ud800b" .\n'.encode(),                     # a lone surrogate escape
    b"\x00" * 32,                                             # NUL bytes
    f"{S[:-1]}\x00> {P} {O} .\n".encode(),                    # a NUL in an IRI
    f"{S} {P} ".encode() + b'"\xff\xfe" .\n',                 # invalid UTF-8
])
def test_hostile_bytes_are_malformed(payload):
    assert intake().decode("ew/in/fire/s1", payload, 0).reason == MALFORMED


def test_a_failure_inside_decoding_is_a_rejection_not_an_exception():
    """A RecursionError in the parser (a deep stack, a message within the limits) is
    rejected as decoder_error; the engine gets nothing of the message."""
    reader = intake(max_quoted_depth=60)
    with stack_left(60):
        result = reader.decode("ew/in/fire/s1", nested(60).encode(), 0)
    assert isinstance(result, Rejection) and result.reason == DECODER_ERROR
    assert "RecursionError" in result.detail
    assert isinstance(reader.decode("ew/in/fire/s1", nested(60).encode(), 0), SensorEvent)   # stack back


def test_a_megabyte_line_is_decoded_in_linear_time_and_not_cached():
    """Long lines through the parser (with the size limit raised): valid and broken ones
    take milliseconds, and one-off long terms do not stay in the parser's term caches."""
    reader = intake(max_message_bytes=4_000_000)
    ntriples.clear_term_caches()
    cases = {
        "literal": f'{S} {P} "{"y" * 1_000_000}" .\n',
        "unclosed literal": f'{S} {P} "{"y" * 1_000_000}\n',
        "unclosed IRI": f"{S} {P} <http://ex.org/{'y' * 1_000_000}\n",
        "escapes": f'{S} {P} "' + "\\n" * 500_000 + '" .\n',
    }
    for name, text in cases.items():
        started = time.perf_counter()
        result = reader.decode("ew/in/fire/s1", text.encode(), 0)
        assert time.perf_counter() - started < 5, name          # quadratic would take minutes
        assert isinstance(result, SensorEvent) == (name in ("literal", "escapes")), name
    cached = sum(len(token) for cache in (ntriples._subjects, ntriples._predicates, ntriples._objects)
                 for token in cache)
    assert cached < 1000


def test_log_lines_are_bounded_however_many_sensors_misbehave(caplog):
    clock = [0.0]
    reader = Intake(settings_from_dict({"input": {"default_stream": None}}), LogLimiter(60, lambda: clock[0],
                                                                                        max_lines=5))
    with caplog.at_level(logging.WARNING, logger="edgewave.agent.intake"):
        for n in range(1000):
            reader.decode(f"ew/in/nowhere/s{n}", b"x", 0)
        assert len(caplog.records) == 5
        clock[0] = 61.0
        reader.decode("ew/in/nowhere/s999", b"x", 0)
    assert len(caplog.records) == 6 and "suppressed_since_last=1" in caplog.records[-1].getMessage()


def test_every_rejection_kind_is_a_status_counter():
    assert set(REASONS) <= set(COUNTER_NAMES)
    assert {f"config_rejected_{kind}" for kind in VERDICT_KINDS} <= set(COUNTER_NAMES)
    assert "handler_error" in COUNTER_NAMES


# -- settings ------------------------------------------------------------------------------

@pytest.mark.parametrize("settings, complaint", [
    ({"input": {"max_quoted_depth": 65}}, "max_quoted_depth"),
    ({"input": {"max_triples_per_message": 0}}, "max_triples_per_message"),
    ({"config": {"max_envelope_bytes": 1000, "max_document_bytes": 2000}}, "max_envelope_bytes"),
    ({"config": {"max_document_nesting": 0}}, "max_document_nesting"),
])
def test_unusable_limits_are_refused_at_start(settings, complaint):
    with pytest.raises(SettingsError, match=complaint):
        settings_from_dict(settings)


# -- config documents ----------------------------------------------------------------------

def test_the_demo_document_is_well_within_the_default_limits():
    text = (REPO / "configs/gateway-config.trig").read_text()
    depth, terms = document_shape(text)
    limits = DocumentLimits()
    assert len(text.encode()) * 4 < limits.max_bytes and depth * 10 < limits.max_nesting
    assert terms * 10 < limits.max_terms
    assert configdoc.load_config_document(text, "trig", limits).patterns


def test_shape_ignores_strings_iris_comments_and_escapes():
    text = HEAD + ('ew:config { ex:c ex:q """WHERE { { [ ( << x >> ) ] } }""" ; ex:r "((" , \'[[\' ;\n'
                   "  ex:s <http://ex.org/a#b> ; ex:t ex:a\\( . # ( ( ( [ [ [\n}\n")
    depth, _ = document_shape(text)
    assert depth == 1
    assert configdoc.load_config_document(text, "trig", DocumentLimits(max_nesting=1))


@pytest.mark.parametrize("body, depth", [
    ("ex:a ex:p " + "[ ex:p " * 40 + "ex:b" + " ]" * 40 + " .", 41),
    ("ex:a ex:p " + "( " * 40 + "ex:b" + " )" * 40 + " .", 41),
    ("ex:a ex:p " + "(" * 100_000 + ")" * 100_000 + " .", 100_001),
    ("ex:a ex:p " + "<< " * 100_000 + " .", 100_001),
])
def test_deep_documents_are_refused_before_rdflib(body, depth):
    text = HEAD + "ew:static { " + body + " }\n"
    started = time.perf_counter()
    with pytest.raises(ConfigRejected) as caught:
        configdoc.load_config_document(text, "trig", DocumentLimits(max_bytes=1 << 20))
    assert caught.value.kind == configdoc.DOCUMENT_TOO_DEEP
    assert f"{depth} levels" in caught.value.reason
    assert time.perf_counter() - started < 5


def test_too_many_terms_and_bytes_are_refused_before_rdflib():
    collection = HEAD + "ew:static { ex:a ex:p ( " + "0 " * 30_000 + ") . }\n"   # 60 kB, 60,000 triples
    with pytest.raises(ConfigRejected, match=r"document too large: 300\d\d terms \(at most 20000\)") as caught:
        configdoc.load_config_document(collection, "trig")
    assert caught.value.kind == configdoc.DOCUMENT_OVERSIZED
    large = HEAD + "ew:static { ex:a ex:p ex:b . }\n# " + "x" * 300_000 + "\n"
    with pytest.raises(ConfigRejected, match="document too large: 300") as caught:
        configdoc.load_config_document(large, "trig")
    assert caught.value.kind == configdoc.DOCUMENT_OVERSIZED


@pytest.mark.parametrize("text", [
    HEAD + 'ew:static { ex:a ex:p "a\\ud800b" . }\n',              # rdflib makes a lone surrogate of it
    HEAD + "ew:config { ex:c a ew:GatewayConfig ; ew:version 1e400 . }\n",   # an infinite version
    HEAD + "ew:config { ex:c a ew:GatewayConfig ; ew:version " + "9" * 5000 + " . }\n",
])
def test_terms_no_writer_can_handle_are_rejections(text):
    with pytest.raises(ConfigRejected):
        configdoc.load_config_document(text, "trig")


# -- envelopes -----------------------------------------------------------------------------

def signed(version: int = 2, document: str | None = None, key: str = "k") -> bytes:
    return configdoc.sign_envelope("gw1", version, config_document(version) if document is None else document,
                                   "trig", key)


@pytest.mark.parametrize("payload, kind, reason", [
    (b'{"gateway":"gw1","version":3,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     configdoc.ENVELOPE_MALFORMED, "nesting depth"),
    (b'{"gateway":"gw1","version":' + b"9" * 5000 + b',"format":"trig","document":"","signature":""}',
     configdoc.ENVELOPE_MALFORMED, "5000 digits"),
    (b'{"gateway":"gw1","version":9223372036854775808,"format":"trig","document":"","signature":""}',
     configdoc.ENVELOPE_MALFORMED, "64-bit"),
    (b'{"gateway":"gw1","version":3,"format":"trig","document":"\\ud800","signature":""}',
     configdoc.ENVELOPE_MALFORMED, "surrogate"),
    (b'{"gateway":"gw1","version":3,"format":"trig","document":"\xff","signature":""}',
     configdoc.ENVELOPE_MALFORMED, "not UTF-8"),
    (b" " * 2_000_000 + b"{}", configdoc.ENVELOPE_OVERSIZED, "envelope too large"),
])
def test_hostile_envelopes_are_refused_by_kind(payload, kind, reason):
    with pytest.raises(ConfigRejected) as caught:
        configdoc.verify_envelope(payload, "k", "gw1")
    assert caught.value.kind == kind and reason in caught.value.reason


def test_a_signature_with_any_characters_is_just_a_bad_signature():
    raw = json.loads(signed())
    raw["signature"] = "é" * 64                   # hmac.compare_digest refuses non-ASCII str
    with pytest.raises(ConfigRejected, match="bad signature"):
        configdoc.verify_envelope(json.dumps(raw, ensure_ascii=False).encode(), "k", "gw1")


SETTINGS = settings_from_dict({"config": {"key": "k"}})


def test_judge_names_the_version_of_an_envelope_too_large_to_read():
    verdict = judge(signed(7, HEAD + "# " + "x" * 2_000_000 + "\n"), SETTINGS, b"k", None, None)
    assert (verdict.version, verdict.status, verdict.kind) == (7, REJECTED, configdoc.ENVELOPE_OVERSIZED)


def test_judge_never_raises(monkeypatch):
    """With ever less stack left, a RecursionError strikes while reading the envelope, in
    rdflib, or in compiling the patterns: judge returns a rejection naming it every time.
    A gateway's rdflib runs in the document reader's own process, with a stack of its own
    (its failures: test_agent_document_reader.py); here it runs in this one, where the
    stack is cut."""
    monkeypatch.setattr(reconfigure, "read_document", parse_document)
    document = HEAD + "ew:static { ex:a ex:p " + "[ ex:p " * 30 + "ex:b" + " ]" * 30 + " . }\n"
    payload = signed(2, document)
    kinds = set()
    for frames in range(3, 200, 3):
        with stack_left(frames):
            verdict = judge(payload, SETTINGS, b"k", None, None)
        if verdict.status == REJECTED:
            assert "recursion" in verdict.reason.lower(), (frames, verdict.reason)
            kinds.add(verdict.kind)
    assert {CONFIG_DECODER_ERROR, configdoc.PARSE_ERROR} <= kinds
    assert judge(payload, SETTINGS, b"k", None, None).status == APPLIED     # stack back


# -- the agent's handler -------------------------------------------------------------------

def test_whatever_a_message_meets_it_is_acknowledged_counted_and_the_agent_goes_on(tmp_path):
    """A valid message handled with ever less stack left: wherever the RecursionError
    strikes (decoding, the engine, the outbox), nothing escapes into the MQTT client, and
    the message is acknowledged and counted; with the stack back, the same kind of
    message matches again."""
    bootstrap = tmp_path / "config.trig"
    bootstrap.write_text(config_document(1, patterns={"alarm": ALARM}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"),
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    seen: dict[str, int] = {}
    for frames in range(2, 40):
        acks: list[int] = []
        before = dict(agent.counters.values)
        with stack_left(frames):
            agent._on_sensor_message("ew/in/alarm/s1", alarm(frames), False, lambda: acks.append(1))
        assert acks == [1], f"{frames} frames left: not acknowledged"
        changed = {k for k, v in agent.counters.values.items() if v != before.get(k, 0)}
        outcomes = changed & {"handler_error", "decoder_error", "matches"}
        assert len(outcomes) == 1, f"{frames} frames left: counted as {changed}"
        outcome = outcomes.pop()
        seen[outcome] = seen.get(outcome, 0) + 1
    assert {"handler_error", "matches"} <= set(seen), seen
    before = agent.counters["matches"]
    agent._on_sensor_message("ew/in/alarm/s1", alarm(100), False, None)
    assert agent.counters["matches"] == before + 1
    agent.outbox.close()
    agent.configs.store.close()


def test_handler_failures_are_logged_once_a_minute_per_kind(tmp_path, caplog):
    """An agent whose engine is missing fails every message in the handler: each is
    counted and acknowledged, and the log gets one line (with its traceback) a minute."""
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data")}))
    agent.open_storage()
    agent.pipeline.engine = None
    clock = [0.0]
    agent._errors.limiter = LogLimiter(60, lambda: clock[0])
    acks: list[int] = []
    with caplog.at_level(logging.ERROR, logger="edgewave.agent"):
        for n in range(100):
            agent._on_sensor_message("ew/in/alarm/s1", alarm(n), False, lambda: acks.append(1))
        clock[0] = 61.0
        agent._on_sensor_message("ew/in/alarm/s1", alarm(100), False, lambda: acks.append(1))
    assert agent.counters["handler_error"] == 101 and len(acks) == 101
    lines = [r for r in caplog.records if "engine event=error" in r.getMessage()]
    assert len(lines) == 2 and all(r.exc_info for r in lines)
    assert "item=sensor" in lines[0].getMessage() and "AttributeError" in lines[0].getMessage()
    assert "suppressed_since_last=99" in lines[1].getMessage()
