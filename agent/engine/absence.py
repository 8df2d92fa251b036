"""Absence with timers: ``FILTER NOT EXISTS { Q } WITHIN D`` (docs/engine.md, "Absence").

A query with an absence compiles to two chains. The chain of its other patterns (P) ends in
an ``AbsenceProduction``: each match of P starts a timer due at ``P.end + D``. The chain of
Q ends in an ``AbsenceWatch``: a match of Q compatible with a waiting match of P (equal on
the variables they share), that starts after P ends and ends by the deadline, answers its
timer. A timer still unanswered when stream time passes its deadline fires: the match of P
is reported once, with the interval [P.start, deadline]. A Q that comes later withdraws
nothing. The reported match says what was missing (``AbsenceMatch.expected``): Q's triple
patterns with the values P bound filled in.

Timers wait in one heap per engine (``Timers``), earliest deadline first; the engine looks
at it only when stream time moves forward and only compares with the earliest deadline
(``Timers.next``), so a query without an absence costs one comparison per clock step.
Stream time moves with arriving triples and, in the agent, with the wall clock while the
stream is idle (``Engine.advance``), so a recorded stream replays deterministically and a
quiet gateway still fires on time.
"""
from __future__ import annotations

import heapq
from typing import Callable, Sequence

from .beta import Production
from .match import Match
from .memories import key_reader
from .query import TriplePattern, is_var
from .tokens import END, NO_DEADLINE, NO_START, ROW, START, Token

# A term of an expectation: a constant or an unbound variable as written, or the slot of
# P's row that binds it; a quoted triple pattern nests one.
Expected = tuple  # of three (str | int | Expected)


class AbsenceMatch(Match):
    """A match of P whose deadline passed: ``expected`` is what did not arrive by ``end``, Q's
    triple patterns as statements, the values P bound filled in (unbound variables stay
    ``?name``; Q's filters are not repeated)."""

    __slots__ = ("expected",)


def expectation(patterns: Sequence[TriplePattern], slots: dict[str, int]) -> tuple[Expected, ...]:
    """Q's patterns with each variable P binds replaced by its slot in P's rows."""
    def term(t: object) -> object:
        if isinstance(t, TriplePattern):
            return (term(t.s), term(t.p), term(t.o))
        if is_var(t) and t[1:] in slots:
            return slots[t[1:]]
        return t
    return tuple((term(tp.s), term(tp.p), term(tp.o)) for tp in patterns)


def _written(parts: Expected, row: Sequence[str]) -> str:
    return " ".join(row[t] if isinstance(t, int) else f"<< {_written(t, row)} >>" if isinstance(t, tuple) else str(t)
                    for t in parts)


class Waiting:
    """One match of P waiting for its deadline."""

    __slots__ = ("production", "token", "key", "end", "deadline", "done")

    def __init__(self, production: AbsenceProduction, token: Token, key: object, end: int, deadline: int) -> None:
        self.production = production
        self.token = token
        self.key = key
        self.end = end
        self.deadline = deadline
        self.done = False  # answered, fired, or its query removed


class Timers:
    """The pending deadlines of every absence in the engine, earliest first."""

    __slots__ = ("heap", "added", "next")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Waiting]] = []
        self.added = 0  # ties broken by order of arrival
        self.next = NO_DEADLINE  # the earliest deadline waiting (answered ones may still sit in the heap)

    def add(self, waiting: Waiting) -> None:
        self.added += 1
        heapq.heappush(self.heap, (waiting.deadline, self.added, waiting))
        if waiting.deadline < self.next:
            self.next = waiting.deadline

    def due(self, now: int) -> list[Waiting]:
        """The unanswered timers whose deadline ``now`` has passed, in deadline order."""
        heap = self.heap
        out = []
        while heap and heap[0][0] < now:
            waiting = heapq.heappop(heap)[2]
            if not waiting.done:
                out.append(waiting)
        self.next = heap[0][0] if heap else NO_DEADLINE
        return out

    def __len__(self) -> int:
        return sum(1 for _, _, waiting in self.heap if not waiting.done)


class AbsenceProduction(Production):
    """The end of P's chain: a match in the query's window starts a timer."""

    __slots__ = ("timers", "within", "waiting", "read_key", "expected")

    def __init__(self, name: str, width: int, projection: Sequence[tuple[str, int]],
                 deliver: Callable[[Match], None], clock: Callable[[], int], timers: Timers, within: int,
                 shared_slots: tuple[int, ...], expected: tuple[Expected, ...] = ()) -> None:
        super().__init__(name, True, width, projection, deliver, clock)
        self.timers = timers
        self.within = within
        self.expected = expected
        self.waiting: dict[object, list[Waiting]] = {}  # by the values of the variables P shares with Q
        self.read_key = key_reader(shared_slots)

    def fire(self, token: Token) -> None:
        start = token[START]
        end = token[END]
        if start == NO_START:
            return  # static triples only: nothing to time the absence from
        if end - start > self.width or start + self.width < self.clock():
            return
        key = self.read_key(token[ROW])
        waiting = Waiting(self, token, key, end, end + self.within)
        self.waiting.setdefault(key, []).append(waiting)
        self.timers.add(waiting)

    def expire(self, waiting: Waiting) -> None:
        """The deadline passed unanswered: report the match of P, once."""
        waiting.done = True
        self._forget(waiting)
        token = waiting.token
        row = token[ROW]
        self.count += 1
        match = AbsenceMatch(self.name, dict(zip(self.names, self.getter(row))), token[START], waiting.deadline, token)
        match.expected = tuple(_written(parts, row) + " ." for parts in self.expected)
        self.deliver(match)

    def forget(self, waiting: Waiting) -> None:
        """Drop a waiting match without reporting it (``Engine.forget_deadlines``)."""
        waiting.done = True
        self._forget(waiting)

    def answer(self, key: object, start: int, end: int) -> None:
        """A match of Q over [start, end]: the timers it answers stop."""
        waiting = self.waiting.get(key)
        if not waiting:
            return
        for item in [w for w in waiting if w.end < start and end <= w.deadline]:
            item.done = True
            self._forget(item)

    def _forget(self, waiting: Waiting) -> None:
        bucket = self.waiting.get(waiting.key)
        if bucket is not None:
            if waiting in bucket:
                bucket.remove(waiting)
            if not bucket:
                del self.waiting[waiting.key]

    def cancel_all(self) -> None:
        """The query is removed: none of its timers fires."""
        for bucket in self.waiting.values():
            for waiting in bucket:
                waiting.done = True
        self.waiting.clear()


class AbsenceWatch(Production):
    """The end of Q's chain: a match of Q in the window answers the timers it matches. It
    reports nothing itself (its count stays 0)."""

    __slots__ = ("absence", "read_key")

    def __init__(self, name: str, width: int, clock: Callable[[], int], absence: AbsenceProduction,
                 shared_slots: tuple[int, ...]) -> None:
        super().__init__(name, True, width, (), absence.deliver, clock)
        self.absence = absence
        self.read_key = key_reader(shared_slots)

    def fire(self, token: Token) -> None:
        start = token[START]
        end = token[END]
        if start == NO_START or end - start > self.width or start + self.width < self.clock():
            return
        self.absence.answer(self.read_key(token[ROW]), start, end)
