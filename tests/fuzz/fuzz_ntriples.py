"""Fuzz target: N-Triples(-star) lines and recorded streams.

- ``parse_line`` on every line: NTriplesError or a triple; a triple serializes and parses
  back to itself, and the full parser gives the same triple as the fast path;
- ``parse`` of the whole text, strict (NTriplesError) and skip-and-count (no error);
- ``read_recorded`` of the lines as bytes (a file) and as text: RecordedStreamError or
  NTriplesError strict, nothing with an ``errors`` list;
- ``read_recorded``'s fast loop on the text as ``edgewave match`` reads a file: items and
  errors exactly those of its line-by-line checks (the same lines as bytes).

Text is the input as UTF-8 with invalid bytes kept as lone surrogates (see fuzzlib).
"""
from __future__ import annotations

from edgewave.shared import ntriples
from edgewave.shared.ntriples import NTriplesError, parse, parse_line, serialize
from edgewave.shared.recorded import read_recorded

from fuzzlib import Known, guarded, text_of

KNOWN: tuple[Known, ...] = ()


def _one(data: bytes) -> None:
    text = text_of(data)
    for line in text.split("\n"):
        try:
            triple = parse_line(line)
        except NTriplesError:
            continue
        if triple is not None:
            assert parse_line(serialize(triple)) == triple, (line, triple)
            assert ntriples._parse_full(line) == triple, (line, triple)
    try:
        parse(text)
    except NTriplesError:
        pass
    parse(text, errors=[])
    byte_lines = data.split(b"\n")
    list(read_recorded(byte_lines, errors=[]))
    try:
        list(read_recorded(text.split("\n")))
    except NTriplesError:  # RecordedStreamError is one
        pass
    lines = text.splitlines(keepends=True)
    ours, theirs = [], []
    items = list(read_recorded(iter(lines), ours))
    expected = list(read_recorded([line.encode("utf-8", "surrogateescape") for line in lines], theirs))
    assert items == expected and [(e.line, e.column, e.reason) for e in ours] == [
        (e.line, e.column, e.reason) for e in theirs], "the fast loop disagrees with the line-by-line checks"


TestOneInput = guarded(_one, KNOWN)
