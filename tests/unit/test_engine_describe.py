"""``Engine.describe`` and ``edgewave match --explain``: the example of docs/engine.md is
what they print, and the text follows the network as queries come and go."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from edgewave.agent.engine import Engine
from edgewave.shared.ntriples import parse

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"
SECTION = "## Printing the compiled network"


def doc_example() -> tuple[list[str], str, str]:
    """The queries, the schema (N-Triples) and the printed network of the doc's example."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M)
    queries = [body for lang, body in blocks if lang == "sparql"]
    (schema,) = [body for lang, body in blocks if lang == "ntriples"]
    (printed,) = [body for lang, body in blocks if lang == "text"]
    assert len(queries) == 2
    return queries, schema, printed


def edgewave_cmd() -> list[str]:
    script = Path(sys.executable).parent / "edgewave"
    return [str(script)] if script.exists() else [sys.executable, "-m", "edgewave.agent.match_cli"]


def test_the_doc_example_is_what_describe_prints() -> None:
    queries, schema, printed = doc_example()
    engine = Engine(schema=parse(schema))
    for query in queries:
        engine.add_query(query)
    assert engine.describe() == printed


def test_match_explain_prints_the_doc_example_and_reads_no_stream(tmp_path: Path) -> None:
    queries, schema, printed = doc_example()
    args = ["match", "--explain", "--schema", str(tmp_path / "schema.nt")]
    (tmp_path / "schema.nt").write_text(schema, encoding="utf-8")
    for i, query in enumerate(queries):
        path = tmp_path / f"q{i}.rq"
        path.write_text(query, encoding="utf-8")
        args += ["--query", str(path)]
    done = subprocess.run([*edgewave_cmd(), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
    assert done.stderr == ""


def test_match_without_explain_still_needs_a_stream(tmp_path: Path) -> None:
    queries, _, _ = doc_example()
    (tmp_path / "q.rq").write_text(queries[0], encoding="utf-8")
    done = subprocess.run([*edgewave_cmd(), "match", "--query", str(tmp_path / "q.rq")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--stream" in done.stderr


PREFIX = "PREFIX : <http://ex.org/>\n"


def windowed(name: str, width: str, body: str) -> str:
    return (f"{PREFIX}REGISTER RSTREAM <{name}> AS SELECT * FROM NAMED WINDOW <w> ON :s [RANGE {width} STEP PT1S] "
            f"WHERE {{ WINDOW <w> {{ {body} }} }}")


def test_sharing_follows_the_registered_queries() -> None:
    engine = Engine(entailment=False)
    engine.add_query(windowed("a", "PT10S", "?x a :T . ?x :p ?y ."))
    engine.add_query(windowed("b", "PT2S", "?z a :T . ?z :p ?w . ?w :q ?v ."))
    text = engine.describe()
    assert "network: 2 queries, 3 alpha memories, 3 join nodes, entailment off" in text
    assert text.count("queries a, b (shared)") == 4  # A0, A1, J0, J1
    assert "production a: SELECT ?x ?y, window 10000 ms" in text
    assert "production b: SELECT ?z ?w ?v, window 2000 ms" in text
    assert "J1 star join on ?x, stores no tokens" in text  # a shared node: named as the first query names it
    assert "J2 join on ?w, beta memory of J1's tokens by ?w" in text  # b's own node, in b's names
    engine.remove_query("a")
    text = engine.describe()
    assert "(shared)" not in text
    assert "network: 1 query, 3 alpha memories, 3 join nodes" in text
    assert "?z a :T" in text and "window 2000 ms" in text and "10000" not in text


def test_static_patterns_and_layered_windows_are_named() -> None:
    engine = Engine(entailment=False)
    engine.add_query(
        f"{PREFIX}REGISTER RSTREAM <two> AS SELECT * "
        "FROM NAMED WINDOW <w1> ON :s1 [RANGE PT3S STEP PT1S] FROM NAMED WINDOW <w2> ON :s2 [RANGE PT7S STEP PT1S] "
        "WHERE { WINDOW <w1> { ?x :p ?y } WINDOW <w2> { ?y :q ?z } ?z :label ?l }"
    )
    text = engine.describe()
    assert "[?x :p ?y] from :s1" in text and "[?y :q ?z] from :s2" in text
    assert "[?z :label ?l] from static" in text and "static until removed" in text
    assert "window 7000 ms at this level (layered: several windows)" in text
    assert "window static at this level" in text
    assert "production two: SELECT ?x ?y ?z ?l, window each pattern's own window" in text
