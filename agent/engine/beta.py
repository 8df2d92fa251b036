"""The beta network: join nodes, tokens and productions (Sparkwave 3.2, 3.5, 3.7).

A token is a plain tuple (no object per partial match)::

    (row, parent, entry, start, end)              uniform nodes (see below)
    (row, parent, entry, start, end, deadline)    layered nodes

``row`` holds the values of the variables bound so far, in slot order (one slot per
variable, assigned along the join chain), so join keys and FILTERs read a slot directly
(a star's tokens, built in one go, share their last token's row: see ``_one_entry_star``);
``parent``/``entry`` link the partial match the way the paper draws it (a token is its
parent plus one triple; ``entry`` is the alpha memory's ``(triple, ts, values)``, shared,
not copied). ``start``/``end`` is the token's interval, updated
incrementally from the parent's and the new triple's timestamp (the formula of 3.5);
static triples (ts -1) do not move it, and a token of static triples only has
``start == NO_START`` and ``end == NO_END``.

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

Joins are hash joins: a join node keeps its parent's tokens in ``left_index`` (a dict from
the join key to a bucket) and reads its alpha memory's buckets by the same key; no memory
is ever scanned. A token is stored by a node only if the node has children. ``left_expiry``
lists the stored streamed tokens in creation order; a token is dropped once
``end + width < now`` (then ``start + width < now`` too, so no child could use it).
Logically, expiry never matters for correctness: every join checks the interval.

Stars (a run of patterns joined on one variable from the root, ``?o a :Offer . ?o :price
?p . ?o :vendor ?v``, the usual shape of an observation or an offer) keep no tokens: their
alpha memories are already indexed by that variable, so a node on such a run is *virtual*:
its parent's tokens for a key are recomputed from those memories when an entry arrives
(``tokens_for``) instead of being stored and expired level by level. An entry that no
child could use yet (the next pattern's memory has nothing for its key) costs one dict
lookup. Only uniform nodes are virtual, and only from the root down, so every token is
still the same linked tuple, built at most once per match and never stored for nothing.
"""
from __future__ import annotations

from collections import deque
from operator import itemgetter
from typing import Any, Callable, Sequence

from .alpha import AlphaMemory, Entry, drop_expired, read_key
from .match import Match

ROW, PARENT, ENTRY, START, END, DEADLINE = range(6)
NO_START = 1 << 62  # start of a token made of static triples only
NO_END = -1
NO_DEADLINE = 1 << 62

Token = tuple


class JoinNode:
    """One level of a join chain: its alpha memory joined with its parent's tokens."""

    __slots__ = (
        "ident", "parent", "alpha", "depth", "row_key", "new_n", "new_get", "filters",
        "uniform", "width", "level_width", "parent_uniform", "prefix_width", "gc_width",
        "left_index", "left_expiry", "children", "productions", "users", "only_child",
        "virtual", "star_slot", "star_path", "star_levels", "quiet", "quiet_index",
    )

    def __init__(
        self,
        ident: tuple,
        parent: "JoinNode | None",
        alpha: AlphaMemory,
        depth: int,
        row_key: Any,
        new_positions: tuple[int, ...],
        filters: Sequence[Callable[[Sequence[str]], bool]],
        uniform: bool,
    ) -> None:
        self.ident = ident
        self.parent = parent
        self.alpha = alpha
        self.depth = depth
        self.row_key = row_key
        self.new_n = len(new_positions)
        if self.new_n == 1:
            self.new_get: Any = new_positions[0]
        elif self.new_n:
            self.new_get = itemgetter(*new_positions)
        else:
            self.new_get = None
        self.filters = tuple(filters)
        self.uniform = uniform
        self.width = 0  # uniform nodes: the widest window of the users
        self.level_width: int | None = None  # layered: this level's window (None: static)
        self.parent_uniform = False  # layered: the parent's deadline must be derived from start
        self.prefix_width = 0  # layered with a uniform parent: the parent's window width
        self.gc_width = 0
        self.left_index: dict[Any, list[Token]] = {}
        self.left_expiry: deque[Token] = deque()
        self.children: list[JoinNode] = []
        self.productions: list[Production] = []
        self.users: dict[str, int] = {}  # query name -> the width this node uses for it
        self.only_child: JoinNode | None = None  # set by refresh() when the fast path applies
        # Stars (module docstring): ``virtual`` nodes recompute their parent's tokens;
        # ``star_slot`` is the row slot whose value keys this node's alpha memory when its
        # own tokens can be recomputed that way (None otherwise).
        self.virtual = False
        self.star_slot: int | None = None
        self.star_path: tuple[JoinNode, ...] = ()  # root .. self, where star_slot is set
        if uniform:
            if parent is None:
                self.star_slot = 0 if self.new_n else None
            elif parent.star_slot is not None and row_key.__class__ is int and row_key == parent.star_slot:
                self.virtual = True
                self.star_slot = row_key
        if self.star_slot is not None:
            self.star_path = (*(parent.star_path if parent is not None else ()), self)
        self.star_levels: tuple = ()  # set by refresh(): what tokens_for reads of each level
        self.quiet: tuple[dict, ...] | None = None  # set by refresh()
        self.quiet_index: dict | None = None

    def refresh(self) -> None:
        """Recompute what the hot path precomputes (after the network changed)."""
        fast = (self.uniform and len(self.children) == 1 and not self.productions and not self.filters
                and not self.children[0].virtual)
        self.only_child = self.children[0] if fast else None
        # Nothing needs this node's tokens unless a production or a storing child does, or a
        # virtual child already holds an entry for the key (see right()).
        lazy = self.children and not self.productions and all(c.virtual for c in self.children)
        self.quiet = tuple(c.alpha.index for c in self.children) if lazy else None
        # The usual star level: one virtual child; Engine.push tests it before calling.
        self.quiet_index = self.quiet[0] if self.quiet is not None and len(self.quiet) == 1 else None
        self.star_levels = tuple((n.alpha.index, n.new_n, n.new_get, n.filters, n.width) for n in self.star_path)

    # -- activation ---------------------------------------------------------------------

    def right(self, entry: Entry, key: Any) -> None:
        """A new entry in the alpha memory: join it with every parent token of its key."""
        quiet = self.quiet
        if quiet is not None:
            for index in quiet:
                if key in index:
                    break
            else:
                return
        ts = entry[1]
        n = self.new_n
        if n == 1:
            add = (entry[2][self.new_get],)
        elif n == 0:
            add = ()
        else:
            add = self.new_get(entry[2])
        if self.parent is None:
            for test in self.filters:
                if not test(add):
                    return
            if ts >= 0:
                self.emit((add, None, entry, ts, ts) if self.uniform else (add, None, entry, ts, ts, NO_DEADLINE))
            else:
                self.emit((add, None, entry, NO_START, NO_END) if self.uniform else (add, None, entry, NO_START, NO_END, NO_DEADLINE))
            return
        bucket = self.parent.tokens_for(key, entry) if self.virtual else self.left_index.get(key)
        if not bucket:
            return
        if not self.uniform:
            for parent in bucket:
                token = self._layered(parent, entry, add)
                if token is not None:
                    self.emit(token)
            return
        width = self.width
        child = self.only_child
        if child is None:
            filters = self.filters
            for parent in bucket:
                start = parent[3]
                end = parent[4]
                if ts >= 0:
                    if ts < start:
                        start = ts
                    if ts > end:
                        end = ts
                if end - start > width:
                    continue
                row = parent[0] + add
                for test in filters:
                    if not test(row):
                        break
                else:
                    self.emit((row, parent, entry, start, end))
            return
        # The common case, emit() inlined: one child, no production, no filter here.
        reader = child.row_key
        index = child.left_index
        expiry = child.left_expiry
        alpha_index = child.alpha.index
        for parent in bucket:
            start = parent[3]
            end = parent[4]
            if ts >= 0:
                if ts < start:
                    start = ts
                if ts > end:
                    end = ts
            if end - start > width:
                continue
            row = parent[0] + add
            token = (row, parent, entry, start, end)
            if reader is None:
                k = None
            elif reader.__class__ is int:
                k = row[reader]
            else:
                k = reader(row)
            b = index.get(k)
            if b is None:
                index[k] = [token]
            else:
                b.append(token)
            if end >= 0:
                expiry.append(token)
            if k in alpha_index:
                child.left(token, k)

    def left(self, parent: Token, key: Any) -> None:
        """A new parent token: join it with every alpha entry of its key."""
        bucket = self.alpha.index.get(key)
        if not bucket:
            return
        n = self.new_n
        get = self.new_get
        if not self.uniform:
            for entry in bucket:
                values = entry[2]
                add = (values[get],) if n == 1 else (get(values) if n else ())
                token = self._layered(parent, entry, add)
                if token is not None:
                    self.emit(token)
            return
        for token in extend((parent,), bucket, n, get, self.filters, self.width, None):
            self.emit(token)

    def _layered(self, parent: Token, entry: Entry, add: tuple) -> Token | None:
        """Extend a token in a chain over several windows (see the module docstring)."""
        start, end, prow = parent[3], parent[4], parent[0]
        if self.parent_uniform:
            base = start + self.prefix_width if start != NO_START else NO_DEADLINE
        else:
            base = parent[5]
        ts = entry[1]
        if ts >= 0:
            if ts < start:
                start = ts
            if ts > end:
                end = ts
            if self.level_width is not None and ts + self.level_width < base:
                base = ts + self.level_width
        if end > base:
            return None
        row = prow + add
        for test in self.filters:
            if not test(row):
                return None
        return (row, parent, entry, start, end, base)

    def emit(self, token: Token) -> None:
        """Store a new token for the children, left-activate them, then fire productions."""
        for child in self.children:
            reader = child.row_key
            if reader is None:
                key = None
            elif reader.__class__ is int:
                key = token[0][reader]
            else:
                key = reader(token[0])
            if child.virtual:  # recomputed when needed, never stored
                if key in child.alpha.index:
                    child.left(token, key)
                continue
            index = child.left_index
            bucket = index.get(key)
            if bucket is None:
                index[key] = [token]
            else:
                bucket.append(token)
            if token[4] >= 0:
                child.left_expiry.append(token)
            if key in child.alpha.index:  # most new tokens find nothing yet: skip the call
                child.left(token, key)
        for production in self.productions:
            production.fire(token)

    def tokens_for(self, key: Any, exclude: Entry | None) -> list[Token]:
        """This node's tokens whose star variable is ``key``, recomputed from the alpha
        memories up to the root (only where ``star_slot`` is set). ``exclude`` is the entry
        being right-activated below: a combination using it higher up is made by that
        higher level's own activation, so leaving it out here makes every match once."""
        levels = self.star_levels
        buckets = []
        for level in levels:  # every level must have something for the key
            bucket = level[0].get(key)
            if not bucket:
                return []
            buckets.append(bucket)
        if sum(map(len, buckets)) == len(buckets):
            return _one_entry_star(levels, buckets, exclude)
        _, n, get, filters, _ = levels[0]
        tokens: list[Token] = []
        for entry in buckets[0]:
            if entry is exclude:
                continue
            values = entry[2]
            row = (values[get],) if n == 1 else (get(values) if n else ())
            for test in filters:
                if not test(row):
                    break
            else:
                ts = entry[1]
                tokens.append((row, None, entry, ts, ts) if ts >= 0 else (row, None, entry, NO_START, NO_END))
        for (_, n, get, filters, width), bucket in zip(levels[1:], buckets[1:]):
            out = extend(tokens, bucket, n, get, filters, width, exclude)
            if not out:
                return out
            tokens = out
        return tokens

    def current_tokens(self, skip: set[int]) -> list[Token] | None:
        """This node's tokens now, for a new child (``skip``: ids of new children): those
        an existing storing child holds, or recomputed for a star; None if neither."""
        for child in self.children:
            if id(child) not in skip and not child.virtual:
                return child.stored_tokens()
        if self.star_slot is None:
            return None
        tokens = [t for key in list(self.alpha.index) for t in self.tokens_for(key, None)]
        tokens.sort(key=lambda t: t[4])  # static-only first (end -1), then by time, as stored
        return tokens

    # -- maintenance (not per triple) ---------------------------------------------------

    def expire(self, now: int) -> int:
        """Drop stored parent tokens no child can use any more; returns how many."""
        return drop_expired(self.left_expiry, self.left_index, self.row_key, now - self.gc_width,
                            time_at=END, values_at=ROW)

    def adopt(self, tokens: list[Token]) -> None:
        """Store existing parent tokens (a new child of an existing node) and join them."""
        if self.virtual:
            for token in tokens:
                self.left(token, read_key(self.row_key, token[0]))
            return
        for token in tokens:
            key = read_key(self.row_key, token[0])
            self.left_index.setdefault(key, []).append(token)
            if token[4] >= 0:
                self.left_expiry.append(token)
        for token in tokens:
            self.left(token, read_key(self.row_key, token[0]))

    def stored_tokens(self) -> list[Token]:
        """The parent tokens this node holds: static-only ones first, then by creation."""
        static = [t for b in self.left_index.values() for t in b if t[4] < 0]
        alive = {id(t) for b in self.left_index.values() for t in b}
        return static + [t for t in self.left_expiry if id(t) in alive]

    def purge(self, keep: Callable[[Token], bool]) -> int:
        """Remove the stored tokens ``keep`` rejects (removing a static triple)."""
        removed = 0
        for key in list(self.left_index):
            bucket = self.left_index[key]
            kept = [t for t in bucket if keep(t)]
            removed += len(bucket) - len(kept)
            if kept:
                self.left_index[key] = kept
            else:
                del self.left_index[key]
        if removed:
            alive = {id(t) for b in self.left_index.values() for t in b}
            self.left_expiry = deque(t for t in self.left_expiry if id(t) in alive)
        return removed

    def token_count(self) -> int:
        return sum(len(b) for b in self.left_index.values())

    def __repr__(self) -> str:
        return f"JoinNode(depth={self.depth}, users={sorted(self.users)}, alpha={self.alpha!r})"


def extend(
    parents: Sequence[Token], bucket: list[Entry], n: int, get: Any, filters: Sequence[Callable],
    width: int, exclude: Entry | None,
) -> list[Token]:
    """Join uniform tokens with alpha entries of their key: every pair whose interval fits
    ``width`` and passes ``filters`` (``n``/``get``: how the level reads its new values;
    ``exclude``: an entry to leave out, see ``JoinNode.tokens_for``)."""
    out: list[Token] = []
    for parent in parents:
        prow = parent[0]
        pstart = parent[3]
        pend = parent[4]
        for entry in bucket:
            if entry is exclude:
                continue
            ts = entry[1]
            start = pstart
            end = pend
            if ts >= 0:
                if ts < start:
                    start = ts
                if ts > end:
                    end = ts
            if end - start > width:
                continue
            if n == 1:
                row = prow + (entry[2][get],)
            elif n == 0:
                row = prow
            else:
                row = prow + get(entry[2])
            for test in filters:
                if not test(row):
                    break
            else:
                out.append((row, parent, entry, start, end))
    return out


def _one_entry_star(levels: tuple, buckets: list[list[Entry]], exclude: Entry | None) -> list[Token]:
    """``JoinNode.tokens_for`` when every level holds one entry for the key (the usual star:
    one observation, one triple a property): at most one token, built in one pass.

    Every token of the chain gets the whole row, not its own prefix of it: the levels
    above are only ever reached through ``parent`` links, for their entries, and a FILTER
    reads the slots of its own level, which the whole row holds at the same places. That
    saves a tuple and its copying per level: 1 % of a BSBM run's instructions, and 11 %
    of its peak memory at the 25 s window, where such partial matches wait for the next
    pattern."""
    values: list[str] = []
    for (_, n, get, _, _), (entry,) in zip(levels, buckets):
        if entry is exclude:
            return []
        if n == 1:
            values.append(entry[2][get])
        elif n:
            values.extend(get(entry[2]))
    row = tuple(values)
    token = None
    start = NO_START
    end = NO_END
    for (_, _, _, filters, width), (entry,) in zip(levels, buckets):
        # The interval update of 3.5, as in right() and extend(): written out in each of
        # these per-triple loops on purpose, since a call per level costs more than it.
        ts = entry[1]
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
    """The end of a query's chain: checks the query's own window and emits matches."""

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
        slots = [slot for _, slot in self.projection]
        self.getter: Any = None if not slots else slots[0] if len(slots) == 1 else itemgetter(*slots)
        self.deliver = deliver
        self.clock = clock
        self.count = 0

    def fire(self, token: Token) -> None:
        start = token[3]
        end = token[4]
        if start != NO_START:
            if self.uniform:
                if end - start > self.width or start + self.width < self.clock():
                    return
            else:
                deadline = token[5]
                if end > deadline or deadline < self.clock():
                    return
        else:
            start = end = -1
        row = token[0]
        get = self.getter
        if get is None:
            bindings = {}
        elif get.__class__ is int:
            bindings = {self.names[0]: row[get]}
        else:
            bindings = dict(zip(self.names, get(row)))
        self.count += 1
        self.deliver(Match(self.name, bindings, start, end, token))
