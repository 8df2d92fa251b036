"""A complete match of a registered pattern, as the engine hands it to ``on_match``."""
from __future__ import annotations

from typing import NamedTuple

Triple = tuple[str, str, str]


class Match(NamedTuple):
    """One match: pattern name, bindings (variable without ``?`` -> term) and its interval.

    ``start``/``end`` are the earliest and latest timestamps (ms) of the streamed triples
    that make the match; static triples do not count (-1/-1 for a match of static data
    only). ``triples`` lists every contributing triple with its timestamp, in the order of
    the pattern's join chain; static triples carry -1.
    """

    pattern: str
    bindings: dict[str, str]
    start: int
    end: int
    triples: tuple[tuple[Triple, int], ...]
