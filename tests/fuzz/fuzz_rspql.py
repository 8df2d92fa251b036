"""Fuzz target: the RSP-QL parser (``edgewave.agent.engine.parse_query``).

Documented error: ``QuerySyntaxError``, with a line and column inside the text. An
accepted query's ground terms are canonical N-Triples terms: each parses back to itself
as the object of an N-Triples statement (terms holding a relative IRI, which a query may
keep when it has no BASE, are not N-Triples and are skipped).
"""
from __future__ import annotations

# the parser module itself, not the lazy ``edgewave.agent.engine.parse_query``: run.py instruments
# what is imported here, and a module first imported inside a call would not be
from edgewave.agent.engine.query import QuerySyntaxError, TriplePattern, is_var
from edgewave.agent.engine.rspql import parse_query
from edgewave.shared.ntriples import NTriplesError, parse_line

from fuzzlib import guarded, text_of

_S, _P = "<http://fuzz.example/s>", "<http://fuzz.example/p>"


def _terms(pattern: TriplePattern):
    for term in pattern.terms():
        if isinstance(term, TriplePattern):
            yield from _terms(term)
        elif not is_var(term):
            yield term


def _one(data: bytes) -> None:
    text = text_of(data)
    try:
        query = parse_query(text, default_width_ms=1000 if data[:1] == b"#" else None)
    except QuerySyntaxError as exc:
        assert 1 <= exc.line <= text.count("\n") + 1 and exc.column >= 1, str(exc)
        return
    for pattern in query.patterns:
        for term in _terms(pattern):
            try:
                triple = parse_line(f"{_S} {_P} {term} .")
            except NTriplesError as exc:
                if "relative IRI" in exc.reason:
                    continue
                raise AssertionError(f"term {term!r} is not N-Triples: {exc}") from None
            assert triple[2] == term, (term, triple)


TestOneInput = guarded(_one)
