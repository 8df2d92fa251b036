"""A complete match of a registered pattern, as the engine hands it to ``on_match``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .tokens import SOURCE, TIME, TRIPLE, Triple, chain_entries

if TYPE_CHECKING:
    from .evidence import Entailment


class Match:
    """One match: pattern name, bindings (variable without ``?`` -> term) and its interval.

    ``start``/``end`` are the earliest and latest timestamps (ms) of the streamed triples
    that make the match; static triples do not count (-1/-1 for a match of static data
    only). ``triples`` lists every contributing triple with its timestamp, in the order of
    the pattern's join chain; static triples carry -1. It is read from the match's token
    chain when first asked for: `edgewave match` never asks, the agent always does.
    ``entailed`` says which of those triples the epsilon-network entailed, from what and by
    which schema axioms (``evidence.py``); it too is worked out only when asked.
    """

    __slots__ = ("pattern", "bindings", "start", "end", "_token", "_triples", "_sources", "_evidence",
                 "_entailed", "_makers")

    def __init__(self, pattern: str, bindings: dict[str, str], start: int, end: int, token: Any) -> None:
        self.pattern = pattern
        self.bindings = bindings
        self.start = start
        self.end = end
        self._token = token  # the last token, linked up to the first pattern (tokens.py)
        self._triples: tuple[tuple[Triple, int], ...] | None = None
        # Set when first needed, not here: a match is made every few triples, and three more
        # stores per match are measurable (docs/benchmarks.md). ``_sources``: (index in
        # triples, source) of each entailed triple, set with ``_triples``; ``_evidence``: the
        # engine's (schema, static triples), set by ``Engine._deliver`` before anyone sees the
        # match; ``_entailed``: the answer of ``entailed``.

    @property
    def triples(self) -> tuple[tuple[Triple, int], ...]:
        if self._triples is None:
            entries = chain_entries(self._token)
            self._triples = tuple((entry[TRIPLE], entry[TIME]) for entry in entries)
            # An entailed entry carries its source (tokens.py); keep just that, so the token
            # chain can go.
            self._sources = tuple((i, entry[SOURCE]) for i, entry in enumerate(entries) if len(entry) > SOURCE)
            self._token = None
        return self._triples

    @property
    def entailed(self) -> tuple[Entailment, ...]:
        """The contributing triples the epsilon-network entailed, in the order of ``triples``:
        each with the asserted triple it came from, the flattened link and the schema axioms
        (``evidence.Entailment``). Empty with entailment off or when every triple was asserted."""
        try:
            return self._entailed
        except AttributeError:
            pass
        triples = self.triples
        out = []
        if self._sources:
            # Imported here: `edgewave match` never asks, and does not pay for the import.
            from .evidence import Explainer

            explain = Explainer(*self._evidence).explain
            for i, source in self._sources:
                triple, ts = triples[i]
                found = explain(triple, ts, source)
                if found is not None:
                    out.append(found)
        self._entailed: tuple[Entailment, ...] = tuple(out)
        return self._entailed

    def arrivals(self) -> list[tuple[Triple, int]]:
        """The (triple, time) arrivals this match rests on: its streamed triples, and for an
        entailed one also the triple it was entailed from (which is what a rule made)."""
        triples = self.triples
        return [*triples, *((source, triples[i][1]) for i, source in self._sources)]

    @property
    def made_from(self) -> tuple[Match, ...]:
        """The matches of chained rules that made triples this match used, first use first
        (rules.py). Set up by the engine only when a rule has made triples."""
        try:
            makers = self._makers
        except AttributeError:
            return ()
        from .rules import made_by

        out: list[Match] = []
        for triple, _ in self.arrivals():
            found = made_by(makers, triple)
            if found is not None and all(m is not found[1] for m in out):
                out.append(found[1])
        return tuple(out)

    def _compared(self) -> tuple:
        return (self.pattern, self.bindings, self.start, self.end, self.triples)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Match) and self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # bindings is a dict

    def __repr__(self) -> str:
        return (f"Match(pattern={self.pattern!r}, bindings={self.bindings!r}, start={self.start}, "
                f"end={self.end}, triples={self.triples!r})")
