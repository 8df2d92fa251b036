"""Consumption strategies (Sparkwave section 5; the names are ETALIS'): which combinations of
triples a pattern reports. Chosen per query with a trailing ``CONSUME`` clause (docs/engine.md,
"Consumption strategies", has the definitions):

* ``unrestricted`` (the default): every combination in the window, each once (``beta.Production``).
* ``recent``: each triple pattern uses only its newest triple for each combination of values
  of the variables it shares with the rest of the query: a match reflects the current state.
* ``chronological``: when a triple completes matches, the one whose triples are oldest is
  reported (timestamps compared pattern by pattern in the order the query writes them) and
  its triples are consumed: no later match of this query uses them.

Both are productions over the unrestricted network: the joins make every combination, and
the production keeps the ones the strategy allows. Both collect the candidates a triple
completes and decide once the triple has gone through (``Network.deferred``, settled by the
engine after each triple): ``recent`` asks the alpha memories whether a newer triple of the
same values came after each one of the match, ``chronological`` chooses the oldest.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .beta import Production
from .match import Match
from .memories import AlphaMemory, key_reader
from .tokens import END, NO_START, ROW, SOURCE, START, TIME, TRIPLE, VALUES, Entry, Token, chain_entries

STRATEGIES = ("unrestricted", "recent", "chronological")


class RecentLevel:
    """What ``recent`` checks at one level of the chain: the alpha memory its entries are in,
    how that memory reads its key, and where the shared variables sit in an entry's values."""

    __slots__ = ("alpha", "read_key", "read_shared", "by_key")

    def __init__(self, alpha: AlphaMemory, shared_positions: tuple[int, ...]) -> None:
        self.alpha = alpha
        self.read_key = alpha.read_key
        self.read_shared = key_reader(shared_positions)
        # The memory's key reads only shared variables (every level but, at times, the first):
        # then every entry of the same shared values is in the entry's own bucket, in order of
        # arrival; otherwise the memory's arrival-ordered queue is read instead.
        self.by_key = set(alpha.key_positions) <= set(shared_positions)

    def newest(self, entry: Entry) -> bool:
        """No entry of the same shared values arrived after ``entry`` (static ones always are)."""
        if entry[TIME] < 0:
            return True
        values = entry[VALUES]
        bucket = self.alpha.index.get(self.read_key(values)) if self.by_key else self.alpha.expiry
        if not bucket:
            return True
        shared = self.read_shared(values)
        read = self.read_shared
        for later in reversed(bucket):  # newest first; stop at the entry itself
            if later is entry:
                return True
            if read(later[VALUES]) == shared:
                return False
        return True


class RecentProduction(Production):
    """``recent``: a match whose every streamed triple is still the newest of its kind. Decided
    once the triple that completed it has gone through: until then it may not yet be in
    every memory that a pattern of the match reads."""

    __slots__ = ("levels", "deferred", "candidates")

    def __init__(self, name: str, width: int, projection: Sequence[tuple[str, int]],
                 deliver: Callable[[Match], None], clock: Callable[[], int], levels: Sequence[RecentLevel],
                 deferred: list) -> None:
        super().__init__(name, True, width, projection, deliver, clock)
        self.levels = tuple(levels)
        self.deferred = deferred
        self.candidates: list[Token] = []

    def fire(self, token: Token) -> None:
        start, end = token[START], token[END]
        if start != NO_START and (end - start > self.width or start + self.width < self.clock()):
            return
        if not self.candidates:
            self.deferred.append(self)
        self.candidates.append(token)

    def settle(self) -> None:
        candidates, self.candidates = self.candidates, []
        for token in candidates:
            if all(level.newest(entry) for level, entry in zip(self.levels, chain_entries(token))):
                start, end = token[START], token[END]
                if start == NO_START:
                    start = end = -1
                self.count += 1
                self.deliver(Match(self.name, dict(zip(self.names, self.getter(token[ROW]))), start, end, token))


def _arrival(entry: Entry) -> tuple:
    """Which arrival an entry comes from: the streamed triple (the one it was entailed from,
    if it was) and its time. One arrival may sit in several memories, as several entries
    (two patterns of a query, or a triple and what it entails): consuming it consumes all."""
    return (entry[SOURCE] if len(entry) > SOURCE else entry[TRIPLE], entry[TIME])


class ChronologicalProduction(Production):
    """``chronological``: of the matches one triple completes, the oldest, whose triples are
    then consumed for this query."""

    __slots__ = ("written", "deferred", "candidates", "consumed", "prune_at")

    def __init__(self, name: str, width: int, projection: Sequence[tuple[str, int]],
                 deliver: Callable[[Match], None], clock: Callable[[], int], written: Sequence[int],
                 deferred: list) -> None:
        super().__init__(name, True, width, projection, deliver, clock)
        self.written = tuple(written)  # per level, the pattern's place in the query's text
        self.deferred = deferred       # the network's list of productions to settle
        self.candidates: list[tuple[tuple[int, ...], Token, list[Entry]]] = []
        self.consumed: dict[tuple, int] = {}  # the arrivals consumed (``_arrival``) -> their time
        self.prune_at = 1024

    def fire(self, token: Token) -> None:
        start, end = token[START], token[END]
        if start != NO_START and (end - start > self.width or start + self.width < self.clock()):
            return
        entries = chain_entries(token)
        consumed = self.consumed
        if consumed and any(_arrival(e) in consumed for e in entries):
            return
        times = [0] * len(entries)
        for place, entry in zip(self.written, entries):
            times[place] = entry[TIME]
        if not self.candidates:
            self.deferred.append(self)
        self.candidates.append((tuple(times), token, entries))

    def settle(self) -> None:
        """The triple has gone through: report the oldest candidate and consume its triples."""
        candidates, self.candidates = self.candidates, []
        times, token, entries = min(candidates, key=lambda candidate: candidate[0])
        for entry in entries:
            if entry[TIME] >= 0:
                self.consumed[_arrival(entry)] = entry[TIME]
        start, end = token[START], token[END]
        if start == NO_START:
            start = end = -1
        self.count += 1
        self.deliver(Match(self.name, dict(zip(self.names, self.getter(token[ROW]))), start, end, token))
        if len(self.consumed) > self.prune_at:
            self._forget_old(self.clock())

    def _forget_old(self, now: int) -> None:
        """Consumed triples that left the window can be in no match any more."""
        cutoff = now - self.width
        self.consumed = {key: ts for key, ts in self.consumed.items() if ts >= cutoff}
        self.prune_at = max(1024, 2 * len(self.consumed))


__all__ = ["STRATEGIES", "RecentLevel", "RecentProduction", "ChronologicalProduction"]
