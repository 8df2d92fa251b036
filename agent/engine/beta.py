"""The beta network: join nodes, beta memories and productions (Sparkwave 3.2, 3.5, 3.7).

A query is a left-deep chain of join nodes ending in a production (Doorenbos 2.3-2.4).
A join node joins its parent's tokens with its alpha memory's entries on the variables
they share; the records (entries, tokens) and their fields are described in ``tokens.py``.
Joins are hash joins: a node reads its alpha memory's bucket for a key and the bucket of
its parent's tokens for the same key, in its beta memory (``memories.BetaMemory``, hashed by
the node's join key); no memory is ever scanned. A token is stored only where a child
reads it.

Windows are per token (3.5), which is what lets patterns with different windows share
join nodes:

* A node whose chain so far lies in one window (or in none) is *uniform*: a token exists
  only while ``end - start <= width``. A shared uniform node keeps tokens for the widest
  window among the patterns that use it; every child (join node or production) checks the
  width of its own patterns again.
* A node whose chain mixes windows (a query with several ``WINDOW`` blocks) is *layered*:
  the token also carries ``deadline = min(ts_i + width_i)`` over its streamed triples, the
  width being that of each triple's own window, and exists only while ``end <= deadline``.
  In words: when the match's last triple arrives, every triple must still be inside its
  own window (RSP-QL's windows evaluated at that instant). Layered nodes are shared only
  between patterns whose windows have the same widths level by level.

Logically, expiry never matters for correctness: every join checks the interval.

There are two kinds of join node. A ``JoinNode`` keeps its parent's tokens in its beta
memory. A ``StarJoinNode`` is a level of a *star*, a run of patterns joined on one variable
from the first (``?o a :Offer . ?o :price ?p . ?o :vendor ?v``, the usual shape of an
observation or an offer): its alpha memories are already indexed by that variable, so it
keeps no tokens; when an entry arrives, the tokens above it for that key are recomputed
from the alpha memories of the levels above (``StarJoinNode.tokens``) instead of being
stored and expired level by level. Only uniform levels are star levels, and only from
the first pattern down, so every token is still the same linked tuple, built at most once
per match and never stored for nothing.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .memories import AlphaMemory, BetaMemory, KeyReader, key_reader, values_reader
from .match import Match
from .tokens import (
    DEADLINE, END, NO_DEADLINE, NO_END, NO_START, ROW, START, TIME, TOP, TOPS, VALUES, Entry, Token, widen,
)

Filter = Callable[[Sequence[str]], bool]
ValuesReader = Callable[[Sequence[str]], tuple]
# What a star recomputes its tokens from, per level (kept as separate tuples: unpacking one
# wide tuple per level costs more than the rest of the loop): how the level reads its new
# values, ``(new_at, new_values)``, and what it checks, ``(filters, width)``.
StarRead = tuple["int | None", ValuesReader]
StarCheck = tuple[tuple[Filter, ...], int]


class BetaNode:
    """What every join node does: make tokens, hand them to its children and productions.

    ``read_key`` reads this node's join key from a parent token's row, at ``join_slots``
    (the alpha memory reads the same key from an entry's values; both readers come from
    ``memories.key_reader``). ``new_values`` reads the values this level appends to the row, and
    ``new_at`` is the one position it reads when there is one (the usual level): the
    per-token loops then write ``(values[new_at],)``, which costs half a call of the reader
    (a one-item slice). ``memory`` is the beta memory of the parent's tokens, or None where
    the node keeps none (a first level, a star level).
    """

    __slots__ = (
        "ident", "parent", "alpha", "depth", "join_slots", "read_key", "new_at", "new_values", "filters",
        "uniform", "width", "children", "productions", "users", "memory", "outputs",
    )

    def __init__(
        self,
        ident: tuple,
        parent: BetaNode | None,
        alpha: AlphaMemory,
        depth: int,
        join_slots: tuple[int, ...],
        new_positions: tuple[int, ...],
        filters: Sequence[Filter],
        uniform: bool,
    ) -> None:
        self.ident = ident
        self.parent = parent
        self.alpha = alpha
        self.depth = depth
        self.join_slots = join_slots  # the row slots of the join variables, in key order
        self.read_key = key_reader(join_slots)
        self.new_at = new_positions[0] if len(new_positions) == 1 else None
        self.new_values = values_reader(new_positions)
        self.filters = tuple(filters)
        self.uniform = uniform
        # The widest window of the users: how long a uniform node's tokens may span, and how
        # long its beta memory keeps its parent's tokens.
        self.width = 0
        self.children: list[BetaNode] = []
        self.productions: list[Production] = []
        self.users: dict[str, int] = {}  # query name -> the width this node uses for it
        self.memory: BetaMemory | None = None
        # Set by refresh(), for emit(): per child, (its key reader, its beta memory or None,
        # its alpha memory's index, its left activation).
        self.outputs: list[tuple[KeyReader, BetaMemory | None, dict, Callable[[Token, Any], None]]] = []

    def refresh(self) -> None:
        """Recompute what activation precomputes (after the network changed)."""
        self.outputs = [
            (c.read_key, c.memory, c.alpha.index, c.left_activation) for c in self.children
        ]

    def right_gate(self) -> dict | None:
        """The index whose keys alone are worth a right activation (None: every key)."""
        return None

    # -- activation ---------------------------------------------------------------------

    def right_activation(self, entry: Entry, key: Any) -> None:
        """A new entry in the alpha memory: join it with every parent token of its key.
        Each node type defines its own (JoinNode from its parents' beta memory, StarJoinNode
        by recomputing from the alpha memories): this base class is never instantiated."""
        raise NotImplementedError

    def left_activation(self, parent: Token, key: Any) -> None:
        """A new parent token: join it with every alpha entry of its key."""
        bucket = self.alpha.index.get(key)
        if not bucket:
            return
        if self.uniform:
            tokens = extend((parent,), bucket, self.new_at, self.new_values, self.filters, self.width, None)
        else:
            tokens = self._layered(parent, bucket)
        for token in tokens:
            self.emit(token)

    def _layered(self, parent: Token, entries: Sequence[Entry]) -> list[Token]:
        """Extend a token on a chain over several windows. Only JoinNode is ever layered
        (``uniform`` is False); StarJoinNode is always uniform and never gets here."""
        raise NotImplementedError

    def emit_joined(self, parents: Sequence[Token], entry: Entry) -> None:
        """Join uniform parent tokens with one new entry and emit each token: the right
        activation of every uniform node.

        ``extend`` for one entry, written out (keep in step; ``test_engine_copies`` compares
        the two): it runs for every entry that reaches a join, and the list and the call
        ``extend`` would add cost more than the rest of it."""
        ts = entry[TIME]
        values = entry[VALUES]
        new_at = self.new_at
        add = (values[new_at],) if new_at is not None else self.new_values(values)
        width = self.width
        filters = self.filters
        for parent in parents:
            prow, _, _, start, end = parent
            # tokens.widen(), written out (keep in step)
            if ts >= 0:
                if ts < start:
                    start = ts
                if ts > end:
                    end = ts
            if end - start > width:
                continue
            row = prow + add
            for test in filters:
                if not test(row):
                    break
            else:
                self.emit((row, parent, entry, start, end))

    def emit(self, token: Token) -> None:
        """Store a new token where a child reads it, left-activate them, then fire productions."""
        row = token[ROW]
        for read_key, memory, alpha_index, left_activation in self.outputs:
            key = read_key(row)
            if memory is not None:
                # BetaMemory.store, written out (keep in step): once per token stored.
                index = memory.index
                bucket = index.get(key)
                if bucket is None:
                    index[key] = [token]
                else:
                    bucket.append(token)
                if token[END] >= 0:
                    memory.expiry.append(token)
            if key in alpha_index:  # most new tokens find nothing yet: skip the call
                left_activation(token, key)
        for production in self.productions:
            production.fire(token)

    # -- maintenance (not per triple) ---------------------------------------------------

    def current_tokens(self, skip: set[int]) -> list[Token] | None:
        """This node's tokens now, for a new child (``skip``: ids of new children): those
        an existing storing child holds; None if none does."""
        for child in self.children:
            if id(child) not in skip and child.memory is not None:
                return child.memory.items()
        return None

    def adopt(self, tokens: list[Token]) -> None:
        """Take existing parent tokens (a new child of an existing node) and join them."""
        read_key = self.read_key
        if self.memory is not None:
            for token in tokens:
                self.memory.store(token, read_key(token[ROW]))
        for token in tokens:
            self.left_activation(token, read_key(token[ROW]))

    def expire(self, now: int) -> int:
        """Drop stored parent tokens no child can use any more; returns how many."""
        if self.memory is None:
            return 0
        return self.memory.drop_before(now - self.width)

    def purge(self, keep: Callable[[Token], bool]) -> int:
        """Remove the stored tokens ``keep`` rejects (removing a static triple)."""
        return 0 if self.memory is None else self.memory.purge(keep)

    def token_count(self) -> int:
        return 0 if self.memory is None else len(self.memory)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(depth={self.depth}, users={sorted(self.users)}, alpha={self.alpha!r})"


class JoinNode(BetaNode):
    """A join node that stores its parent's tokens in its beta memory (or, first in its
    chain, joins with the top token alone); uniform or layered (module docstring)."""

    __slots__ = ("level_width", "parent_uniform", "prefix_width")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if self.parent is not None:
            self.memory = BetaMemory(self.join_slots)
        self.level_width: int | None = None  # layered: this level's window (None: static)
        self.parent_uniform = False  # layered: the parent's deadline must be derived from start
        self.prefix_width = 0  # layered with a uniform parent: the parent's window width

    def right_activation(self, entry: Entry, key: Any) -> None:
        if self.memory is None:
            parents: Sequence[Token] = TOPS
        else:
            parents = self.memory.index.get(key)
            if not parents:
                return
        if self.uniform:
            self.emit_joined(parents, entry)
            return
        for parent in parents:
            for token in self._layered(parent, (entry,)):
                self.emit(token)

    def _layered(self, parent: Token, entries: Sequence[Entry]) -> list[Token]:
        """Extend a token in a chain over several windows (see the module docstring)."""
        pstart = parent[START]
        if self.parent_uniform:
            deadline = pstart + self.prefix_width if pstart != NO_START else NO_DEADLINE
        else:
            deadline = parent[DEADLINE]
        out = []
        for entry in entries:
            ts = entry[TIME]
            start, end = widen(pstart, parent[END], ts)
            base = deadline
            if ts >= 0 and self.level_width is not None and ts + self.level_width < base:
                base = ts + self.level_width
            if end > base:
                continue
            row = parent[ROW] + self.new_values(entry[VALUES])
            for test in self.filters:
                if not test(row):
                    break
            else:
                out.append((row, parent, entry, start, end, base))
        return out


class StarJoinNode(BetaNode):
    """A level of a star (module docstring): joined on the star variable, keeps no tokens.

    The first level of a chain with a variable is one too (its alpha memory is indexed by
    its first variable, ``star_slot`` 0); a level below a star level joins the star when its
    one join variable is the star's. Its rules, all here:

    * the tokens above a level are recomputed from the star's alpha memories (``tokens``);
    * an entry whose tokens nobody could use yet is not worth a right activation: when
      every child is a star level and there is no production, only keys a child's alpha
      memory holds matter (``right_gate`` for one child, tested by the alpha memory before
      the call; ``quiet`` for several, tested in ``right_activation``);
    * a new child of a star level gets its tokens recomputed (``current_tokens``).
    """

    __slots__ = ("star_slot", "path", "indexes", "reads", "checks", "gate", "quiet")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        parent = self.parent
        above: tuple[StarJoinNode, ...] = parent.path if isinstance(parent, StarJoinNode) else ()
        self.star_slot: int = parent.star_slot if isinstance(parent, StarJoinNode) else 0
        self.path: tuple[StarJoinNode, ...] = (*above, self)
        # Set by refresh(), per level of ``path``: its alpha index, its StarRead, its StarCheck.
        self.indexes: tuple[dict, ...] = ()
        self.reads: tuple[StarRead, ...] = ()
        self.checks: tuple[StarCheck, ...] = ()
        self.gate: dict | None = None
        self.quiet: tuple[dict, ...] | None = None

    @staticmethod
    def continues(
        parent: BetaNode | None, uniform: bool, join_slots: tuple[int, ...], new_positions: tuple[int, ...],
    ) -> bool:
        """Whether a level with these properties is a star level."""
        if not uniform:
            return False
        if parent is None:
            return bool(new_positions)
        return isinstance(parent, StarJoinNode) and join_slots == (parent.star_slot,)

    def refresh(self) -> None:
        super().refresh()
        self.indexes = tuple(n.alpha.index for n in self.path)
        self.reads = tuple((n.new_at, n.new_values) for n in self.path)
        self.checks = tuple((n.filters, n.width) for n in self.path)
        quiet = None
        if self.children and not self.productions and all(isinstance(c, StarJoinNode) for c in self.children):
            quiet = tuple(c.alpha.index for c in self.children)
        self.gate = quiet[0] if quiet is not None and len(quiet) == 1 else None
        self.quiet = quiet if self.gate is None else None

    def right_gate(self) -> dict | None:
        """The usual star level has one star child: an entry is worth activating this level
        only if that child's alpha memory already holds its key (the alpha memory tests
        this before the call, which most entries of a star never make)."""
        return self.gate

    def right_activation(self, entry: Entry, key: Any) -> None:
        quiet = self.quiet
        if quiet is not None:
            for index in quiet:
                if key in index:
                    break
            else:
                return
        parent = self.parent
        if parent is None:
            parents: Sequence[Token] = TOPS
        else:
            parents = parent.tokens(key, entry)  # type: ignore[union-attr]
            if not parents:
                return
        self.emit_joined(parents, entry)

    def tokens(self, key: Any, exclude: Entry | None) -> Sequence[Token]:
        """This level's tokens whose star variable is ``key``, recomputed from the alpha
        memories of the star up to here. ``exclude`` is the entry being right-activated
        below: a combination using it higher up is made by that higher level's own
        activation, so leaving it out here makes every match once."""
        buckets = []
        for index in self.indexes:  # every level must have something for the key
            bucket = index.get(key)
            if not bucket:
                return ()
            buckets.append(bucket)
        if sum(map(len, buckets)) == len(buckets):
            return _one_entry_star(self.reads, self.checks, buckets, exclude)
        tokens: Sequence[Token] = TOPS
        for (new_at, new_values), (filters, width), bucket in zip(self.reads, self.checks, buckets):
            tokens = extend(tokens, bucket, new_at, new_values, filters, width, exclude)
            if not tokens:
                break
        return tokens

    def current_tokens(self, skip: set[int]) -> list[Token] | None:
        stored = super().current_tokens(skip)
        if stored is not None:
            return stored
        tokens = [t for key in list(self.alpha.index) for t in self.tokens(key, None)]
        tokens.sort(key=lambda t: t[END])  # static-only first (end -1), then by time, as stored
        return tokens


def extend(
    parents: Sequence[Token], entries: Sequence[Entry], new_at: int | None, new_values: ValuesReader,
    filters: Sequence[Filter], width: int, exclude: Entry | None,
) -> list[Token]:
    """Join uniform tokens with alpha entries of their key: every pair whose interval fits
    ``width`` and passes ``filters`` (``exclude``: an entry to leave out, see
    ``StarJoinNode.tokens``). The join of every uniform level: one loop for all of them."""
    out: list[Token] = []
    for parent in parents:
        prow, _, _, pstart, pend = parent
        for entry in entries:
            if entry is exclude:
                continue
            ts = entry[TIME]
            # tokens.widen(), written out: this loop runs for every token made.
            start = pstart
            end = pend
            if ts >= 0:
                if ts < start:
                    start = ts
                if ts > end:
                    end = ts
            if end - start > width:
                continue
            values = entry[VALUES]
            row = prow + ((values[new_at],) if new_at is not None else new_values(values))
            for test in filters:
                if not test(row):
                    break
            else:
                out.append((row, parent, entry, start, end))
    return out


def _one_entry_star(
    reads: Sequence[StarRead], checks: Sequence[StarCheck], buckets: list[list[Entry]], exclude: Entry | None,
) -> list[Token]:
    """``StarJoinNode.tokens`` when every level holds one entry for the key (the usual
    star: one observation, one triple a property): at most one token, built in one pass.
    The same tokens as the ``extend`` chain but for their rows (``test_engine_copies``).

    Every token of the chain gets the whole row, not its own prefix of it: the levels
    above are only ever reached through ``parent`` links, for their entries, and a FILTER
    reads the slots of its own level, which the whole row holds at the same places. That
    saves a tuple and its copying per level, in time and in peak memory where such partial
    matches wait for the next pattern (docs/benchmarks.md, *Stars keep no tokens*)."""
    values: list[str] = []
    for (new_at, new_values), (entry,) in zip(reads, buckets):
        if entry is exclude:
            return []
        if new_at is not None:
            values.append(entry[VALUES][new_at])
        else:
            values.extend(new_values(entry[VALUES]))
    row = tuple(values)
    token = TOP
    start = NO_START
    end = NO_END
    for (filters, width), (entry,) in zip(checks, buckets):
        ts = entry[TIME]
        # tokens.widen(), written out as in extend(): a call per level costs more than it.
        if ts >= 0:
            if ts < start:
                start = ts
            if ts > end:
                end = ts
        if end - start > width:
            return []
        for test in filters:
            if not test(row):
                return []
        token = (row, token, entry, start, end)
    return [token]


class Production:
    """The end of a query's chain (Doorenbos' p-node): checks the query's own window and
    emits matches."""

    __slots__ = ("name", "uniform", "width", "projection", "names", "getter", "deliver", "clock", "count")

    def __init__(
        self,
        name: str,
        uniform: bool,
        width: int,
        projection: Sequence[tuple[str, int]],
        deliver: Callable[[Match], None],
        clock: Callable[[], int],
    ) -> None:
        self.name = name
        self.uniform = uniform
        self.width = width
        self.projection = tuple(projection)
        self.names = tuple(name for name, _ in self.projection)
        self.getter = values_reader(tuple(slot for _, slot in self.projection))
        self.deliver = deliver
        self.clock = clock
        self.count = 0

    def fire(self, token: Token) -> None:
        """A token reached the end of the chain: a match if it is in this query's window now."""
        # Callables kept in slots are read into locals first: a slot called like a method
        # is looked up the slow way on every call.
        clock = self.clock
        start = token[START]
        end = token[END]
        if start != NO_START:
            if self.uniform:
                if end - start > self.width or start + self.width < clock():
                    return
            else:
                deadline = token[DEADLINE]
                if end > deadline or deadline < clock():
                    return
        else:
            start = end = -1
        self.count += 1
        getter = self.getter
        deliver = self.deliver
        deliver(Match(self.name, dict(zip(self.names, getter(token[ROW]))), start, end, token))


__all__ = ["BetaNode", "JoinNode", "StarJoinNode", "Production", "extend", "NO_START", "NO_END", "NO_DEADLINE"]
