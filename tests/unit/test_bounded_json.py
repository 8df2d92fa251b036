"""shared.bounded_json: what a hostile JSON payload meets before and while it is parsed."""
from __future__ import annotations

import json

import pytest

from edgewave.cloud.registry import AckError, StatusError, parse_ack, parse_status
from edgewave.shared.bounded_json import PayloadError, load_json, nesting_depth


@pytest.mark.parametrize("text, depth", [
    ("1", 0),
    ("[]", 1),
    ('{"a": [1, {"b": []}]}', 4),
    ('"[[[[{{{{"', 0),                       # brackets inside a string are text
    ('["\\"[[[", [2]]', 2),                  # an escaped quote does not end the string
    ('{"a": "]]]]"}', 1),
])
def test_nesting_depth_counts_structure_not_text(text, depth):
    assert nesting_depth(text.encode()) == depth


def test_a_million_brackets_are_refused_before_the_parser_runs():
    with pytest.raises(PayloadError, match="nesting depth 1000000"):
        load_json(b"[" * 1_000_000, max_bytes=2_000_000, max_depth=32)


@pytest.mark.parametrize("payload, reason", [
    (b"9" * 21, "21 digits"),
    (b"[1e400, NaN]", "NaN"),
    (b"-Infinity", "Infinity"),
    (b'"\\udc00"', "surrogate"),
    (b'{"k\\ud83d": 1}', "surrogate"),       # a key is a string too
    (b"\xc3\x28", "UTF-8"),
    (b"{", "not JSON"),
    (b"x" * 101, "101 bytes"),
])
def test_each_failure_is_one_error_type_naming_the_limit(payload, reason):
    with pytest.raises(PayloadError, match=reason):
        load_json(payload, max_bytes=100)


def test_valid_json_within_the_limits_is_read_as_json():
    value = {"a": [1, -2, 3.5, None, True], "b": "\u00e9\U0001F600", "c": -9223372036854775808}
    assert load_json(json.dumps(value).encode()) == value
    assert load_json(json.dumps(value, ensure_ascii=False)) == value


def test_a_bare_word_status_is_a_state_and_broken_json_is_refused():
    assert parse_status(b"offline") == {"state": "offline"}
    assert parse_status(b'{"state": "online"}') == {"state": "online"}
    with pytest.raises(StatusError, match="nesting"):
        parse_status(b"[" * 100)
    with pytest.raises(StatusError, match="bytes"):
        parse_status(b"{" + b" " * 2000 + b"}", max_bytes=1000)


@pytest.mark.parametrize("ack", [
    {"status": "applied", "version": True},
    {"status": "applied", "version": 2 ** 64},
    {"status": "applied", "version": -1},
    {"status": "applied", "version": 3, "gateway": ["gw1"]},
])
def test_an_ack_sqlite_could_not_store_is_refused(ack):
    with pytest.raises(AckError):
        parse_ack(json.dumps(ack).encode())
