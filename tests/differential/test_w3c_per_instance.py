"""The W3C SPARQL 1.1 query-evaluation tests for what per-instance queries add: aggregates,
grouping, BIND, VALUES, OPTIONAL, [NOT] EXISTS and MINUS, UNION, expressions in SELECT and
solution modifiers (``../shared`` reference data: tests/reference_data.py).

Every SELECT test of those folders with one data file and an XML or JSON result runs twice
through ``InstanceEvaluator``: with the data static (the query given a window it does not
read, the result read off as it stands), and with the data streamed, one triple per
millisecond, into one instance of a C-SPARQL window wide enough for all of it, the result
being that instance's report. Both must be the W3C's expected solutions as a multiset (up
to blank-node renaming). What the evaluator refuses by design is listed in LEFT_OUT with
the reason, and must be refused with a syntax error, never half-run.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest
import rdflib
from rdflib.namespace import RDF

from edgewave.agent.engine.per_instance import InstanceEvaluator, parse_instance_query
from edgewave.agent.engine.query import QuerySyntaxError
from edgewave.shared.rdf_files import read_triples
from reference_data import reference_data_dir
from sparql_results import expected_json_rows, expected_rows, same_solutions

pytestmark = pytest.mark.reference_data

MF = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
QT = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-query#")
DAWGT = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#")

ROOT = reference_data_dir()
SPARQL = (ROOT or Path("/nonexistent")) / "w3c-rdf-tests" / "sparql"
FOLDERS = [SPARQL / "sparql11" / f for f in ("aggregates", "grouping", "bind", "bindings", "negation", "exists",
                                             "project-expression")] + \
          [SPARQL / "sparql10" / f for f in ("optional", "optional-filter", "algebra", "solution-seq", "sort",
                                             "distinct", "reduced")]

_ASK = "ASK queries are not per-instance queries (a report is a table of solutions)"
LEFT_OUT: dict[str, str] = {
    "aggregates/agg-groupconcat-1": _ASK, "aggregates/agg-groupconcat-2": _ASK, "aggregates/agg-groupconcat-3": _ASK,
    "aggregates/agg-sample-01": _ASK, "aggregates/agg-sample-distinct": _ASK,
    "bindings/inline02": "subqueries are not supported",
    "negation/subset-02": "EXISTS inside a larger expression (only FILTER [NOT] EXISTS and && of them)",
}
_NUMERIC = tuple(f"<http://www.w3.org/2001/XMLSchema#{t}>" for t in ("integer", "decimal", "double", "float"))


class Case(NamedTuple):
    id: str
    query: Path
    data: Path
    result: Path


def _cases() -> list[Case]:
    cases = []
    for folder in FOLDERS:
        if not (folder / "manifest.ttl").is_file():
            continue
        manifest = rdflib.Graph().parse(folder / "manifest.ttl", format="turtle")
        for test in manifest.subjects(RDF.type, MF.QueryEvaluationTest):
            if (test, DAWGT.approval, DAWGT.Withdrawn) in manifest:
                continue
            action = manifest.value(test, MF.action)
            data = list(manifest.objects(action, QT.data))
            result = str(manifest.value(test, MF.result))
            if len(data) != 1 or list(manifest.objects(action, QT.graphData)) or \
                    not result.endswith((".srx", ".srj")):
                continue
            query = Path(str(manifest.value(action, QT.query)).removeprefix("file://"))
            cases.append(Case(f"{folder.name}/{query.stem}[{Path(str(data[0])).stem}]", query,
                              Path(str(data[0]).removeprefix("file://")), Path(result.removeprefix("file://"))))
    return sorted(set(cases), key=lambda c: c.id)


def _expected(case: Case) -> list[tuple]:
    rows = expected_rows(case.result) if case.result.suffix == ".srx" else expected_json_rows(case.result)
    return _canonical(rows)


def _with_window(text: str, clause: str) -> str:
    """The query with a dataset clause before its WHERE clause."""
    where = re.search(r"\bWHERE\b|\{", text, re.I)
    return text[:where.start()] + clause + "\n" + text[where.start():]


def _by_value(term: str) -> str:
    """A numeric literal as its datatype and value: a computed number's lexical form is the
    implementation's ("0.2E0" and "2.0E-1" are the same double)."""
    if term.endswith(_NUMERIC):
        lexical, _, datatype = term[1:].partition('"^^')
        try:
            return f"{Decimal(lexical).normalize()}^^{datatype}"
        except InvalidOperation:
            return term
    return term


def _canonical(rows: list[dict]) -> list[tuple]:
    return [tuple(sorted((v, _by_value(t)) for v, t in row.items())) for row in rows]


def run(case: Case, streamed: bool) -> list[tuple]:
    text = case.query.read_text(encoding="utf-8")
    errors: list = []
    data = read_triples(case.data, errors)
    assert not errors
    if streamed:
        evaluator = InstanceEvaluator(_with_window(text, "FROM STREAM <urn:test:s> [RANGE PT1000S STEP PT1000S]"),
                                      report="window-close")
        for ts, triple in enumerate(data):
            evaluator.push(triple, ts)
        reports = evaluator.finish()
        if not data:
            return _canonical(evaluator.current())
        assert len(reports) == 1, "the data fits one instance"
        return _canonical(reports[0].rows)
    evaluator = InstanceEvaluator(_with_window(text, "FROM NAMED WINDOW <urn:test:w> ON <urn:test:s> "
                                                     "[RANGE PT1S STEP PT1S]"))
    evaluator.add_static(data)
    return _canonical(evaluator.current())


CASES = _cases()
RUN = [c for c in CASES if c.id.split("[")[0] not in LEFT_OUT]
REFUSE = [c for c in CASES if c.id.split("[")[0] in LEFT_OUT]


def test_the_folders_are_there_and_run() -> None:
    if ROOT is None:  # a failure instead where the data is there (tests/conftest.py, reference_data)
        pytest.skip("no reference data directory (python3 scripts/fetch-reference-data.py)")
    assert len(CASES) >= 100, len(CASES)
    assert len(RUN) >= 0.9 * len(CASES)


@pytest.mark.parametrize("streamed", [False, True], ids=["static", "streamed"])
@pytest.mark.parametrize("case", RUN, ids=[c.id for c in RUN])
def test_w3c_per_instance(case: Case, streamed: bool) -> None:
    got = run(case, streamed)
    want = _expected(case)
    assert same_solutions(got, want), f"got {Counter(got)}\nwant {Counter(want)}"
    keys = _order_keys(case.query.read_text(encoding="utf-8"))
    if keys:     # in the order the query asks for (rows equal in every key may come in any order)
        assert _sort_values(got, keys) == _sort_values(want, keys), f"got {got}\nwant {want}"


_ORDER_BY = re.compile(r"\bORDER\s+BY\s+(.*?)(?:\bLIMIT\b|\bOFFSET\b|$)", re.I | re.S)
_ORDER_KEY = re.compile(r"^(?:(?:ASC|DESC)\s*\(\s*\?(\w+)\s*\)|\?(\w+))$", re.I)


def _order_keys(text: str) -> list[str] | None:
    """The variables of a query's ORDER BY, when every key is a plain (ASC or DESC) variable;
    None without ORDER BY or with an expression as a key (left to the multiset check)."""
    found = _ORDER_BY.search(text)
    if found is None:
        return None
    keys = []
    for key in re.findall(r"(?:ASC|DESC)\s*\([^)]*\)|\?\w+|\S+", found.group(1), re.I):
        m = _ORDER_KEY.match(key.strip())
        if m is None:
            return None
        keys.append(m.group(1) or m.group(2))
    return keys or None


def _sort_values(rows: list[tuple], keys: list[str]) -> list[tuple]:
    return [tuple(dict(row).get(k) for k in keys) for row in rows]


@pytest.mark.parametrize("case", REFUSE, ids=[c.id for c in REFUSE])
def test_w3c_left_out_is_refused(case: Case) -> None:
    with pytest.raises(QuerySyntaxError):
        parse_instance_query(_with_window(case.query.read_text(encoding="utf-8"),
                                          "FROM STREAM <urn:test:s> [RANGE PT1S STEP PT1S]"))
