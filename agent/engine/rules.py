"""Chained rules: ``REGISTER RSTREAM <stream> AS CONSTRUCT { template } ... WHERE { ... }``
(EP-SPARQL's CONSTRUCT rules, INSTANS' layered queries; docs/engine.md, "Chained rules").

A rule is a pattern like any other, of any kind (conjunctive, temporal, an absence, with a
consumption strategy): its matches are reported as usual, and each also fills the template
with its bindings (a blank node of the template is a fresh one per match; a triple with an
unbound variable, or a literal as subject, is left out, as in SPARQL's CONSTRUCT). The
triples it makes re-enter the engine on the stream the rule's name names, at the time of
the match's end, once the triple that completed the match has gone through
(``Network.derived``, pushed by the engine): the epsilon-network entails from them, and any
pattern reading that stream, another rule included, matches them.

Derivation is bounded: a made triple is one step deeper than the deepest triple of the
match that made it (a triple from the input is at depth 0), and a match that would make
triples deeper than ``MAX_DEPTH`` makes none (``Network.derivations_cut`` counts them), so a
rule that feeds itself stops. ``Network.depths`` keeps, for each made triple, its depth and
the match that made it, which is how a later match names the rule matches it rests on
(``Match.made_from``). It is keyed by the made triple *object* (its ``id``, the object kept
beside it): a rule may restate a triple that also arrived from the input at the same time,
and that arrival is still at depth 0. The engine keeps the pushed object in every entry
it makes of it (as the entry's triple, or as the source of one entailed from it).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

from .match import Match
from .query import TriplePattern, is_var
from .tokens import Triple

MAX_DEPTH = 8


def made_by(depths: dict[int, tuple[Triple, int, int, Match]], triple: Triple) -> tuple[int, Match] | None:
    """(depth, maker) of ``triple`` when a rule made that very object, else None (an input triple)."""
    found = depths.get(id(triple))
    return (found[2], found[3]) if found is not None and found[0] is triple else None


_fresh = itertools.count()


class Rule:
    """What a rule adds to its query's productions: called with each match instead of the
    engine's delivery, it delivers the match and queues the triples the template makes."""

    __slots__ = ("template", "stream", "network", "deliver")

    def __init__(self, template: Sequence[TriplePattern], stream: str, network: Any,
                 deliver: Callable[[Match], None]) -> None:
        self.template = tuple((tp.s, tp.p, tp.o) for tp in template)
        self.stream = stream
        self.network = network  # its ``derived`` queue, ``depths`` and ``derivations_cut``
        self.deliver = deliver

    def __call__(self, match: Match) -> None:
        self.deliver(match)
        network = self.network
        depths = network.depths
        depth = 1 + max(((made_by(depths, triple) or (0,))[0] for triple, _ in match.arrivals()), default=0)
        if depth > MAX_DEPTH:
            network.derivations_cut += 1
            return
        made = self.instantiate(match.bindings)
        if not made:
            return
        ts = max(match.end, 0)
        for triple in made:
            depths[id(triple)] = (triple, ts, depth, match)
        network.derived.append((self.stream, ts, made))

    def instantiate(self, bindings: dict[str, str]) -> list[Triple]:
        """The template's triples for one match."""
        blanks: dict[str, str] = {}
        made = []
        for parts in self.template:
            triple = []
            for term in parts:
                if is_var(term):
                    name = term[1:]
                    if name.startswith("_:"):  # a blank node of the template: fresh per match
                        value = blanks.get(name)
                        if value is None:
                            value = blanks[name] = f"_:rule{next(_fresh)}"
                    else:
                        value = bindings.get(name)
                        if value is None:
                            break  # unbound: the triple is left out
                    triple.append(value)
                else:
                    triple.append(term)
            else:
                if triple[0][0] != '"':
                    made.append((triple[0], triple[1], triple[2]))
        return made


__all__ = ["MAX_DEPTH", "Rule"]
