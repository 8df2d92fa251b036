"""A window's instances and the content changes between them.

Instances of ``[RANGE r STEP s]`` are ``[k*s, k*s + r)`` in stream milliseconds. The window
keeps the triples that have arrived but not yet entered an instance (``pending``) and those
in the instance the network currently holds (``content``), each a heap by timestamp. Moving
to a later instance expires the content older than its start and admits the pending triples
before its end: the network sees only those changes. An instance's content is a set, as an
RDF graph is: a triple that arrives twice in one instance enters once and leaves when its
last copy has expired.

A triple no pattern of the query can match changes no solution, but it still makes an
instance non-empty (the ``non-empty`` report policy). Such triples are kept as *witnesses*:
entries ``(ts, None)``, at most one per timestamp not already held by a triple arriving just
before, that occupy the window for emptiness and never reach the network.

A triple and what the schema entails from it can be added as one *bundle* (``add`` given a
list ``[source, triples]``): one entry instead of one per triple. The window then counts
the copies of the source; the triples it entails count once per source present in
``copies``, which is all that decides when they enter and leave (a count going from or
to zero), so the network sees the same changes in the same order as from the triples
added one by one.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from itertools import count, repeat
from typing import Optional

Triple = tuple
Changes = list  # of (Triple, +1 | -1)


class WindowContent:
    def __init__(self, width_ms: int, step_ms: int):
        if width_ms <= 0 or step_ms <= 0:
            raise ValueError("a window's RANGE and STEP must be positive")
        self.width = width_ms
        self.step = step_ms
        # Triples arrive in time order nearly always: those go in deques (appended, popped
        # from the left); one older than the deque's last waits in a heap beside it.
        self.pending: deque[tuple[int, Triple]] = deque()
        self.late_pending: list[tuple[int, int, Triple]] = []
        self.content: deque[tuple[int, Triple]] = deque()
        self.late_content: list[tuple[int, int, Triple]] = []
        self.copies: dict[Triple, int] = {}  # triple -> copies in the content (a bundle's: sources present)
        self.sources: dict[Triple, int] = {}  # a bundle's source triple -> copies in the content
        self.start: Optional[int] = None  # the instance the content is, [start, end)
        self.end: Optional[int] = None
        self.latest = -1  # the latest timestamp seen
        self._sequence = count()

    def add(self, ts: int, triple: Triple) -> None:
        pending = self.pending
        if not pending or ts >= pending[-1][0]:
            pending.append((ts, triple))
        else:
            heapq.heappush(self.late_pending, (ts, next(self._sequence), triple))
        if ts > self.latest:
            self.latest = ts

    def witness(self, ts: int) -> None:
        """A triple the query cannot match arrived at ``ts``: the instances holding ``ts``
        are not empty, and nothing else changes."""
        pending = self.pending
        if pending and ts == pending[-1][0]:
            return  # that entry already holds ``ts`` through the same instances
        if not pending or ts > pending[-1][0]:
            pending.append((ts, None))
        else:
            heapq.heappush(self.late_pending, (ts, next(self._sequence), None))
        if ts > self.latest:
            self.latest = ts

    def _first_pending(self) -> Optional[int]:
        first = self.pending[0][0] if self.pending else None
        if self.late_pending and (first is None or self.late_pending[0][0] < first):
            first = self.late_pending[0][0]
        return first

    def holds(self) -> bool:
        """Whether the content (the instance the network holds) has a triple."""
        return bool(self.content or self.late_content)

    def holds_unreported(self) -> bool:
        """Whether an instance not yet closed would hold a triple that has arrived."""
        if self.pending or self.late_pending:
            return True
        return self.holds() and self.latest >= self.end + self.step - self.width

    def first_end_holding(self, ts: int) -> int:
        """The end of the first instance that ends after ``ts`` (the first that can hold it)."""
        k = max(0, (ts - self.width) // self.step + 1)
        return k * self.step + self.width

    def next_end(self, skip_empty: bool) -> Optional[int]:
        """The end of the next instance to close: the one after the current or, when the
        content is empty and ``skip_empty``, the first that can hold a pending triple. None
        when there is nothing to wait for. The first instance is the first that can hold
        the window's first triple (not the one at time 0: timestamps are epoch milliseconds)."""
        if self.end is None or (skip_empty and not self.holds()):
            first = self._first_pending()
            if first is None:
                return None
            first_end = self.first_end_holding(first)
            return first_end if self.end is None else max(self.end + self.step, first_end)
        return self.end + self.step

    def latest_end(self, at: int) -> Optional[int]:
        """The end of the latest instance that has closed at stream time ``at``."""
        if at < self.width:
            return None
        return (at - self.width) // self.step * self.step + self.width

    def move_to(self, end: int) -> Changes:
        """Become the instance ending at ``end``; the triples that left and entered."""
        start = end - self.width
        changes: Changes = []
        copies = self.copies
        content, late_content = self.content, self.late_content
        leave = self._leave
        sources = self.sources
        # the content is in time order: the entries before start counted once (bisect: an
        # entry (ts, x) is before (start,) exactly when ts < start), then taken in turn
        expired = bisect_left(content, (start,)) if content and content[0][0] < start else 0
        popleft = content.popleft
        for _ in repeat(None, expired):
            triple = popleft()[1]
            if triple is None:
                continue
            if triple.__class__ is list:  # _leave_bundle, written out
                source = triple[0]
                left = sources[source] - 1
                if left:
                    sources[source] = left
                    continue
                del sources[source]
                for triple in triple[1]:
                    left = copies.pop(triple) - 1
                    if left:
                        copies[triple] = left
                    else:
                        changes.append((triple, -1))
                continue
            # _leave, written out: the loop every expired triple takes. Taken out and put back
            # when other copies are left: a triple is mostly in the window once, and its tuple
            # is hashed once instead of twice (the order of copies matters nowhere)
            left = copies.pop(triple) - 1
            if left:
                copies[triple] = left
            else:
                changes.append((triple, -1))
        while late_content and late_content[0][0] < start:
            triple = heapq.heappop(late_content)[2]
            if triple is not None:
                leave(triple, changes)
        pending, late_pending = self.pending, self.late_pending
        entered = ()   # the entries that enter, counted in after they moved
        if (pending and not late_pending and pending[-1][0] < end and pending[0][0] >= start
                and (not content or content[-1][0] <= pending[0][0])):
            # every pending entry enters, after the content's last: moved all at once (the
            # usual move, the stream in time order and no lateness), then counted in below
            content.extend(pending)
            entered = pending
        elif not late_pending:  # the loop below without late arrivals, the entry moved as it is
            entered = []
            latest = content[-1][0] if content else None
            while pending and pending[0][0] < end:
                entry = pending.popleft()
                ts = entry[0]
                if ts < start:
                    continue
                if latest is None or ts >= latest:
                    content.append(entry)
                    latest = ts
                else:
                    heapq.heappush(late_content, (ts, next(self._sequence), entry[1]))
                entered.append(entry)
        if entered:
            for _, triple in entered:  # counted in, in the order they entered
                if triple is None:
                    continue
                if triple.__class__ is list:  # _enter_bundle, written out
                    source = triple[0]
                    before = sources.get(source, 0)
                    sources[source] = before + 1
                    if before:
                        continue
                    for triple in triple[1]:
                        if triple in copies:
                            copies[triple] += 1
                        else:
                            copies[triple] = 1
                            changes.append((triple, 1))
                    continue
                if triple in copies:
                    copies[triple] += 1
                else:
                    copies[triple] = 1
                    changes.append((triple, 1))
            if entered is pending:
                pending.clear()
        while True:
            if late_pending and (not pending or late_pending[0][0] < pending[0][0]):
                if late_pending[0][0] >= end:
                    break
                ts, _, triple = heapq.heappop(late_pending)
            elif pending and pending[0][0] < end:
                ts, triple = pending.popleft()
            else:
                break
            if ts < start:
                continue  # in no instance from here on (late, or between tumbling instances)
            if not content or ts >= content[-1][0]:
                content.append((ts, triple))
            else:
                heapq.heappush(late_content, (ts, next(self._sequence), triple))
            if triple is None:
                continue  # a witness
            if triple.__class__ is list:
                self._enter_bundle(triple, changes)
                continue
            before = copies.get(triple, 0)
            copies[triple] = before + 1
            if not before:
                changes.append((triple, 1))
        self.start, self.end = start, end
        return changes

    def _enter_bundle(self, bundle: list, changes: Changes) -> None:
        source, triples = bundle
        sources = self.sources
        before = sources.get(source, 0)
        sources[source] = before + 1
        if before:
            return
        copies = self.copies
        for triple in triples:
            had = copies.get(triple, 0)
            copies[triple] = had + 1
            if not had:
                changes.append((triple, 1))

    def _leave_bundle(self, bundle: list, changes: Changes) -> None:
        source, triples = bundle
        sources = self.sources
        left = sources[source] - 1
        if left:
            sources[source] = left
            return
        del sources[source]
        for triple in triples:
            self._leave(triple, changes)

    def _leave(self, triple: Triple, changes: Changes) -> None:
        if triple.__class__ is list:
            self._leave_bundle(triple, changes)
            return
        left = self.copies[triple] - 1
        if left:
            self.copies[triple] = left
        else:
            del self.copies[triple]
            changes.append((triple, -1))
