"""Small explicit cases shrunk from what the differential suite found, kept as regressions."""
from __future__ import annotations

from edgewave.agent.engine import Engine
from edgewave.agent.engine.rspql import parse_query

EX = "http://example.org/r#"


def ex(local: str) -> str:
    return f"<{EX}{local}>"


def run(query: str, static, stream, schema=()) -> list:
    matches = []
    engine = Engine(schema=list(schema), on_match=matches.append)
    engine.add_query(parse_query(query))
    engine.add_static(static)
    for triple, ts, name in stream:
        engine.push(triple, ts, stream=name)
    return matches


def test_csparql_pattern_joins_a_static_triple():
    """Shrunk from test_csparql_patterns_also_match_static_data: a C-SPARQL query (Sparkwave's
    Figure 4 style, FROM STREAM + FROM <graph>) must find its account_of triple in static data."""
    query = f"""REGISTER QUERY accounts AS
        SELECT ?post ?user
        FROM STREAM <urn:posts> [RANGE 10s]
        FROM <urn:friends>
        WHERE {{ ?account {ex('creator_of')} ?post . ?account {ex('account_of')} ?user }}"""
    static = [(ex("johnd"), ex("account_of"), ex("JohnDoe"))]
    stream = [((ex("johnd"), ex("creator_of"), ex("tweet1")), 5, "<urn:posts>")]
    (match,) = run(query, static, stream)
    assert match.bindings == {"post": ex("tweet1"), "user": ex("JohnDoe")}
    assert sorted(match.triples) == sorted([((ex("johnd"), ex("creator_of"), ex("tweet1")), 5),
                                            ((ex("johnd"), ex("account_of"), ex("JohnDoe")), -1)])
    assert (match.start, match.end) == (5, 5)
