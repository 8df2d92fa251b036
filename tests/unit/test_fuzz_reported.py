"""Crashes fuzzing found in decoders whose owners are changing them: reported, not fixed here.

Each test states the contract and fails today with the crash named in its marker
(``strict``: once the decoder is fixed the test passes, the run reports XPASS as a
failure, and the marker is to be removed, with the KNOWN entry of the fuzz target).
The inputs are in tests/fuzz/reported/.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from edgewave.agent.engine import Engine
from edgewave.agent.engine.query import QuerySyntaxError
from edgewave.agent.engine.rspql import parse_query
from edgewave.agent.match_cli import recorded_items
from edgewave.shared.recorded import read_recorded

REPORTED = Path(__file__).resolve().parent.parent / "fuzz" / "reported"
sys.path.insert(0, str(REPORTED.parent))


def _lines(name: str) -> list[str]:
    return (REPORTED / "ntriples" / name).read_text().splitlines(keepends=True)


@pytest.mark.xfail(strict=True, raises=ValueError,
                   reason="shared/ntriples.py read_recorded_lean: int() of a 5,000-digit timestamp")
def test_the_match_clis_reader_refuses_a_5000_digit_timestamp_as_read_recorded_does():
    lines = _lines("lean-huge-timestamp.tsv")
    ours, theirs = [], []
    assert list(recorded_items(iter(lines), ours)) == list(read_recorded(lines, theirs)) == []
    assert [(e.line, e.column, e.reason) for e in ours] == [(e.line, e.column, e.reason) for e in theirs]
    assert "beyond a signed 64-bit integer" in ours[0].reason


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="shared/ntriples.py read_recorded_lean (and agent/match_cli.py's fallback) take "
                          "timestamps beyond 2**63 - 1 ms that read_recorded refuses")
def test_the_match_clis_reader_agrees_with_read_recorded_beyond_64_bits():
    lines = _lines("lean-beyond-64-bit-timestamp.tsv")
    ours, theirs = [], []
    assert list(recorded_items(iter(lines), ours)) == list(read_recorded(lines, theirs))
    assert [(e.line, e.column, e.reason) for e in ours] == [(e.line, e.column, e.reason) for e in theirs]


@pytest.mark.xfail(strict=True, raises=ValueError,
                   reason="agent/engine/filters.py _typed_value: int() of a FILTER constant of 5,000 digits "
                          "when the query is added to an engine")
def test_a_query_that_parses_can_be_added_to_an_engine_or_is_refused_with_its_reason():
    try:
        query = parse_query("SELECT * FROM STREAM <http://example.org/s> [RANGE 1s] "
                            "WHERE { ?s ?p ?o FILTER(?o > " + "9" * 5000 + ") }")
    except QuerySyntaxError:
        return  # refused when parsed, with a line and column: as good
    engine = Engine(on_match=lambda match: None)
    engine.add_query(query)
    assert query.name in engine.queries()
