"""A window's instances and the content changes between them.

Instances of ``[RANGE r STEP s]`` are ``[k*s, k*s + r)`` in stream milliseconds. The window
keeps the triples that have arrived but not yet entered an instance (``pending``) and those
in the instance the network currently holds (``content``), each a heap by timestamp. Moving
to a later instance expires the content older than its start and admits the pending triples
before its end: the network sees only those changes. An instance's content is a set, as an
RDF graph is: a triple that arrives twice in one instance enters once and leaves when its
last copy has expired.
"""
from __future__ import annotations

import heapq
from itertools import count
from typing import Optional

Triple = tuple
Changes = list  # of (Triple, +1 | -1)


class WindowContent:
    def __init__(self, width_ms: int, step_ms: int):
        if width_ms <= 0 or step_ms <= 0:
            raise ValueError("a window's RANGE and STEP must be positive")
        self.width = width_ms
        self.step = step_ms
        self.pending: list[tuple[int, int, Triple]] = []
        self.content: list[tuple[int, int, Triple]] = []
        self.copies: dict[Triple, int] = {}  # triple -> copies in the content
        self.start: Optional[int] = None  # the instance the content is, [start, end)
        self.end: Optional[int] = None
        self.latest = -1  # the latest timestamp seen
        self._sequence = count()

    def add(self, ts: int, triple: Triple) -> None:
        heapq.heappush(self.pending, (ts, next(self._sequence), triple))
        if ts > self.latest:
            self.latest = ts

    def holds_unreported(self) -> bool:
        """Whether an instance not yet closed would hold a triple that has arrived."""
        if self.pending:
            return True
        return bool(self.content) and self.latest >= self.end + self.step - self.width

    def empty(self) -> bool:
        return not self.content and not self.pending

    def first_end_holding(self, ts: int) -> int:
        """The end of the first instance that ends after ``ts`` (the first that can hold it)."""
        k = max(0, (ts - self.width) // self.step + 1)
        return k * self.step + self.width

    def next_end(self, skip_empty: bool) -> Optional[int]:
        """The end of the next instance to close: the one after the current or, when the
        content is empty and ``skip_empty``, the first that can hold a pending triple. None
        when there is nothing to wait for. The first instance is the first that can hold
        the window's first triple (not the one at time 0: timestamps are epoch milliseconds)."""
        if self.end is None or (skip_empty and not self.content):
            if not self.pending:
                return None
            first = self.first_end_holding(self.pending[0][0])
            return first if self.end is None else max(self.end + self.step, first)
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
        content, copies = self.content, self.copies
        while content and content[0][0] < start:
            _, _, triple = heapq.heappop(content)
            left = copies[triple] - 1
            if left:
                copies[triple] = left
            else:
                del copies[triple]
                changes.append((triple, -1))
        pending = self.pending
        while pending and pending[0][0] < end:
            item = heapq.heappop(pending)
            if item[0] < start:
                continue  # in no instance from here on (late, or between tumbling instances)
            heapq.heappush(content, item)
            triple = item[2]
            before = copies.get(triple, 0)
            copies[triple] = before + 1
            if not before:
                changes.append((triple, 1))
        self.start, self.end = start, end
        return changes
