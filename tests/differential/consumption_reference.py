"""An independent reference for the consumption strategies (docs/engine.md, "Consumption
strategies"), by brute force over the stream, sharing no code with the engine.

For each arrival k (at ts_k) the reference takes the window's content (the triples that
arrived up to k with ts >= ts_k - width), and

* ``unrestricted``: every combination of its triples, one per pattern, that binds the
  variables consistently and contains triple k;
* ``recent``: the same, but each pattern may only use a triple that no later triple of the
  snapshot matching that pattern with the same values for its shared variables (those that
  occur in another pattern) has replaced;
* ``chronological``: of the unrestricted combinations that use no consumed triple, the one
  whose timestamps, read pattern by pattern in the written order, are smallest; its triples
  are consumed.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import product
from typing import Sequence

from .temporal_reference import EX, Item, term, triple


@dataclass(frozen=True)
class ConsumptionSpec:
    """A conjunction of ``?s :predicate ?variable`` patterns (variables may repeat)."""

    patterns: tuple[tuple[str, str], ...]
    strategy: str
    width: int

    def text(self) -> str:
        body = " . ".join(f"?s :{p} ?{v}" for p, v in self.patterns)
        return (f"PREFIX : <{EX}>\nREGISTER RSTREAM <q> AS SELECT *\n"
                f"FROM NAMED WINDOW <w> ON :s [RANGE PT{self.width / 1000:g}S STEP PT1S]\n"
                f"WHERE {{ WINDOW <w> {{ {body} }} }} CONSUME {self.strategy.upper()}\n")


def _shared(spec: ConsumptionSpec, i: int) -> list[str]:
    others = {v for j, (_, v) in enumerate(spec.patterns) if j != i}
    return ["s"] * (len(spec.patterns) > 1) + [spec.patterns[i][1]] * (spec.patterns[i][1] in others)


def _values(item: Item, names: list[str], variable: str) -> tuple:
    return tuple(item[1] if name == "s" else item[3] for name in names if name in ("s", variable))


def consumption_matches(spec: ConsumptionSpec, stream: Sequence[Item]) -> Counter:
    found: Counter = Counter()
    consumed: set[int] = set()
    for k, (now, *_) in enumerate(stream):
        snapshot = [i for i in range(k + 1) if stream[i][0] >= now - spec.width]
        candidates = []
        for i, (predicate, variable) in enumerate(spec.patterns):
            mine = [x for x in snapshot if stream[x][2] == predicate]
            if spec.strategy == "recent":
                names = _shared(spec, i)
                mine = [x for x in mine if not any(y > x and _values(stream[y], names, variable)
                                                   == _values(stream[x], names, variable) for y in mine)]
            candidates.append(mine)
        combos = []
        for chosen in product(*candidates):
            if k not in chosen:
                continue
            bound: dict[str, object] = {}
            if all(bound.setdefault("s", stream[x][1]) == stream[x][1]
                   and bound.setdefault(v, stream[x][3]) == stream[x][3]
                   for x, (_, v) in zip(chosen, spec.patterns)):
                combos.append((chosen, bound))
        if spec.strategy == "chronological":
            combos = [(c, b) for c, b in combos if not consumed.intersection(c)]
            if not combos:
                continue
            combos = [min(combos, key=lambda cb: tuple(stream[x][0] for x in cb[0]))]
            consumed.update(combos[0][0])
        for chosen, bound in combos:
            bindings = tuple(sorted((v, term(value)) for v, value in bound.items()))
            found[(bindings, tuple(sorted((triple(stream[x]), stream[x][0]) for x in chosen)))] += 1
    return found
