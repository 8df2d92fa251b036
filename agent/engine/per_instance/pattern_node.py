"""The alpha side: a triple pattern turning triples that enter or leave a dataset into solutions."""
from __future__ import annotations

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

    def activate(self, changes: list[tuple[Triple, int]]) -> None:
        """Triples entering (+1) or leaving (-1) the dataset."""
        match = self.match
        delta: Delta = []
        for triple, weight in changes:
            row = match(triple)
            if row is not None:
                delta.append((row, weight))
        self.emit(delta)
