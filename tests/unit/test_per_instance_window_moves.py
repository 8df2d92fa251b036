"""``WindowContent.move_to`` against a plain model of a window: after each move the content
is the set of triples (a bundle's source with what it entails) added before the move with a
time in the instance, and the changes are what left and what entered, each once. For a
stream in time order the changes come in the order the triples arrived, those that left
first (the order the network's rows follow). Random adds in order, late, witnesses, bundles
of overlapping triples, moves by one step or several, tumbling and sliding windows."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.per_instance.windows import WindowContent


def _expanded(item) -> list:
    return list(item[1]) if item.__class__ is list else [item]  # a bundle: [source, its triples]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from([(3000, 1000), (3000, 3000), (2000, 500), (1000, 2000)]),
       st.booleans(), st.integers(1, 120))
def test_moves_give_the_instances_content(seed: int, shape: tuple, in_order: bool, n: int) -> None:
    rng = random.Random(seed)
    width, step = shape
    window = WindowContent(width, step)
    added: list = []  # (ts, item), every add so far
    ts, end = 1_000, None
    held: set = set()
    for _ in range(n):
        ts += rng.choice([0, 0, 1, 200, 700, 1500])
        at = ts if in_order else ts - rng.choice([0, 0, 0, 300, 2500])
        kind = rng.random()
        if kind < 0.15:
            window.witness(at)
            continue
        t = ("s%d" % rng.randint(1, 5), "p", "o%d" % rng.randint(1, 3))
        item = [t, (t, ("s", "q", t[0]), ("x", "q", "y"))] if kind < 0.35 else t
        window.add(at, item)
        added.append((at, item))
        if rng.random() < 0.3:
            first = end + step if end is not None else (max(0, (ts - width) // step + 1) * step + width)
            end = first + step * rng.choice([0, 0, 0, 1, 3])
            if end > ts + step:
                end = first
            changes = window.move_to(end)
            start = end - width
            now = {t for at_, item in added if start <= at_ < end for t in _expanded(item)}
            assert set(window.copies) == now
            left = [t for t, sign in changes if sign < 0]
            entered = [t for t, sign in changes if sign > 0]
            assert [sign for _, sign in changes] == sorted(sign for _, sign in changes)  # leaving first
            # a triple whose last copy expires while a late copy enters leaves and enters again
            assert len(set(left)) == len(left) and set(left) <= held
            assert len(set(entered)) == len(entered) and not set(entered) & (held - set(left))
            assert (held - set(left)) | set(entered) == now
            if in_order:
                order = {}
                for _, item in added:
                    for t in _expanded(item):
                        order.setdefault(t, len(order))
                firsts = {}
                for i, (at_, item) in enumerate(added):
                    for t in _expanded(item):
                        if start <= at_ < end:
                            firsts.setdefault(t, i)
                assert entered == sorted(entered, key=lambda t: firsts[t])
            held = now
