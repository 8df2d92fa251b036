"""The W3C SPARQL test suite (DAWG data-r2) for what edgewave's patterns can say.

edgewave's patterns are basic graph patterns with FILTER. These are the W3C's own tests of
exactly that: FILTER operators and type promotion, effective boolean value, built-ins,
REGEX, open-world value testing (what equality means for literals of unknown or different
types), casts, and the scope of a FILTER in a nested group. Files: tests/data/w3c-sparql,
unchanged (see PROVENANCE.md there).

Every SELECT test of those folders with one data file and SPARQL XML results runs twice:
with the data as static triples and the query as written, and with the data streamed
(one triple per millisecond) into a window wide enough to hold all of it. Both must give
the W3C's expected solutions as a multiset. Tests the engine refuses by design (OPTIONAL,
UNION, RDF collections, expressions in SELECT) are listed in REFUSED: each must be refused
with a syntax error that says why, never half-run.

The SPARQL 1.1 entailment-regime tests that apply under RDFS run the same way with the
epsilon-network on, the data file serving as schema and static data at once. They are read
from the reference data directory (tests/reference_data.py, filled by
scripts/fetch-reference-data.py), skipped where there is none and failed where there is one
without them.

The syntax tests (sparql10 syntax-sparql1-5 here; SPARQL 1.1's syntax-query from the
reference data) hold the parser to the grammar: every invalid query must be refused, and
every valid one accepted, or refused with an error saying what the engine does not support,
never with a misreading ("expected X, found Y") or a crash.

What a SPARQL engine would add and the harness does itself: SELECT DISTINCT. The engine
reports every distinct combination of triples once (unrestricted consumption), so the
harness removes duplicate projected rows when the query says DISTINCT.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest
import rdflib
from rdflib.collection import Collection
from rdflib.namespace import RDF

from edgewave.agent.engine import Engine, parse_query
from edgewave.agent.engine.query import Query, QuerySyntaxError, WindowSpec
from edgewave.shared.rdf_files import read_triples
from reference_data import reference_data_dir, where
from sparql_results import Row, expected_rows, same_solutions

SUITE = Path(__file__).resolve().parents[1] / "data" / "w3c-sparql" / "sparql10"
FOLDERS = ("basic", "triple-match", "expr-builtin", "expr-equals", "expr-ops", "open-world", "type-promotion",
           "boolean-effective-value", "regex", "bound", "i18n", "algebra", "cast", "distinct")

MF = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
QT = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-query#")
DAWGT = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#")
SD = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")
ENT = rdflib.Namespace("http://www.w3.org/ns/entailment/")

_OPTIONAL, _UNION, _LIST, _SELECT_EXPR = (
    "OPTIONAL is not supported", "UNION is not supported", "RDF collections are not supported",
    r"expressions in SELECT \(\(\.\.\. AS \?v\)\) are not supported")
REFUSED = {
    "basic/list-1": _LIST, "basic/list-2": _LIST, "basic/list-3": _LIST, "basic/list-4": _LIST,
    "expr-ops/query-multiply-numbers-cast": _SELECT_EXPR, "expr-ops/query-add-numbers-cast": _SELECT_EXPR,
    "expr-ops/query-subtract-numbers-cast": _SELECT_EXPR, "expr-ops/query-divide-numbers-cast": _SELECT_EXPR,
    "expr-ops/query-unminus-2": _SELECT_EXPR, "expr-ops/query-unplus-2": _SELECT_EXPR,
    "open-world/open-eq-12": _OPTIONAL, "algebra/filter-scope-1": _OPTIONAL, "algebra/join-combo-1": _OPTIONAL,
    "algebra/var-scope-join-1": _OPTIONAL, "algebra/two-nested-opt": _OPTIONAL,
    "algebra/two-nested-opt-alt": _OPTIONAL, "algebra/opt-filter-1": _OPTIONAL, "algebra/opt-filter-2": _OPTIONAL,
    "algebra/opt-filter-3": _OPTIONAL, "distinct/distinct-2": _OPTIONAL, "distinct/no-distinct-2": _OPTIONAL,
    "distinct/distinct-star-1": _UNION,
}



class Case(NamedTuple):
    id: str  # folder/query-file-stem, plus the data file's stem when a query runs on several
    query: Path
    data: Path
    result: Path


def _cases(folders: list[Path], regime: rdflib.URIRef | None = None) -> list[Case]:
    cases = []
    for folder in folders:
        manifest = rdflib.Graph().parse(folder / "manifest.ttl", format="turtle")
        for test in manifest.subjects(RDF.type, MF.QueryEvaluationTest):
            if (test, DAWGT.approval, DAWGT.Withdrawn) in manifest:
                continue
            action = manifest.value(test, MF.action)
            if regime is not None and regime not in _regimes(manifest, action):
                continue
            data = list(manifest.objects(action, QT.data))
            result = str(manifest.value(test, MF.result))
            if len(data) != 1 or list(manifest.objects(action, QT.graphData)) or not result.endswith(".srx"):
                continue  # datasets of several graphs, CONSTRUCT/ASK results: not patterns' business
            query = Path(str(manifest.value(action, QT.query)).removeprefix("file://"))
            cases.append(Case(f"{folder.name}/{query.stem}", query, Path(str(data[0]).removeprefix("file://")),
                              Path(result.removeprefix("file://"))))
    stems = Counter(case.id for case in cases)
    return sorted(
        (case._replace(id=f"{case.id}[{case.data.stem}]") if stems[case.id] > 1 else case for case in cases),
        key=lambda case: case.id)


def _regimes(manifest: rdflib.Graph, action: rdflib.term.Node) -> set:
    found: set = set()
    for regime in manifest.objects(action, SD.entailmentRegime):
        found |= set(Collection(manifest, regime)) if (regime, RDF.first, None) in manifest else {regime}
    return found


CASES = _cases([SUITE / folder for folder in FOLDERS])
RUN = [case for case in CASES if case.id.split("[")[0] not in REFUSED]
REFUSE = [case for case in CASES if case.id.split("[")[0] in REFUSED]

REFERENCE_DATA = reference_data_dir()
ENTAILMENT = (REFERENCE_DATA or Path("/nonexistent")) / "w3c-rdf-tests" / "sparql" / "sparql11" / "entailment"
ENTAILMENT_CASES = _cases([ENTAILMENT], ENT.RDFS) if ENTAILMENT.is_dir() else []
# Sparkwave's epsilon-network entails instance triples (rdfs2, 3, 7, 9, inverse, symmetric);
# it does not add schema triples. These tests query the schema's own closure, so the engine
# finds only the asserted part of their solutions (checked: never a wrong one).
SCHEMA_CLOSURE = {
    "entailment/rdfs05": "rdfs10: every class is a subclass of itself",
    "entailment/rdfs11": "rdfs6: every property is a subproperty of itself",
    "entailment/sparqldl-02": "rdfs10", "entailment/sparqldl-03": "rdfs10",
    "entailment/paper-sparqldl-Q1": "rdfs11: subClassOf is transitive, as triples",
}
REFUSED_ENTAILMENT = {**{f"entailment/bind0{i}": "BIND is not supported" for i in range(1, 9)},
                      "entailment/sparqldl-05": "ASK queries are not supported",
                      "entailment/sparqldl-06": "ASK queries are not supported"}


def as_stream_query(query: Query) -> Query:
    """The same query with every pattern moved into one window wide enough for the whole
    data: the streamed triples then go through the stream's join path, not the static one."""
    stream = "<urn:edgewave:test:w3c>"
    window = WindowSpec(name=stream, stream=stream, width_ms=10**9, step_ms=None)
    patterns = tuple(dataclasses.replace(p, window=stream) for p in query.patterns)
    return dataclasses.replace(query, windows={stream: window}, patterns=patterns)


def solutions(case: Case, streamed: bool, entailment: bool = False) -> list[Row]:
    query = parse_query(case.query.read_text(encoding="utf-8"))
    errors: list = []
    data = read_triples(case.data, errors)
    assert not errors
    matches: list = []
    engine = Engine(schema=data if entailment else None, entailment=entailment, on_match=matches.append)
    if streamed:
        engine.add_query(as_stream_query(query))
        for ts, triple in enumerate(data):
            engine.push(triple, ts)
    else:
        engine.add_query(query)
        engine.add_static(data)
    projection = query.projection()
    rows = [tuple(sorted((v, m.bindings[v]) for v in projection if m.bindings.get(v) is not None))
            for m in matches]
    if query.distinct:
        rows = list(dict.fromkeys(rows))
    return rows


def test_the_suite_is_there_and_most_of_it_runs() -> None:
    assert len(CASES) >= 110 and len(RUN) >= 90, (len(CASES), len(RUN))
    assert {case.id.split("[")[0] for case in REFUSE} == set(REFUSED)
    if REFERENCE_DATA is not None:
        assert len(ENTAILMENT_CASES) >= 30, f"{ENTAILMENT}: {len(ENTAILMENT_CASES)} RDFS entailment tests"
        assert set(SCHEMA_CLOSURE) | set(REFUSED_ENTAILMENT) <= {case.id.split("[")[0] for case in ENTAILMENT_CASES}


@pytest.mark.parametrize("streamed", [False, True], ids=["static", "streamed"])
@pytest.mark.parametrize("case", RUN, ids=[case.id for case in RUN])
def test_w3c_query_gives_the_expected_solutions(case: Case, streamed: bool) -> None:
    want = [tuple(sorted(row.items())) for row in expected_rows(case.result)]
    got = solutions(case, streamed)
    assert same_solutions(got, want), (
        f"{case.query.name} on {case.data.name}\n  got {sorted(got)}\n  want {sorted(want)}")


@pytest.mark.parametrize("case", REFUSE, ids=[case.id for case in REFUSE])
def test_w3c_query_outside_the_pattern_language_is_refused_with_the_reason(case: Case) -> None:
    with pytest.raises(QuerySyntaxError, match=REFUSED[case.id.split("[")[0]]):
        parse_query(case.query.read_text(encoding="utf-8"))


def _entailment_params() -> list:
    if not ENTAILMENT_CASES:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{ENTAILMENT} not found ({where()})"))]
    return [pytest.param(case, id=case.id) for case in ENTAILMENT_CASES]


@pytest.mark.reference_data
@pytest.mark.parametrize("case", _entailment_params())
def test_w3c_rdfs_entailment_query(case: Case) -> None:
    stem = case.id.split("[")[0]
    if stem in REFUSED_ENTAILMENT:
        with pytest.raises(QuerySyntaxError, match=REFUSED_ENTAILMENT[stem]):
            parse_query(case.query.read_text(encoding="utf-8"))
        return
    want = [tuple(sorted(row.items())) for row in expected_rows(case.result)]
    for streamed in (False, True):
        got = solutions(case, streamed, entailment=True)
        if stem in SCHEMA_CLOSURE:
            assert set(got) < set(want), (SCHEMA_CLOSURE[stem], sorted(got), sorted(want))
        else:
            assert same_solutions(got, want), (
                f"{case.query.name} ({'streamed' if streamed else 'static'})\n  got {sorted(got)}\n  want {sorted(want)}")


SYNTAX_FOLDERS = [SUITE / f"syntax-sparql{i}" for i in range(1, 6)]
SYNTAX_11 = ENTAILMENT.parent / "syntax-query"
# What the engine may answer to a valid query it does not take: it says so.
REFUSAL = re.compile(r"not supported|the query has no triple patterns|unknown function")


def _syntax_cases(folders: list[Path]) -> list:
    cases = []
    for folder in folders:
        manifest = rdflib.Graph().parse(folder / "manifest.ttl", format="turtle")
        for kind in ("PositiveSyntaxTest", "NegativeSyntaxTest", "PositiveSyntaxTest11", "NegativeSyntaxTest11"):
            for test in manifest.subjects(RDF.type, MF[kind]):
                if (test, DAWGT.approval, DAWGT.Withdrawn) in manifest:
                    continue
                query = Path(str(manifest.value(test, MF.action)).removeprefix("file://"))
                cases.append(pytest.param(query, kind.startswith("Positive"), id=f"{folder.name}/{query.name}"))
    return sorted(cases, key=lambda case: case.id)


SYNTAX_CASES = _syntax_cases(SYNTAX_FOLDERS) + (_syntax_cases([SYNTAX_11]) if SYNTAX_11.is_dir() else [])


def test_the_syntax_suites_are_there() -> None:
    assert len(SYNTAX_CASES) >= 190 + (90 if REFERENCE_DATA is not None else 0), (len(SYNTAX_CASES), SYNTAX_11)


@pytest.mark.parametrize("query,valid", SYNTAX_CASES)
def test_w3c_syntax(query: Path, valid: bool) -> None:
    text = query.read_text(encoding="utf-8")
    if not valid:
        with pytest.raises(QuerySyntaxError):
            parse_query(text)
        return
    try:
        parse_query(text)
    except QuerySyntaxError as exc:
        assert REFUSAL.search(str(exc)), f"a valid query misread: {exc}\n{text}"
