"""The alpha side: a triple pattern turning triples that enter or leave a dataset into solutions."""
from __future__ import annotations

from operator import itemgetter
from typing import Callable, Optional

from .solutions import Delta, Node

Triple = tuple


def _is_var(term: str) -> bool:
    return term.startswith("?")


class PatternNode(Node):
    """A triple pattern over one dataset (a window's content, or the static data): its
    solutions are the content's triples it matches, projected on its variables."""

    def __init__(self, pattern: tuple[str, str, str], dataset: Optional[str]):
        variables = list(dict.fromkeys(t[1:] for t in pattern if _is_var(t)))
        super().__init__(variables, variables)
        self.pattern = pattern
        self.dataset = dataset
        self.predicate = None if _is_var(pattern[1]) else pattern[1]
        self.match = self._matcher(pattern)
        self._activate = self._fast_activation(pattern)

    def label(self) -> str:
        where = "static data" if self.dataset is None else f"window {self.dataset}"
        return f"pattern [{' '.join(self.pattern)}] over {where}"

    def _matcher(self, pattern: tuple[str, str, str]) -> Callable[[Triple], Optional[tuple]]:
        constants = [(i, t) for i, t in enumerate(pattern) if not _is_var(t)]
        first: dict[str, int] = {}
        repeats: list[tuple[int, int]] = []
        order: list[int] = []
        for i, t in enumerate(pattern):
            if _is_var(t):
                if t in first:
                    repeats.append((i, first[t]))
                else:
                    first[t] = i
                    order.append(i)

        def match(triple: Triple) -> Optional[tuple]:
            for i, t in constants:
                if triple[i] != t:
                    return None
            for i, j in repeats:
                if triple[i] != triple[j]:
                    return None
            return tuple(triple[i] for i in order)
        return match

    def _fast_activation(self, pattern: tuple[str, str, str]) -> Optional[Callable[[list], Delta]]:
        """For the usual shapes (distinct variables, at most one constant besides the
        predicate), the delta as one comprehension. The predicate is not tested: the
        evaluator hands a node with a constant predicate only the triples that carry it."""
        if self.predicate is None or len(set(t for t in pattern if _is_var(t))) != sum(map(_is_var, pattern)):
            return None
        checks = [(i, t) for i, t in enumerate(pattern) if i != 1 and not _is_var(t)]
        order = [i for i, t in enumerate(pattern) if _is_var(t)]
        if len(checks) > 1:
            return None
        if len(order) > 1:
            take = itemgetter(*order)
        elif order:
            only = order[0]
            take = lambda triple: (triple[only],)  # noqa: E731
        else:
            take = lambda triple: ()  # noqa: E731
        if not checks:
            return lambda changes: [(take(triple), weight) for triple, weight in changes]
        at, constant = checks[0]
        return lambda changes: [(take(triple), weight) for triple, weight in changes if triple[at] == constant]

    def activate(self, changes: list[tuple[Triple, int]]) -> None:
        """Triples entering (+1) or leaving (-1) the dataset; those of a constant predicate
        carry it (``evaluator._Dataset`` routes them)."""
        if self._activate is not None:
            self.emit(self._activate(changes))
            return
        match = self.match
        delta: Delta = []
        for triple, weight in changes:
            row = match(triple)
            if row is not None:
                delta.append((row, weight))
        self.emit(delta)
