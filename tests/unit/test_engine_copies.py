"""The engine's hand-copied blocks agree with the code they copy.

A few per-triple loops write a function out instead of calling it (each says which, and
docs/engine.md lists them). Each test here feeds the same input through the copy and
through the original and compares what comes out: memories, tokens, matches.
"""
from __future__ import annotations

import random

import pytest

from edgewave.agent.engine import Engine
from edgewave.agent.engine.alpha import AlphaShape
from edgewave.agent.engine.beta import JoinNode, _one_entry_star, extend
from edgewave.agent.engine.epsilon import SAME
from edgewave.agent.engine.memories import AlphaMemory, BetaMemory, Memory, values_reader
from edgewave.agent.engine.query import TriplePattern
from edgewave.agent.engine.tokens import END, ENTRY, NO_END, NO_START, PARENT, ROW, START, TOP, TOPS, widen
from edgewave.shared.vocab import (
    OWL_INVERSEOF, OWL_SYMMETRIC, RDF_TYPE, RDFS_RANGE, RDFS_SUBCLASSOF, RDFS_SUBPROPERTYOF, XSD_INTEGER,
)

EX = "http://ex.org/"


def ex(local: str) -> str:
    return f"<{EX}{local}>"


SCHEMA = [
    (ex("Special"), RDFS_SUBCLASSOF, ex("Offer")),
    (ex("cost"), RDFS_SUBPROPERTYOF, ex("price")),
    (ex("vendor"), RDFS_RANGE, ex("Shop")),
    (ex("sells"), OWL_INVERSEOF, ex("vendor")),
    (ex("knows"), RDF_TYPE, OWL_SYMMETRIC),
]

HEAD = f"PREFIX : <{EX}>\nREGISTER RSTREAM <{{name}}> AS SELECT *\n"
QUERIES = [
    # A star on ?o, then a join on ?v (entailed types and properties on the way).
    HEAD.format(name="star") + """FROM NAMED WINDOW <w> ON :s [RANGE PT1S STEP PT1S]
WHERE { WINDOW <w> { ?o a :Offer . ?o :price ?p . ?o :vendor ?v . ?v a :Shop } }""",
    # The same first levels with a FILTER and a narrower window: shares the star's nodes.
    HEAD.format(name="cheap") + """FROM NAMED WINDOW <w> ON :s [RANGE PT0.5S STEP PT1S]
WHERE { WINDOW <w> { ?o a :Offer . ?o :price ?p . FILTER(?p < 4) } }""",
    # Two windows: a layered chain.
    HEAD.format(name="layered") + """FROM NAMED WINDOW <a> ON :s [RANGE PT0.3S STEP PT1S]
FROM NAMED WINDOW <b> ON :s [RANGE PT1S STEP PT1S]
WHERE { WINDOW <a> { ?x :knows ?y } WINDOW <b> { ?y :price ?p } }""",
    # A quoted-triple pattern and a repeated variable.
    HEAD.format(name="quoted") + """FROM NAMED WINDOW <w> ON :s [RANGE PT1S STEP PT1S]
WHERE { WINDOW <w> { << ?o :price ?p >> :confidence ?c . ?o :knows ?o } }""",
]


def stream(seed: int, n: int = 600) -> list[tuple[int, tuple[str, str, str]]]:
    rng = random.Random(seed)
    offers = [ex(f"o{i}") for i in range(6)]
    shops = [ex(f"v{i}") for i in range(3)]
    ts = 0
    items = []
    for _ in range(n):
        ts += rng.choice((0, 0, 5, 40, 150))
        o = rng.choice(offers)
        number = f'"{rng.randint(1, 6)}"^^{XSD_INTEGER}'
        triple = rng.choice([
            (o, RDF_TYPE, rng.choice((ex("Offer"), ex("Special")))),
            (o, ex("price"), number),
            (o, ex("cost"), number),
            (o, ex("vendor"), rng.choice(shops)),
            (rng.choice(shops), ex("sells"), o),
            (o, ex("knows"), rng.choice(offers)),
            (f"<< {o} {ex('price')} {number} >>", ex("confidence"), number),
        ])
        items.append((ts, triple))
    return items


def engine_with_queries() -> tuple[Engine, list]:
    out: list = []
    engine = Engine(schema=SCHEMA, on_match=out.append)
    for text in QUERIES:
        engine.add_query(text)
    return engine, out


def push_by_add(engine: Engine, ts: int, triple: tuple[str, str, str]) -> None:
    """What push_many does, by the originals it copies: Engine._routes and AlphaMemory.add."""
    engine.advance(ts)
    for memory, derived, form in engine._routes(engine._all, triple):
        memory.add(derived, ts, None if form == SAME else triple)


def seen(matches: list) -> list:
    return [(m.pattern, m.bindings, m.start, m.end, m.triples, m.entailed) for m in matches]


def memories(engine: Engine) -> dict:
    network = engine.network
    out = {}
    for ident, alpha in network.alphas.items():
        out[("alpha", ident)] = (alpha.index, list(alpha.expiry))
    for ident, node in network.nodes.items():
        if node.memory is not None:
            out[("beta", ident)] = (node.memory.index, list(node.memory.expiry))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_push_many_stores_and_activates_as_alpha_memory_add_does(seed):
    items = stream(seed)
    fast, fast_out = engine_with_queries()
    slow, slow_out = engine_with_queries()
    returned = []
    for i in range(0, len(items), 37):  # batches of several triples, as a recorded stream
        returned += fast.push_many(items[i:i + 37])
    for ts, triple in items:
        push_by_add(slow, ts, triple)
    assert fast_out, "the stream must make matches for the comparison to mean something"
    assert {m.pattern for m in fast_out} == {"star", "cheap", "layered", "quoted"}
    assert seen(fast_out) == seen(slow_out)
    assert seen(returned) == seen(fast_out)
    last = items[-1][0]
    fast.advance(last)
    slow.advance(last)  # the same clock and collection on both sides before comparing
    assert memories(fast) == memories(slow)


@pytest.mark.parametrize("seed", [4, 5])
def test_the_star_gates_only_skip_activations_that_would_make_nothing(seed):
    items = stream(seed)
    gated, gated_out = engine_with_queries()
    open_, open_out = engine_with_queries()
    for alpha in open_.network.alphas.values():
        alpha.activations = [(None, right_activation) for _, right_activation in alpha.activations]
    assert any(gate is not None for a in gated.network.alphas.values() for gate, _ in a.activations)
    gated.push_many(items)
    open_.push_many(items)
    assert gated_out and seen(gated_out) == seen(open_out)


class _Capture(JoinNode):
    __slots__ = ("out",)

    def emit(self, token):
        self.out.append(token)


def _node(new_positions: tuple[int, ...], filters: list, width: int) -> _Capture:
    alpha = AlphaMemory(("s",), AlphaShape(TriplePattern("?x", ex("p"), "?y", None)), (0,))
    node = _Capture((), None, alpha, 0, (), new_positions, filters, True)
    node.out = []
    node.width = width
    return node


def _parent(rng: random.Random) -> tuple:
    row = tuple(rng.choice("abc") for _ in range(2))
    if rng.random() < 0.2:
        return (row, TOP, None, NO_START, NO_END)
    start = rng.randint(0, 100)
    return (row, TOP, None, start, start + rng.randint(0, 60))


def _entry(rng: random.Random) -> tuple:
    triple = (rng.choice("abc"), "p", rng.choice("abc"))
    return (triple, -1 if rng.random() < 0.2 else rng.randint(0, 160), triple)


@pytest.mark.parametrize("new_positions", [(2,), (0, 2), ()])
def test_emit_joined_makes_the_tokens_extend_makes(new_positions):
    rng = random.Random(7)
    for _ in range(300):
        filters = [] if rng.random() < 0.5 else [lambda row: row[-1] != "b"]
        node = _node(new_positions, filters, rng.choice((0, 30, 100)))
        parents = [_parent(rng) for _ in range(rng.randint(0, 4))]
        entry = _entry(rng)
        node.emit_joined(parents, entry)
        expected = extend(parents, (entry,), node.new_at, node.new_values, node.filters, node.width, None)
        assert node.out == expected
        # and the interval of each is tokens.widen()'s
        for token in expected:
            assert (token[START], token[END]) == widen(token[PARENT][START], token[PARENT][END], entry[1])


def test_extend_keeps_to_widen_and_the_width():
    rng = random.Random(8)
    for _ in range(300):
        parents = [_parent(rng) for _ in range(3)]
        entries = [_entry(rng) for _ in range(3)]
        width = rng.choice((0, 30, 100))
        made = extend(parents, entries, 0, values_reader((0,)), (), width, None)
        expected = []
        for parent in parents:
            for entry in entries:
                start, end = widen(parent[START], parent[END], entry[1])
                if end - start <= width:
                    expected.append((parent[ROW] + (entry[2][0],), parent, entry, start, end))
        assert made == expected


def _chain(token: tuple) -> list[tuple]:
    out = []
    while token is not TOP:
        out.append((token[ENTRY], token[START], token[END]))
        token = token[PARENT]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_one_entry_star_makes_the_token_the_extend_chain_makes(seed):
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(1, 5)
        reads = []
        checks = []
        for _ in range(n):
            positions = rng.choice([(2,), (0, 2), ()])
            # A FILTER reads the slots bound so far (here the first), never the whole row.
            filters = () if rng.random() < 0.7 else (lambda row: not row or row[0] != "b",)
            reads.append((positions[0] if len(positions) == 1 else None, values_reader(positions)))
            checks.append((filters, rng.choice((0, 50, 200))))
        buckets = [[_entry(rng)] for _ in range(n)]
        exclude = rng.choice([None, None, rng.choice(buckets)[0]])
        fast = _one_entry_star(reads, checks, buckets, exclude)
        slow = TOPS
        for (new_at, new_values), (filters, width), bucket in zip(reads, checks, buckets):
            slow = extend(slow, bucket, new_at, new_values, filters, width, exclude)
        assert len(fast) == len(slow) <= 1
        if fast:
            # The same entries and intervals level by level; every level shares the last row.
            assert _chain(fast[0]) == _chain(slow[0])
            assert fast[0][ROW] == slow[0][ROW]


@pytest.mark.parametrize("positions", [(1,), (0, 2), ()])
def test_drop_before_reads_a_one_variable_key_as_the_reader_does(positions):
    rng = random.Random(9)
    fast = Memory(positions)
    slow = Memory(positions)
    slow.key_at = None  # always through the reader
    for i in range(200):
        triple = (rng.choice("abc"), rng.choice("pq"), rng.choice("xyz"))
        entry = (triple, i if rng.random() < 0.9 else -1, triple)
        fast.store(entry, fast.read_key(triple))
        slow.store(entry, slow.read_key(triple))
    assert fast.drop_before(120) == slow.drop_before(120) > 0
    assert fast.index == slow.index and list(fast.expiry) == list(slow.expiry)


def test_emit_stores_tokens_as_beta_memory_store_does():
    rng = random.Random(10)
    parent = _node((0, 2), [], 100)
    alpha = AlphaMemory(("s",), AlphaShape(TriplePattern("?y", ex("q"), "?z", None)), (0,))
    child = JoinNode((1,), parent, alpha, 1, (1,), (2,), [], True)
    parent.children.append(child)
    parent.refresh()
    reference = BetaMemory((1,))
    for _ in range(200):
        token = _parent(rng)
        JoinNode.emit(parent, token)  # the original emit, not the capturing one
        reference.store(token, reference.read_key(token[ROW]))
    assert child.memory.index == reference.index
    assert list(child.memory.expiry) == list(reference.expiry)
    assert 0 < len(reference.expiry) < 200  # static-only tokens (end -1) stay out of expiry
