"""The CSRBench correctness benchmark on its real weather stream, through `edgewave match`.

CSRBench (Dell'Aglio et al., ISWC 2013) checks RDF stream processors against an oracle.
All seven of its queries run here over its
stream: 34 one-second graphs of MesoWest observations, 15,188 triples
(tests/data/csrbench, see PROVENANCE.md there). Each runs as we wrote it in RSP-QL
(``queries/``) and, where the benchmark's window is the oracle run's, as the benchmark
itself wrote it, in RSP-QL or C-SPARQL (``queries/original/``).

The benchmark's engines evaluate each query on a window's content when the window closes.
edgewave is continuous: it emits each combination of triples whose time span fits the
width, once, when its last triple arrives. The two meet through one rule: a match belongs to
the window [t, t + size) (t a multiple of the slide, from 0) exactly when its first and
last triples both fall inside it. Grouped that way, our matches must give, window by
window, RDFox's answer, which the CSRBench oracle accepted for all seven queries. Windows
are compared as sets of bindings, as the oracle does.

Q4 (an AVG) and the benchmark's own REGISTER ISTREAM form of Q5 are evaluated per window
instance (``agent/engine/per_instance``): their reports are compared with RDFox's answer
window by window directly (Q4), and with what each RDFox window adds to the one before
(Q5, ISTREAM).
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from edgewave.agent import match_cli
from edgewave.agent.engine.per_instance import parse_for_evaluation
from edgewave.agent.engine.rspql import parse_query

DATA = Path(__file__).resolve().parents[1] / "data" / "csrbench"
QUERIES = sorted((DATA / "queries").glob("**/q*.rq"))

Bindings = frozenset[tuple[str, str]]


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("csrbench") / "stream.tsv"
    path.write_bytes(gzip.decompress((DATA / "stream.tsv.gz").read_bytes()))
    return path


def _term(value: dict) -> str:
    """A SPARQL-JSON-style binding as an N-Triples term."""
    if value["type"] == "uri":
        return f"<{value['value']}>"
    datatype = value.get("datatype")
    return f'"{value["value"]}"^^<{datatype}>' if datatype else f'"{value["value"]}"'


def rdfox_answers(n: int, slide_ms: int) -> dict[int, set[Bindings]]:
    """RDFox's answer per window, keyed by the window's close (RDFox labels it one slide later)."""
    answers: dict[int, set[Bindings]] = defaultdict(set)
    for relation in json.loads((DATA / f"rdfox-answer-{n}.json").read_text())["relations"]:
        for row in relation["results"]["bindings"]:
            answers[relation["timestamp"] - slide_ms].add(
                frozenset((var, _term(value)) for var, value in row["binding"].items()))
    return answers


def windowed(matches: list[dict], size_ms: int, slide_ms: int) -> dict[int, set[Bindings]]:
    """Continuous matches grouped into the windows [t, t + size) that hold them whole, keyed by close."""
    windows: dict[int, set[Bindings]] = defaultdict(set)
    for match in matches:
        start, end = match["start"], match["end"]
        t = max(0, -(-(end - size_ms + 1) // slide_ms)) * slide_ms   # first window reaching `end`
        while t <= start:
            windows[t + size_ms].add(frozenset(match["bindings"].items()))
            t += slide_ms
    return windows


@pytest.mark.parametrize("query", QUERIES, ids=[q.stem if q.parent.name == "queries" else f"{q.stem}-original"
                                                 for q in QUERIES])
def test_windows_give_the_answers_the_oracle_accepted(query: Path, stream: Path, capsys) -> None:
    n = int(query.stem[1])
    (window,) = parse_query(query.read_text()).windows.values()
    size, slide = window.width_ms, window.step_ms or window.width_ms

    assert match_cli.main(["match", "--query", str(query), "--stream", str(stream)]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert "triples_in=15188 " in err and "malformed=0 " in err

    want = rdfox_answers(n, slide)
    if parse_for_evaluation(query.read_text()).__class__.__name__ == "InstanceQuery":
        # REGISTER ISTREAM: evaluated per instance, each reporting what its window's answer
        # adds to the previous window's
        got = {report["window"]["end"]: {frozenset(row.items()) for row in report["rows"]} for report in lines}
        closes = sorted(set(got) | set(want))
        want = {close: want.get(close, set()) - want.get(close - slide, set()) for close in closes}
        got = {close: rows for close, rows in got.items() if rows}
        want = {close: rows for close, rows in want.items() if rows}
    else:
        got = windowed(lines, size, slide)
    assert want, "the reference answer is empty: the fixture is broken"
    for close in sorted(set(got) | set(want)):
        assert got.get(close, set()) == want.get(close, set()), f"window closing at {close} ms"


def test_a_match_spanning_two_windows_belongs_to_neither() -> None:
    """The grouping rule itself: a match is in a window only when it lies wholly inside."""
    one = {"bindings": {"x": "<urn:a>"}, "start": 4000, "end": 5000}
    assert windowed([one], 5000, 5000) == {}
    assert windowed([one], 5000, 1000) == {6000: {frozenset({("x", "<urn:a>")})},
                                           7000: {frozenset({("x", "<urn:a>")})},
                                           8000: {frozenset({("x", "<urn:a>")})},
                                           9000: {frozenset({("x", "<urn:a>")})}}


# Q4 as the benchmark wrote it, in RSP-QL and in C-SPARQL: an AVG evaluated per window instance.
Q4 = sorted((DATA / "per_instance").glob("q4-*.rq"))
ZERO = '"0"^^<http://www.w3.org/2001/XMLSchema#integer>'


@pytest.mark.parametrize("query", Q4, ids=[q.stem for q in Q4])
def test_q4_average_per_window_instance_is_rdfox_answer(query: Path, stream: Path, capsys) -> None:
    """Window by window, RDFox's average where it gives one. Where no observation passes the
    FILTER, RDFox reports nothing and edgewave reports the average of the empty group, 0, as
    SPARQL 1.1 says (the W3C test agg-empty-group-count-1 and its neighbours)."""
    assert match_cli.main(["match", "--query", str(query), "--stream", str(stream)]) == 0
    out, err = capsys.readouterr()
    reports = [json.loads(line) for line in out.splitlines()]
    assert "instances[q4]=9 " in err and "late_triples[q4]=0" in err
    got = {}
    for report in reports:
        assert report["query"] == "q4" and report["stream"] == "RSTREAM"
        assert report["window"]["end"] - report["window"]["start"] == 4000
        (row,) = report["rows"]
        got[report["window"]["end"]] = row["avg"]
    want = {close: dict(binding)["avg"] for close, answers in rdfox_answers(4, 4000).items() for binding in answers}
    assert len(want) == 6
    assert sorted(got) == list(range(4000, 36001, 4000))
    for close, term in got.items():
        if close in want:
            assert term.endswith("#double>") and float(term.split('"')[1]) == float(want[close].split('"')[1]), close
        else:
            assert term == ZERO, close
