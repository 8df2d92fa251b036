"""The two records the Rete network passes around: alpha-memory entries and tokens.

Both are plain tuples, not objects: millions of them are alive at once in a long window,
and a tuple is the smallest and fastest record CPython has. Their fields are read by the
names below everywhere; the per-triple loops unpack a token instead (``row, _, _, start,
end = token``), which names the fields too and costs less than reading them one by one.

An **entry** (what an alpha memory holds, Sparkwave 3.2)::

    (triple, ts, values)            an asserted triple
    (triple, ts, values, source)    an entailed triple, with the asserted one it came from

``values`` is the sequence join nodes read variables from: the triple itself for a plain
pattern (no copy), the tuple of the pattern's variable values for a quoted-triple pattern.
``ts`` is -1 for static triples.

A **token** (a partial match, Doorenbos 2.3; with Sparkwave's interval, 3.5)::

    (row, parent, entry, start, end)              on a uniform chain (one window, or none)
    (row, parent, entry, start, end, deadline)    on a layered chain (several windows)

``row`` holds the values of the variables bound so far, one slot per variable in the
order the chain binds them; ``parent`` is the token one level up (``TOP`` above the first
level) and ``entry`` the alpha entry this level added, shared, not copied. ``start``/``end``
are the earliest and latest timestamps of its streamed triples (``NO_START``/``NO_END``
while it holds static triples only); ``deadline`` is ``min(ts_i + width_i)`` over its
streamed triples, each with its own window's width (``beta.py``).
"""
from __future__ import annotations

from edgewave.shared.ntriples import Triple  # noqa: F401  (an entry's first field; the engine imports it from here)

# Entry fields.
TRIPLE, TIME, VALUES, SOURCE = range(4)
Entry = tuple  # (Triple, int, Sequence[str]) or (Triple, int, Sequence[str], Triple)

# Token fields.
ROW, PARENT, ENTRY, START, END, DEADLINE = range(6)
Token = tuple

NO_START = 1 << 62  # start of a token made of static triples only
NO_END = -1
NO_DEADLINE = 1 << 62

# Doorenbos' dummy top token: the parent of every first-level token, so the first level
# joins like every other (with the one token above it) and a token chain ends here.
TOP: Token = ((), None, None, NO_START, NO_END)
TOPS: tuple[Token, ...] = (TOP,)


def widen(start: int, end: int, ts: int) -> tuple[int, int]:
    """A token's interval with one more triple (Sparkwave 3.5): static triples (ts -1) do
    not move it. The per-triple loops of ``beta.py`` write this out; ``test_engine_copies``
    holds them to it."""
    if ts >= 0:
        if ts < start:
            start = ts
        if ts > end:
            end = ts
    return start, end


def chain_entries(token: Token) -> list[Entry]:
    """The entries of a token's chain, first level first."""
    entries = []
    while token is not TOP:
        entries.append(token[ENTRY])
        token = token[PARENT]
    entries.reverse()
    return entries

