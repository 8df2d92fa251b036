"""The plainest per-instance queries are read without rdflib (per_instance/direct.py), to
exactly the algebra rdflib's translation gives them; everything else is left to rdflib."""
from __future__ import annotations

import glob
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from edgewave.agent.engine.per_instance.algebra import Op, to_json
from edgewave.agent.engine.per_instance.direct import plain_algebra
from edgewave.agent.engine.per_instance.front import rdflib_algebra
from edgewave.agent.engine.rspql import split_rspql

ROOT = Path(__file__).resolve().parents[2]
P = "PREFIX : <http://ex.org/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"

TAKEN = [
    "SELECT ?a ?b WHERE { GRAPH <urn:w> { ?a :p ?b } }",
    "SELECT DISTINCT ?a WHERE { GRAPH <urn:w> { ?a :p ?b } }",
    "select ?a where { graph <urn:w> { ?a :p ?b ; :q ?c , ?d . } }",
    "SELECT ?a { ?a :p ?b . GRAPH <urn:w> { ?b :q ?c } . ?c :r ?d }",
    "SELECT ?a ?c WHERE { GRAPH <urn:w1> { ?a :p ?b } GRAPH <urn:w2> { ?b a ?c } }",
    "SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:w> { ?a :p ?b } }",
    "SELECT (COUNT(DISTINCT ?a) AS ?n) (SUM(?b) AS ?s) (MIN(?b) AS ?mi) WHERE { GRAPH <urn:w> { ?a :p ?b } }",
    "SELECT ?a (AVG(?b) AS ?m) (MAX(xsd:double(?b)) AS ?x) WHERE { ?a :p ?b } GROUP BY ?a",
    "SELECT ?a (SAMPLE(?b) AS ?m) WHERE { ?a a :C ; :p ?b, ?c } GROUP BY ?a ?c",
    "SELECT ?a (GROUP_CONCAT(?b) AS ?m) WHERE { ?a :p ?b } GROUP BY ?a",
    "SELECT ?c ?a WHERE { ?a :p ?b ; :q ?c } GROUP BY ?a ?c",
    # rdflib reorders a basic graph pattern's triples: the most bound first, then by term
    "SELECT ?a WHERE { ?x :q ?y . ?a :p <http://ex.org/o> . ?a :r ?x . ?y :s ?z . :k :k :k . ?b ?p ?a }",
    "SELECT ?z { ?z :b ?y . ?y :a ?x . ?x :c ?w . ?w a :C . ?a ?b ?c . ?z :b ?y }",
    "SELECT (SUM(DISTINCT STR(?b)) AS ?s) $a WHERE { ?a <http://ex.org/p> $b } # a comment\nGROUP BY $a",
    "SELECT ?type (AVG(xsd:decimal(STR(?price))) AS ?avg) (COUNT(*) AS ?offers)\n"
    "WHERE { GRAPH <urn:bench:w> { ?offer a :Offer ; :product ?product ; :price ?price . ?product a ?type } }\n"
    "GROUP BY ?type",
]

LEFT_TO_RDFLIB = [
    "SELECT * WHERE { ?a :p ?b }",  # its variables in a set's order
    "SELECT ?a WHERE { ?a :p \"x\" }",
    "SELECT ?a WHERE { ?a :p 3 }",
    "SELECT ?a WHERE { ?a :p ?b FILTER(?b > 3) }",
    "SELECT ?a WHERE { ?a :p ?b OPTIONAL { ?a :q ?c } }",
    "SELECT ?a WHERE { ?a :p/:q ?b }",
    "SELECT ?a WHERE { ?a :p [ :q ?b ] }",
    "SELECT ?a WHERE { ?a :p _:b }",
    "SELECT ?a WHERE { ?a <rel> ?b }",
    "SELECT ?a WHERE { ?a ex:p ?b }",  # an undeclared prefix: rdflib's error
    "SELECT ?a (COUNT(*) AS ?n) WHERE { ?a :p ?b }",  # ?a not grouped
    "SELECT ?b (COUNT(*) AS ?n) WHERE { ?a :p ?b } GROUP BY ?a",
    "SELECT (COUNT(*) AS ?a) WHERE { ?a :p ?b }",  # AS a variable of the pattern
    "SELECT ?a ?a WHERE { ?a :p ?b }",
    "SELECT ?a WHERE { ?a :p ?b } ORDER BY ?a",
    "SELECT ?a WHERE { ?a :p ?b } LIMIT 3",
    "SELECT ?a (COUNT(*) AS ?n) WHERE { ?a :p ?b } GROUP BY ?a HAVING (COUNT(*) > 1)",
    "SELECT (?a AS ?b) WHERE { ?a :p ?c }",
    "SELECT (COUNT(*) + 1 AS ?n) WHERE { ?a :p ?c }",
    "SELECT (GROUP_CONCAT(?a; SEPARATOR=\"|\") AS ?n) WHERE { ?a :p ?c }",
    "SELECT (MAX(xsd:double(?a, ?c)) AS ?n) WHERE { ?a :p ?c }",
    "SELECT REDUCED ?a WHERE { ?a :p ?b }",
    "SELECT ?a FROM <urn:g> WHERE { ?a :p ?b }",
    "SELECT ?a WHERE { GRAPH ?g { ?a :p ?b } }",
    "SELECT ?a WHERE { GRAPH <urn:w> { } }",
    "SELECT ?a WHERE { { ?a :p ?b } }",
    "SELECT ?a WHERE { ?a :p ?b } VALUES ?a { :x }",
    "SELECT ?a WHERE { ?a :p ?b . . }",
    "SELECT ?a WHERE { ?a :p ?b ",
    "SELECT ?a WHERE { ?a :p ?b } GROUP BY",
    "SELECT ?a WHERE { ?a :p ?b } GROUP BY (STR(?a))",
    "SELECT ?a WHERE { ?a :p ?b } GROUP BY ?a ?a",
    "SELECT ?a WHERE { ?a :p ?ü }",
    "ASK { ?a :p ?b }",
    "BASE <http://ex.org/> SELECT ?a WHERE { ?a <p> ?b }",
]


def _without_vars(node):
    if isinstance(node, Op):
        return Op(node.name, **{key: _without_vars(value) for key, value in node.items() if key != "_vars"})
    if isinstance(node, list):
        return [_without_vars(item) for item in node]
    return node


def _as_rdflib_has_it(sparql: str):
    return to_json(_without_vars(rdflib_algebra(sparql)))


@pytest.mark.parametrize("query", TAKEN)
def test_read_here_as_rdflib_reads_it(query: str) -> None:
    plain = plain_algebra(P + query)
    assert plain is not None
    assert to_json(plain) == _as_rdflib_has_it(P + query)


@pytest.mark.parametrize("query", LEFT_TO_RDFLIB)
def test_everything_else_is_left_to_rdflib(query: str) -> None:
    assert plain_algebra(P + query) is None


def test_the_repository_queries_it_takes_read_as_rdflib_reads_them() -> None:
    """Every query file of the tests, as written and with its RSP-QL clauses taken out:
    what this reader takes, rdflib accepts and translates the same way."""
    taken = 0
    for path in sorted(glob.glob(str(ROOT / "tests" / "**" / "*.rq"), recursive=True)):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        texts = [text]
        try:
            texts.append(split_rspql(text).sparql)
        except Exception:  # not RSP-QL: the text as it is
            pass
        for sparql in texts:
            plain = plain_algebra(sparql)
            if plain is None:
                continue
            taken += 1
            assert to_json(plain) == _as_rdflib_has_it(sparql), path
    assert taken >= 10


def test_a_plain_aggregate_query_runs_without_importing_rdflib(tmp_path: Path) -> None:
    query = tmp_path / "avg.rq"
    query.write_text(
        "REGISTER RSTREAM <avg> AS PREFIX : <http://ex.org/>\n"
        "SELECT ?s (AVG(?v) AS ?avg) FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT10S STEP PT1S]\n"
        "WHERE { WINDOW <urn:w> { ?s :v ?v } } GROUP BY ?s\n")
    stream = tmp_path / "s.tsv"
    stream.write_text('1000\t<http://ex.org/a> <http://ex.org/v> "2"^^<http://www.w3.org/2001/XMLSchema#integer> .\n')
    code = ("import sys\nfrom edgewave.agent.match_cli import main\n"
            f"main(['match', '--query', {str(query)!r}, '--stream', {str(stream)!r}])\n"
            "print('rdflib' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"
    rows = [json.loads(line)["rows"] for line in done.stdout.splitlines()]
    assert rows[0] == [{"s": "<http://ex.org/a>", "avg": '"2.0"^^<http://www.w3.org/2001/XMLSchema#decimal>'}]


def test_random_patterns_read_as_rdflib_reads_them() -> None:
    """rdflib's pattern order (reorderTriples) and joins, over patterns drawn at random."""
    rng = random.Random(7)
    terms = ["?a", "?b", "?c", "?d", ":p", ":q", "<http://ex.org/r>", ":a"]
    for _ in range(500):
        blocks = []
        for _ in range(rng.randint(1, 3)):
            triples = " . ".join(" ".join([rng.choice(terms[:4] + terms[5:]), rng.choice(terms[2:] + ["a"]),
                                           rng.choice(terms)]) for _ in range(rng.randint(1, 4)))
            blocks.append(f"GRAPH <urn:w{rng.randint(1, 2)}> {{ {triples} }}" if rng.random() < 0.5 else triples)
        head = rng.choice(["SELECT ?a", "SELECT DISTINCT ?a ?b", "SELECT ?a (COUNT(*) AS ?n)",
                           "SELECT (SUM(?c) AS ?s) (AVG(STR(?d)) AS ?m)"])
        tail = " GROUP BY ?a" if "COUNT" in head else ""
        query = f"{P}{head} WHERE {{ {' . '.join(blocks)} }}{tail}"
        plain = plain_algebra(query)
        try:
            theirs = _as_rdflib_has_it(query)
        except Exception:  # rdflib refuses it: so must this reader
            assert plain is None, query
            continue
        if plain is not None:
            assert to_json(plain) == theirs, query
