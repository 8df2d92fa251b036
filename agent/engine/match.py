"""A complete match of a registered pattern, as the engine hands it to ``on_match``."""
from __future__ import annotations

from typing import Any

Triple = tuple[str, str, str]


class Match:
    """One match: pattern name, bindings (variable without ``?`` -> term) and its interval.

    ``start``/``end`` are the earliest and latest timestamps (ms) of the streamed triples
    that make the match; static triples do not count (-1/-1 for a match of static data
    only). ``triples`` lists every contributing triple with its timestamp, in the order of
    the pattern's join chain; static triples carry -1. It is read from the match's token
    chain when first asked for: `edgewave match` never asks, the agent always does.
    """

    __slots__ = ("pattern", "bindings", "start", "end", "_token", "_triples")

    def __init__(self, pattern: str, bindings: dict[str, str], start: int, end: int, token: Any) -> None:
        self.pattern = pattern
        self.bindings = bindings
        self.start = start
        self.end = end
        self._token = token  # (row, parent, entry, ...) linked up to the first pattern
        self._triples: tuple[tuple[Triple, int], ...] | None = None

    @property
    def triples(self) -> tuple[tuple[Triple, int], ...]:
        if self._triples is None:
            out = []
            token = self._token
            while token is not None:
                entry = token[2]
                out.append((entry[0], entry[1]))
                token = token[1]
            out.reverse()
            self._triples = tuple(out)
            self._token = None
        return self._triples

    def _key(self) -> tuple:
        return (self.pattern, self.bindings, self.start, self.end, self.triples)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Match) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # bindings is a dict

    def __repr__(self) -> str:
        return (f"Match(pattern={self.pattern!r}, bindings={self.bindings!r}, start={self.start}, "
                f"end={self.end}, triples={self.triples!r})")
