"""An independent reference for EP-SPARQL's temporal operators: brute force over the stream,
sharing no code with the engine.

What the engine promises (docs/engine.md, "Temporal operators"): a match is emitted when its
last triple arrives, and it is what EP-SPARQL's algebra gives on the window's content at that
moment. So, for each arrival k (at ts_k), the reference

1. takes the snapshot: the triples that arrived up to k (k included) with ts >= ts_k - width;
2. finds every solution of each group of triple patterns in it, by trying every combination
   of triples, one per pattern; a solution's interval is [min ts, max ts] of its triples;
3. applies the operators left to right as the paper defines them: SeqJoin (the left solution
   ends strictly before the right one starts), EqJoin (equal intervals), SeqRightJoin and
   EqLeftJoin (the right solution joined with each left one that passes the test, or alone
   when none does);
4. applies the query's FILTER, then keeps the solutions that contain triple k: those are the
   matches emitted when it arrived.

Matches are compared as a multiset of (bindings, sorted (triple, ts) of their triples).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import product
from typing import Sequence

EX = "http://ex.org/"
XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"

Item = tuple[int, str, str, int]  # (ts, subject, predicate, value), all in ex: but the value


@dataclass(frozen=True)
class Spec:
    """A query: groups of (predicate, variable) patterns on one subject variable ?s, the
    operators between them (left to right), a FILTER and the window's width."""

    groups: tuple[tuple[tuple[str, str], ...], ...]
    operators: tuple[str, ...]
    filter: tuple | None  # ("duration", op, ms) | ("less", var, var) | ("unbound", var)
    width: int

    def text(self) -> str:
        groups = ["{ " + " . ".join(f"?s :{p} ?{v}" for p, v in group) + " }" for group in self.groups]
        where = groups[0]
        for op, group in zip(self.operators, groups[1:]):
            where += f" {op} {group}"
        if self.filter is not None:
            where += " FILTER(" + {
                "duration": lambda f: f"getDURATION() {f[1]} {f[2]}",
                "less": lambda f: f"?{f[1]} < ?{f[2]}",
                "unbound": lambda f: f"!BOUND(?{f[1]})",
            }[self.filter[0]](self.filter) + ")"
        return (f"PREFIX : <{EX}>\nREGISTER RSTREAM <q> AS SELECT *\n"
                f"FROM NAMED WINDOW <w> ON :s [RANGE PT{self.width / 1000:g}S STEP PT1S]\n"
                f"WHERE {{ WINDOW <w> {{ {where} }} }}\n")


@dataclass(frozen=True)
class Solution:
    bindings: tuple[tuple[str, object], ...]  # sorted (variable, value)
    items: tuple[int, ...]  # arrival indexes, one per pattern (a multiset)
    start: int
    end: int


def _compatible(a: Solution, b: Solution) -> bool:
    bound = dict(a.bindings)
    return all(bound.get(v, value) == value for v, value in b.bindings)


def _merge(a: Solution, b: Solution) -> Solution:
    return Solution(tuple(sorted(dict(a.bindings + b.bindings).items())), a.items + b.items,
                    min(a.start, b.start), max(a.end, b.end))


def _group_solutions(group: Sequence[tuple[str, str]], snapshot: Sequence[int], stream: Sequence[Item]
                     ) -> list[Solution]:
    out = []
    for chosen in product(snapshot, repeat=len(group)):
        bound: dict[str, object] = {}
        ok = True
        for (predicate, variable), index in zip(group, chosen):
            ts, subject, p, value = stream[index]
            if p != predicate or bound.setdefault("s", subject) != subject \
                    or bound.setdefault(variable, value) != value:
                ok = False
                break
        if ok:
            times = [stream[i][0] for i in chosen]
            out.append(Solution(tuple(sorted(bound.items())), tuple(chosen), min(times), max(times)))
    return out


def _passes(op: str, left: Solution, right: Solution) -> bool:
    if op in ("SEQ", "OPTIONALSEQ"):
        return left.end < right.start
    return left.start == right.start and left.end == right.end


def _apply(op: str, left: list[Solution], right: list[Solution]) -> list[Solution]:
    joined = [_merge(a, b) for a in left for b in right if _compatible(a, b) and _passes(op, a, b)]
    if op in ("SEQ", "EQUALS"):
        return joined
    alone = [b for b in right if not any(_compatible(a, b) and _passes(op, a, b) for a in left)]
    return joined + alone


def _filter(spec: Spec, solution: Solution) -> bool:
    f = spec.filter
    if f is None:
        return True
    bound = dict(solution.bindings)
    if f[0] == "duration":
        d, limit = solution.end - solution.start, f[2]
        return {"<": d < limit, "<=": d <= limit, ">": d > limit, "=": d == limit}[f[1]]
    if f[0] == "less":
        return f[1] in bound and f[2] in bound and bound[f[1]] < bound[f[2]]  # type: ignore[operator]
    return f[1] not in bound


def term(value: object) -> str:
    return f'"{value}"^^<{XSD_INTEGER}>' if isinstance(value, int) else f"<{EX}{value}>"


def triple(item: Item) -> tuple[str, str, str]:
    return (f"<{EX}{item[1]}>", f"<{EX}{item[2]}>", term(item[3]))


def reference_matches(spec: Spec, stream: Sequence[Item]) -> Counter:
    """The matches the engine must emit over the whole stream, as a multiset of keys."""
    found: Counter = Counter()
    for k, (now, *_) in enumerate(stream):
        snapshot = [i for i in range(k + 1) if stream[i][0] >= now - spec.width]
        solutions = _group_solutions(spec.groups[0], snapshot, stream)
        for op, group in zip(spec.operators, spec.groups[1:]):
            solutions = _apply(op, solutions, _group_solutions(group, snapshot, stream))
        for solution in solutions:
            if k in solution.items and _filter(spec, solution):
                bindings = tuple(sorted((v, term(value)) for v, value in solution.bindings))
                found[(bindings, tuple(sorted((triple(stream[i]), stream[i][0]) for i in solution.items)))] += 1
    return found


def engine_key(match) -> tuple:
    return (tuple(sorted(match.bindings.items())), tuple(sorted(match.triples)))


@dataclass(frozen=True)
class AbsenceSpec:
    """``{ P } FILTER NOT EXISTS { Q } WITHIN within``: P and Q groups of (predicate, variable)
    patterns on one subject variable ?s."""

    present: tuple[tuple[str, str], ...]
    absent: tuple[tuple[str, str], ...]
    within: int
    width: int

    def text(self) -> str:
        present = " . ".join(f"?s :{p} ?{v}" for p, v in self.present)
        absent = " . ".join(f"?s :{p} ?{v}" for p, v in self.absent)
        return (f"PREFIX : <{EX}>\nREGISTER RSTREAM <q> AS SELECT *\n"
                f"FROM NAMED WINDOW <w> ON :s [RANGE PT{self.width / 1000:g}S STEP PT1S]\n"
                f"WHERE {{ WINDOW <w> {{ {present} . FILTER NOT EXISTS {{ {absent} }} "
                f"WITHIN PT{self.within / 1000:g}S }} }}\n")


def absence_matches(spec: AbsenceSpec, stream: Sequence[Item]) -> Counter:
    """What the engine must report by the end of the stream: each match of P (found, as any
    match, in the window when its last triple arrives) whose deadline ``P.end + within`` the
    stream's time passed (a later triple) with no compatible match of Q (within the window)
    that starts after P ends and ends by the deadline. Reported with P's bindings and triples."""
    found: Counter = Counter()
    last = stream[-1][0] if stream else -1
    everything = list(range(len(stream)))
    answers = [q for q in _group_solutions(spec.absent, everything, stream) if q.end - q.start <= spec.width]
    for k, (now, *_) in enumerate(stream):
        snapshot = [i for i in range(k + 1) if stream[i][0] >= now - spec.width]
        for p in _group_solutions(spec.present, snapshot, stream):
            if k not in p.items or p.end + spec.within >= last:
                continue
            deadline = p.end + spec.within
            if any(_compatible(p, q) and q.start > p.end and q.end <= deadline for q in answers):
                continue
            bindings = tuple(sorted((v, term(value)) for v, value in p.bindings))
            found[(bindings, tuple(sorted((triple(stream[i]), stream[i][0]) for i in p.items)))] += 1
    return found
