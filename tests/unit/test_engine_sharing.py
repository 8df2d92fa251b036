"""Shared join nodes between patterns, and adding/removing patterns at run time."""
from __future__ import annotations

import pytest

from edgewave.agent.engine import Engine, Query, TriplePattern, WindowSpec


def ex(local: str) -> str:
    return f"<http://ex.org/{local}>"


STREAM = "<http://ex.org/s>"


def offer_query(name: str, width: int, var: str = "?o", extra: TriplePattern | None = None) -> Query:
    w = WindowSpec("<w>", STREAM, width)
    patterns = [
        TriplePattern(var, ex("type"), ex("Offer"), "<w>"),
        TriplePattern(var, ex("price"), "?p", "<w>"),
        TriplePattern(var, ex("vendor"), "?v", "<w>"),
    ]
    if extra is not None:
        patterns.append(extra)
    return Query(name, (), {"<w>": w}, tuple(patterns))


def push_offer(engine: Engine, n: int, ts_type: int, ts_price: int, ts_vendor: int) -> None:
    engine.push((ex(f"o{n}"), ex("type"), ex("Offer")), ts_type)
    engine.push((ex(f"o{n}"), ex("price"), '"1"'), ts_price)
    engine.push((ex(f"o{n}"), ex("vendor"), ex("v")), ts_vendor)


def test_patterns_with_a_common_prefix_share_join_nodes_even_with_different_windows():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("narrow", 100))
    engine.add_query(offer_query("wide", 1000, var="?x"))  # same patterns up to renaming
    assert engine.stats()["join_nodes"] == 3  # fully shared
    assert engine.stats()["alpha_memories"] == 3
    push_offer(engine, 1, 0, 10, 50)  # spans 50 ms: both
    push_offer(engine, 2, 1000, 1200, 1500)  # spans 500 ms: only the wide one
    assert sorted((m.pattern, m.bindings.get("o") or m.bindings.get("x")) for m in out) == [
        ("narrow", ex("o1")), ("wide", ex("o1")), ("wide", ex("o2")),
    ]


def test_a_shared_node_keeps_tokens_for_the_widest_window_and_children_check_their_own():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("narrow", 100, extra=TriplePattern("?o", ex("date"), "?d", "<w>")))
    engine.add_query(offer_query("wide", 1000, extra=TriplePattern("?o", ex("webpage"), "?u", "<w>")))
    assert engine.stats()["join_nodes"] == 5  # 3 shared + 1 each
    push_offer(engine, 1, 0, 10, 20)
    engine.push((ex("o1"), ex("date"), '"d"'), 500)  # 500 ms after the start: too late for narrow
    engine.push((ex("o1"), ex("webpage"), ex("page")), 600)
    assert [m.pattern for m in out] == ["wide"]
    push_offer(engine, 2, 1000, 1010, 1020)
    engine.push((ex("o2"), ex("date"), '"d"'), 1090)  # within narrow's 100 ms
    assert [m.pattern for m in out] == ["wide", "narrow"]


def test_adding_a_pattern_at_run_time_keeps_the_others_partial_matches():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("first", 1000))
    engine.push((ex("o1"), ex("type"), ex("Offer")), 0)
    engine.push((ex("o1"), ex("price"), '"1"'), 10)
    engine.add_query(Query("other", (), {"<w>": WindowSpec("<w>", STREAM, 1000)}, (
        TriplePattern("?s", ex("temp"), "?t", "<w>"),
    )))
    engine.push((ex("o1"), ex("vendor"), ex("v")), 20)  # completes first's partial match
    engine.push((ex("r"), ex("temp"), '"3"'), 30)
    assert sorted(m.pattern for m in out) == ["first", "other"]


def test_a_new_pattern_sharing_a_prefix_reuses_its_partial_matches():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("first", 1000))
    engine.push((ex("o1"), ex("type"), ex("Offer")), 0)
    engine.push((ex("o1"), ex("price"), '"1"'), 10)
    engine.add_query(offer_query("second", 1000, extra=TriplePattern("?o", ex("date"), "?d", "<w>")))
    engine.push((ex("o1"), ex("vendor"), ex("v")), 20)
    engine.push((ex("o1"), ex("date"), '"d"'), 30)
    assert sorted(m.pattern for m in out) == ["first", "second"]


def test_removing_a_pattern_does_not_disturb_the_shared_nodes_of_the_others():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("keep", 1000))
    engine.add_query(offer_query("drop", 1000, extra=TriplePattern("?o", ex("date"), "?d", "<w>")))
    engine.push((ex("o1"), ex("type"), ex("Offer")), 0)
    engine.push((ex("o1"), ex("price"), '"1"'), 10)
    engine.remove_query("drop")
    assert engine.queries() == ["keep"]
    assert engine.stats()["join_nodes"] == 3
    engine.push((ex("o1"), ex("vendor"), ex("v")), 20)
    engine.push((ex("o1"), ex("date"), '"d"'), 30)
    assert [m.pattern for m in out] == ["keep"]
    with pytest.raises(KeyError):
        engine.remove_query("drop")


def test_registering_the_same_name_twice_is_an_error():
    engine = Engine()
    engine.add_query(offer_query("q", 100))
    with pytest.raises(ValueError, match="already registered"):
        engine.add_query(offer_query("q", 200))


def test_add_query_accepts_rsp_ql_text():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <t> AS SELECT ?s
        FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT1S STEP PT1S]
        WHERE { WINDOW <w> { ?s ex:temp ?t } }
    """)
    engine.push((ex("a"), ex("temp"), '"1"'), 5, "<http://ex.org/s>")
    engine.push((ex("b"), ex("temp"), '"1"'), 6, "<http://ex.org/other>")  # another stream
    assert [m.bindings for m in out] == [{"s": ex("a")}]
    assert out[0].pattern == "t"


def test_quoted_triple_patterns_bind_inner_variables():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <conf> AS SELECT ?s ?v ?c
        FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT1S STEP PT1S]
        WHERE { WINDOW <w> { << ?s ex:temp ?v >> ex:confidence ?c . ?s ex:room ?r } }
    """)
    engine.push((f"<< {ex('a')} {ex('temp')} \"21\" >>", ex("confidence"), '"0.9"'), 5)
    engine.push((f"<< {ex('a')} {ex('hum')} \"40\" >>", ex("confidence"), '"0.8"'), 6)
    engine.push((ex("a"), ex("room"), ex("r1")), 7)
    assert [m.bindings for m in out] == [{"s": ex("a"), "v": '"21"', "c": '"0.9"'}]


def test_a_window_over_several_streams_reads_each_of_them():
    out: list = []
    w = WindowSpec("<w>", "<http://ex.org/a>", 1000, None, ("<http://ex.org/b>",))
    engine = Engine(on_match=out.append)
    engine.add_query(Query("both", (), {"<w>": w}, (
        TriplePattern("?x", ex("p"), "?y", "<w>"),
        TriplePattern("?y", ex("q"), "?z", "<w>"),
    )))
    engine.push((ex("1"), ex("p"), ex("2")), 10, "<http://ex.org/a>")
    engine.push((ex("2"), ex("q"), ex("3")), 20, "<http://ex.org/b>")
    engine.push((ex("2"), ex("q"), ex("4")), 30, "<http://ex.org/c>")  # not read
    assert [m.bindings["z"] for m in out] == [ex("3")]


def test_a_new_memory_is_filled_from_an_equal_one_keyed_differently():
    out: list = []
    w = WindowSpec("<w>", STREAM, 1000)
    engine = Engine(on_match=out.append)
    engine.add_query(Query("by_offer", (), {"<w>": w}, (
        TriplePattern("?o", ex("vendor"), "?v", "<w>"),
        TriplePattern("?o", ex("price"), "?p", "<w>"),
    )))
    engine.push((ex("o1"), ex("price"), '"5"'), 10)
    # A later pattern reads the same triples joined on the price: its memory is new.
    engine.add_query(Query("by_price", (), {"<w>": w}, (
        TriplePattern("?limit", ex("is"), ex("cheap"), "<w>"),
        TriplePattern("?o", ex("price"), "?limit", "<w>"),
    )))
    engine.push(('"5"', ex("is"), ex("cheap")), 20)
    assert [(m.pattern, m.bindings["o"]) for m in out] == [("by_price", ex("o1"))]


def test_a_star_keeps_no_tokens_and_still_makes_every_match_once():
    """Patterns joined on one variable from the first one (a star) recompute their partial
    matches from the alpha memories; a memory used at two levels must not double them."""
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <q> AS SELECT ?a ?b ?c
        FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT1S STEP PT1S]
        WHERE { WINDOW <w> { ?o ex:p ?a . ?o ex:p ?b . ?o ex:q ?c } }
    """)
    engine.push((ex("o"), ex("p"), '"1"'), 1)
    engine.push((ex("o"), ex("q"), '"x"'), 2)
    engine.push((ex("o"), ex("p"), '"2"'), 3)
    engine.push((ex("o"), ex("p"), '"3"'), 1500)  # more than 1 s after "1" and "x"
    assert engine.stats()["tokens"] == 0
    assert sorted((m.bindings["a"], m.bindings["b"], m.start, m.end) for m in out) == [
        ('"1"', '"1"', 1, 2), ('"1"', '"2"', 1, 3), ('"2"', '"1"', 1, 3), ('"2"', '"2"', 2, 3),
    ]
    assert [t for t, _ in out[0].triples] == [(ex("o"), ex("p"), '"1"'), (ex("o"), ex("p"), '"1"'),
                                             (ex("o"), ex("q"), '"x"')]


def test_a_star_below_a_stored_join_and_a_join_below_a_star_agree_with_the_plain_chain():
    """The star's last level hands complete tokens to an ordinary (storing) join node."""
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(offer_query("q", 1000, extra=TriplePattern("?v", ex("country"), "?c", "<w>")))
    engine.push((ex("v"), ex("country"), ex("DE")), 0)  # before the offers: joined from the left
    push_offer(engine, 1, 10, 20, 30)
    push_offer(engine, 2, 40, 50, 60)
    engine.push((ex("v"), ex("country"), ex("FR")), 70)  # after: joined from the right, both offers
    engine.push((ex("w"), ex("country"), ex("IT")), 80)  # another vendor: nothing
    assert [(m.bindings["o"], m.bindings["c"]) for m in out] == [
        (ex("o1"), ex("DE")), (ex("o2"), ex("DE")), (ex("o1"), ex("FR")), (ex("o2"), ex("FR")),
    ]
    assert engine.stats()["tokens"] == 2  # the two complete offers, stored by the country join
