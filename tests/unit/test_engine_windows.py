"""Windows per token (3.5), expiry and garbage collection (3.7), on stream time."""
from __future__ import annotations

from edgewave.agent.engine import Engine, Query, TriplePattern, WindowSpec, parse_query


def ex(local: str) -> str:
    return f"<http://ex.org/{local}>"


def chain(width: int, name: str = "q", stream: str = "<http://ex.org/s>") -> Query:
    """?x :a ?y . ?y :b ?z . ?z :c ?v, all in one window."""
    w = WindowSpec("<w>", stream, width)
    return Query(name, (), {"<w>": w}, (
        TriplePattern("?x", ex("a"), "?y", "<w>"),
        TriplePattern("?y", ex("b"), "?z", "<w>"),
        TriplePattern("?z", ex("c"), "?v", "<w>"),
    ))


def test_interval_is_earliest_to_latest_whatever_the_arrival_order():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(chain(100))
    engine.push((ex("z1"), ex("c"), ex("v1")), 10)
    engine.push((ex("x1"), ex("a"), ex("y1")), 30)
    engine.push((ex("y1"), ex("b"), ex("z1")), 70)
    assert [(m.start, m.end) for m in out] == [(10, 70)]
    assert sorted(ts for _, ts in out[0].triples) == [10, 30, 70]


def test_join_wider_than_the_window_is_not_made():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(chain(50))
    engine.push((ex("x1"), ex("a"), ex("y1")), 0)
    engine.push((ex("y1"), ex("b"), ex("z1")), 51)  # 51 ms after: no token
    engine.push((ex("z1"), ex("c"), ex("v1")), 52)
    assert out == []
    assert engine.stats()["tokens"] <= 1  # only the (y1 b z1) level-2 partial cannot exist
    # The same shape within 50 ms matches, at exactly the width too.
    engine.push((ex("x2"), ex("a"), ex("y2")), 100)
    engine.push((ex("y2"), ex("b"), ex("z2")), 120)
    engine.push((ex("z2"), ex("c"), ex("v2")), 150)
    assert [(m.bindings["x"], m.start, m.end) for m in out] == [(ex("x2"), 100, 150)]


def test_expiry_drops_triples_and_tokens_on_stream_time_only():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(chain(1000))
    engine.push((ex("x1"), ex("a"), ex("y1")), 0)
    engine.push((ex("y1"), ex("b"), ex("z1")), 10)
    assert engine.stats()["alpha_items"] == 2 and engine.stats()["tokens"] >= 1
    engine.advance(5000)  # no wall clock: only this moves time
    assert engine.stats()["alpha_items"] == 0
    assert engine.stats()["tokens"] == 0
    engine.push((ex("z1"), ex("c"), ex("v1")), 5001)
    assert out == []


def test_a_late_triple_still_joins_within_its_window():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(chain(100))
    engine.push((ex("x1"), ex("a"), ex("y1")), 500)
    engine.push((ex("y1"), ex("b"), ex("z1")), 520)
    engine.push((ex("z1"), ex("c"), ex("v1")), 450)  # older than the clock, inside the window
    assert [(m.start, m.end) for m in out] == [(450, 520)]
    # A match must still be inside the window at the current time: 400 + 100 < 520.
    engine.push((ex("x2"), ex("a"), ex("y2")), 520)
    engine.push((ex("y2"), ex("b"), ex("z2")), 520)
    engine.push((ex("z2"), ex("c"), ex("v2")), 400)
    assert len(out) == 1


def test_unrestricted_consumption_every_combination_once():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(chain(1000))
    engine.push((ex("x1"), ex("a"), ex("y1")), 1)
    engine.push((ex("x2"), ex("a"), ex("y1")), 2)
    engine.push((ex("y1"), ex("b"), ex("z1")), 3)
    engine.push((ex("z1"), ex("c"), ex("v1")), 4)
    engine.push((ex("z1"), ex("c"), ex("v2")), 5)
    combos = sorted((m.bindings["x"], m.bindings["v"]) for m in out)
    assert combos == [(ex("x1"), ex("v1")), (ex("x1"), ex("v2")), (ex("x2"), ex("v1")), (ex("x2"), ex("v2"))]


def test_repeated_variable_inside_one_pattern():
    out: list = []
    w = WindowSpec("<w>", "<http://ex.org/s>", 100)
    engine = Engine(on_match=out.append)
    engine.add_query(Query("self", (), {"<w>": w}, (TriplePattern("?x", "?p", "?x", "<w>"),)))
    engine.push((ex("a"), ex("knows"), ex("b")), 1)
    engine.push((ex("a"), ex("knows"), ex("a")), 2)
    assert [m.bindings for m in out] == [{"x": ex("a"), "p": ex("knows")}]


def test_self_join_through_one_memory_does_not_duplicate():
    out: list = []
    w = WindowSpec("<w>", "<http://ex.org/s>", 100)
    engine = Engine(on_match=out.append)
    engine.add_query(Query("path", (), {"<w>": w}, (
        TriplePattern("?x", ex("p"), "?y", "<w>"),
        TriplePattern("?y", ex("p"), "?z", "<w>"),
    )))
    engine.push((ex("a"), ex("p"), ex("a")), 1)  # joins with itself: exactly one match
    assert [m.bindings for m in out] == [{"x": ex("a"), "y": ex("a"), "z": ex("a")}]
    engine.push((ex("a"), ex("p"), ex("b")), 2)
    assert len(out) == 2  # (a p a)(a p b)


def test_filters_apply_as_soon_as_bound():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(parse_query("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <hot> AS SELECT ?room ?t
        FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT10S STEP PT1S]
        WHERE { WINDOW <w> { ?obs ex:room ?room . ?obs ex:temp ?t . FILTER(?t > 30) } }
    """))
    engine.push((ex("o1"), ex("room"), ex("r1")), 1)
    engine.push((ex("o1"), ex("temp"), '"25"^^<http://www.w3.org/2001/XMLSchema#integer>'), 2)
    engine.push((ex("o2"), ex("room"), ex("r2")), 3)
    engine.push((ex("o2"), ex("temp"), '"31"^^<http://www.w3.org/2001/XMLSchema#integer>'), 4)
    assert [m.bindings["room"] for m in out] == [ex("r2")]


def test_several_windows_each_triple_checked_against_its_own_window():
    out: list = []
    short = WindowSpec("<short>", "<http://ex.org/fast>", 100)
    long = WindowSpec("<long>", "<http://ex.org/slow>", 10_000)
    engine = Engine(on_match=out.append)
    engine.add_query(Query("two", (), {"<short>": short, "<long>": long}, (
        TriplePattern("?d", ex("alarm"), "?v", "<short>"),
        TriplePattern("?d", ex("located"), "?room", "<long>"),
    )))
    engine.push((ex("d1"), ex("located"), ex("r1")), 0, "<http://ex.org/slow>")
    engine.push((ex("d1"), ex("alarm"), '"1"'), 5000, "<http://ex.org/fast>")
    assert [(m.bindings["room"], m.start, m.end) for m in out] == [(ex("r1"), 0, 5000)]
    # A triple on the wrong stream does not count, and the short window binds its own triples.
    engine.push((ex("d2"), ex("located"), ex("r2")), 5001, "<http://ex.org/fast>")
    engine.push((ex("d2"), ex("alarm"), '"1"'), 5002, "<http://ex.org/fast>")
    assert len(out) == 1
    engine.push((ex("d3"), ex("alarm"), '"1"'), 6000, "<http://ex.org/fast>")
    engine.push((ex("d3"), ex("located"), ex("r3")), 6200, "<http://ex.org/slow>")  # alarm now 200 ms old
    assert len(out) == 1
    engine.push((ex("d3"), ex("alarm"), '"2"'), 6250, "<http://ex.org/fast>")
    assert [(m.bindings["room"], m.bindings["v"]) for m in out[1:]] == [(ex("r3"), '"2"')]


def test_garbage_collection_keeps_memory_flat_on_an_endless_stream():
    engine = Engine()
    engine.add_query(chain(500))
    seen = []

    def run(until: int, start: int) -> None:
        for i in range(start, until):
            ts = i * 2  # one triple every 2 ms: 250 per window
            k = i // 3
            if i % 3 == 0:
                engine.push((ex(f"x{k}"), ex("a"), ex(f"y{k}")), ts)
            elif i % 3 == 1:
                engine.push((ex(f"y{k}"), ex("b"), ex(f"z{k}")), ts)
            else:
                engine.push((ex(f"z{k}"), ex("c"), ex(f"v{k}")), ts)

    run(3_000, 0)
    first = engine.stats()
    run(30_000, 3_000)
    later = engine.stats()
    assert later["matches"] == 10_000
    for counter in ("alpha_items", "tokens"):
        seen.append((counter, first[counter], later[counter]))
        assert abs(later[counter] - first[counter]) <= 0.15 * first[counter] + 5, seen
    assert later["expired_items"] > 20_000


def test_memory_lags_a_wide_window_by_at_most_the_gc_step_cap():
    """Collection runs every eighth of the narrowest window but at least every
    GC_STEP_MAX_MS of stream time: each pause is small (the agent's network thread waits
    through it), and nothing outlives its window by more than that."""
    from edgewave.agent.engine.engine import GC_STEP_MAX_MS

    engine = Engine()
    engine.add_query(chain(10_000))                       # an eighth would be 1,250 ms
    engine.push((ex("x0"), ex("a"), ex("y0")), 0)
    engine.push((ex("x1"), ex("a"), ex("y1")), 9_990)     # a collection runs here
    engine.push((ex("x2"), ex("a"), ex("y2")), 10_000 + GC_STEP_MAX_MS - 20)
    assert engine.stats()["alpha_items"] == 3             # x0 expired, not yet collected
    engine.push((ex("x3"), ex("a"), ex("y3")), 9_990 + GC_STEP_MAX_MS)
    assert engine.stats()["alpha_items"] == 3             # x0 collected: x1, x2, x3
    assert engine.counters()["expired_items"] == 1


def test_counters_are_the_running_totals_of_stats():
    engine = Engine()
    engine.add_query(chain(50))
    for ts, triple in enumerate([(ex("x"), ex("a"), ex("y")), (ex("y"), ex("b"), ex("z")),
                                 (ex("z"), ex("c"), ex("v"))]):
        engine.push(triple, ts)
    engine.advance(1_000)
    stats = engine.stats()
    assert engine.counters() == {k: stats[k] for k in engine.counters()}
    assert engine.counters()["matches"] == 1 and engine.counters()["expired_items"] == 3


def test_push_returns_the_matches_it_completed_as_on_match_sees_them():
    seen: list = []
    engine = Engine(on_match=seen.append)
    engine.add_query(chain(100))
    assert engine.push((ex("x1"), ex("a"), ex("y1")), 0) == []
    assert engine.push((ex("y1"), ex("b"), ex("z1")), 10) == []
    done = engine.push((ex("z1"), ex("c"), ex("v1")), 20)
    assert [m.bindings["v"] for m in done] == [ex("v1")] and done == seen
    quiet = Engine()  # no callback: the return value alone carries the matches
    quiet.add_query(chain(100))
    got = quiet.push_many([(0, (ex("x2"), ex("a"), ex("y2"))), (5, (ex("y2"), ex("b"), ex("z2"))),
                           (6, (ex("z2"), ex("c"), ex("v2"))), (7, (ex("z2"), ex("c"), ex("v3")))])
    assert sorted(m.bindings["v"] for m in got) == [ex("v2"), ex("v3")]
