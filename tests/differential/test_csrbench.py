"""The CSRBench correctness benchmark on its real weather stream, through `edgewave match`.

CSRBench (Dell'Aglio et al., ISWC 2013) checks RDF stream processors against an oracle.
Six of its seven queries run here (Q4 is an AVG aggregate; patterns have none) over its
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
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from edgewave.agent import match_cli
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
    matches = [json.loads(line) for line in out.splitlines()]
    assert "triples_in=15188 " in err and "malformed=0 " in err

    got, want = windowed(matches, size, slide), rdfox_answers(n, slide)
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
