"""Alpha and beta memories (Doorenbos 2.2-2.3, Sparkwave 3.2) and the one way a join key
is read.

An alpha memory holds entries ``(triple, ts, values[, source])``, a beta memory tokens
(layouts in ``tokens.py``; only an entailed triple pays for its entry's ``source``, see
``evidence.py``). Both are a ``Memory``: items indexed by the join key of the join nodes
that read them (a dict of buckets, the key read by ``key_reader``, the one reader of the
whole network), streamed items also kept in arrival order in ``expiry`` so that garbage
collection pops exactly what expired and never scans (3.7). Static items (``ts == -1``)
are never put in ``expiry``.
"""
from __future__ import annotations

from collections import deque
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .tokens import END, ROW, TIME, TRIPLE, VALUES, Entry, Triple

if TYPE_CHECKING:
    from .alpha import AlphaShape

KeyReader = Callable[[Sequence[str]], Any]


# No join variable: every item has the empty key (slicing a tuple gives a tuple).
_NO_KEY: KeyReader = itemgetter(slice(0, 0))


def key_reader(positions: tuple[int, ...]) -> KeyReader:
    """How a memory reads its join key from a sequence of values (an entry's values, a
    token's row): the bare term for one join variable, a tuple for several, ``()`` for none.

    Every memory and every join node reads keys with a reader made here, so both sides of a
    join agree on a key exactly when the join variables do. It is always a C callable: a
    call costs about what telling a plain index from a reader at each use did, and the
    caller needs no branch.
    """
    if not positions:
        return _NO_KEY
    return itemgetter(*positions)


def values_reader(positions: tuple[int, ...]) -> Callable[[Sequence[str]], tuple[str, ...]]:
    """How a join level reads the values it appends to a row: always a tuple (a one-item
    slice for one new variable, ``()`` for none), so a row is ``parent_row + reader(values)``."""
    if len(positions) == 1:
        return itemgetter(slice(positions[0], positions[0] + 1))
    return key_reader(positions)


class Memory:
    """Items indexed by a join key, streamed ones also in arrival order: what alpha memories
    (entries) and beta memories (tokens) share. ``TIME_AT``/``VALUES_AT`` say where an
    item keeps its timestamp and the values its key is read from."""

    __slots__ = ("read_key", "key_at", "index", "expiry")
    TIME_AT = TIME
    VALUES_AT = VALUES

    def __init__(self, key_positions: tuple[int, ...]) -> None:
        self.read_key = key_reader(key_positions)
        self.key_at = key_positions[0] if len(key_positions) == 1 else None
        self.index: dict[Any, list[tuple]] = {}
        self.expiry: deque[tuple] = deque()

    def store(self, item: tuple, key: Any) -> None:
        """Index an item under its key; a streamed one also joins the arrival queue."""
        bucket = self.index.get(key)
        if bucket is None:
            self.index[key] = [item]
        else:
            bucket.append(item)
        if item[self.TIME_AT] >= 0:
            self.expiry.append(item)

    def drop_before(self, limit: int) -> int:
        """Pop the items whose time is below ``limit`` from the queue and the index; returns
        how many. Costs only what expires (3.7): nothing is scanned."""
        expiry = self.expiry
        index = self.index
        read_key = self.read_key
        time_at = self.TIME_AT
        values_at = self.VALUES_AT
        # A one-variable key (the usual memory) is read by subscript at ``key_at``, not by
        # ``read_key``, in a loop that runs for every item that expires (the saving is in
        # docs/benchmarks.md; test_engine_copies holds the two to the same keys).
        at = self.key_at
        dropped = 0
        popleft = expiry.popleft
        while expiry and expiry[0][time_at] < limit:
            item = popleft()
            key = item[values_at][at] if at is not None else read_key(item[values_at])
            bucket = index.get(key)
            if bucket is not None:
                if bucket[0] is item:  # items leave in arrival order: almost always first
                    if len(bucket) == 1:
                        del index[key]
                    else:
                        del bucket[0]
                elif remove_identical(bucket, item) and not bucket:
                    del index[key]
            dropped += 1
        return dropped

    def purge(self, keep: Callable[[tuple], bool]) -> int:
        """Remove the items ``keep`` rejects (removing a static triple); returns how many."""
        removed = 0
        for key in list(self.index):
            bucket = self.index[key]
            kept = [item for item in bucket if keep(item)]
            removed += len(bucket) - len(kept)
            if kept:
                self.index[key] = kept
            else:
                del self.index[key]
        if removed:
            alive = {id(item) for bucket in self.index.values() for item in bucket}
            self.expiry = deque(item for item in self.expiry if id(item) in alive)
        return removed

    def items(self) -> list[tuple]:
        """Every item: static ones first, then streamed ones in arrival order."""
        time_at = self.TIME_AT
        static = [item for bucket in self.index.values() for item in bucket if item[time_at] < 0]
        alive = {id(item) for bucket in self.index.values() for item in bucket}
        return static + [item for item in self.expiry if id(item) in alive]

    def __len__(self) -> int:
        return sum(len(b) for b in self.index.values())


class AlphaMemory(Memory):
    """Triples that passed one pattern's tests, in one scope, indexed by one join key.

    ``scope`` is the tuple of stream IRIs the memory listens to, with ``STATIC`` among them
    when it also reads static data (alone, for patterns outside any WINDOW). ``width`` is
    the widest window of the join nodes reading it: an entry is kept while
    ``ts + width >= now``. ``successors`` are the join nodes reading it, deepest first;
    ``activations`` is what ``add`` calls for them, ``(gate, node.right_activation)`` pairs: a node is
    right-activated only for keys in its ``gate`` index when it has one (a star level that
    nothing could use yet, ``beta.StarJoinNode.right_gate``).
    """

    __slots__ = ("scope", "shape", "key_positions", "successors", "activations", "width", "match")

    def __init__(self, scope: tuple[str, ...], shape: AlphaShape, key_positions: tuple[int, ...]) -> None:
        super().__init__(key_positions)
        self.scope = scope
        self.shape = shape
        self.key_positions = key_positions
        self.match = shape.match
        self.successors: list = []  # join nodes, deepest first (see Network.add)
        self.activations: list[tuple[dict | None, Callable[[Entry, Any], None]]] = []
        self.width = 0

    def refresh(self) -> None:
        """Recompute ``activations`` (after the network changed)."""
        # A list: iterating one costs fewer instructions than iterating a tuple.
        self.activations = [(node.right_gate(), node.right_activation) for node in self.successors]

    def add(self, triple: Triple, ts: int, source: Triple | None = None) -> None:
        """Store a triple that reached this memory and right-activate the join nodes.

        ``source``: the asserted triple ``triple`` was entailed from (None if asserted).
        ``Engine.push_many`` copies this for streamed triples (keep the two in step;
        ``test_engine_copies`` compares them); static data and catch-up use it.
        """
        match = self.match
        if match is None:
            values: Sequence[str] = triple
        else:
            values = match(triple)
            if values is None:
                return
        key = self.read_key(values)
        entry = (triple, ts, values) if source is None else (triple, ts, values, source)
        self.store(entry, key)
        for gate, right_activation in self.activations:
            if gate is None or key in gate:
                right_activation(entry, key)

    def expire(self, now: int) -> int:
        """Drop entries whose time is over (ts + width < now); returns how many."""
        return self.drop_before(now - self.width)

    def remove_static(self, triple: Triple) -> bool:
        """Remove a static entry (ts -1) for ``triple``; True if it was there."""
        values = triple if self.match is None else self.match(triple)
        if values is None:
            return False
        key = self.read_key(values)
        bucket = self.index.get(key)
        if not bucket:
            return False
        for i, entry in enumerate(bucket):
            if entry[TIME] < 0 and entry[TRIPLE] == triple:
                del bucket[i]
                if not bucket:
                    del self.index[key]
                return True
        return False

    def __repr__(self) -> str:
        return f"AlphaMemory(scope={self.scope!r}, shape={self.shape.canonical!r}, key={self.key_positions})"


class BetaMemory(Memory):
    """The tokens of a join node's parent, indexed by that node's join key (Doorenbos 2.3).

    Each join node that stores tokens owns the beta memory above it (``JoinNode.memory``),
    so the memory is hashed by exactly the key the node joins on. Tokens leave once
    ``end + width < now``: then ``start + width < now`` too and no child could use them.
    """

    __slots__ = ()
    TIME_AT = END
    VALUES_AT = ROW


def remove_identical(bucket: list, item: Any) -> bool:
    """Remove ``item`` (by identity) from a list; it is almost always at the front."""
    if bucket and bucket[0] is item:
        del bucket[0]
        return True
    for i, other in enumerate(bucket):
        if other is item:
            del bucket[i]
            return True
    return False
