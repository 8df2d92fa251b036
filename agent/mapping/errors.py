"""What the mapping compiler refuses: a mapping at compile time, a payload at run time.

``MappingError`` is raised once, when a gateway's config document is applied, and names
what is wrong (an RML term outside the supported subset, a bad template, a bad triples
map). ``PayloadRejected`` is raised per message and carries one of ``REASONS``, which the
agent counts: the reasons are few and fixed so that counters stay comparable across
gateways and versions; the detail says what exactly.
"""
from __future__ import annotations

OVERSIZED = "oversized"                 # more bytes than PayloadLimits.max_bytes
TOO_DEEP = "too_deep"                   # arrays/objects nested beyond PayloadLimits.max_depth
TOO_MANY_ENTRIES = "too_many_entries"   # more array items/object members (or SenML records) than allowed
MALFORMED = "malformed"                 # not UTF-8, not JSON, not SenML, an empty text payload
MISSING_KEY = "missing_key"             # a value the mapping requires (ew:required, a topic segment) is absent
WRONG_TYPE = "wrong_type"               # a value of the wrong JSON type for its use (e.g. "hot" as xsd:decimal)
NOT_FINITE = "not_finite"               # NaN, Infinity or a number beyond the float range
UNMAPPED_VALUE = "unmapped_value"       # a value an ew:mapValue table does not list
INVALID_TERM = "invalid_term"           # a value that makes no valid IRI, blank node or literal
TOO_MANY_TRIPLES = "too_many_triples"   # more triples than PayloadLimits.max_triples
NO_TRIPLES = "no_triples"               # the payload is well formed but nothing in it maps
REASONS = (OVERSIZED, TOO_DEEP, TOO_MANY_ENTRIES, MALFORMED, MISSING_KEY, WRONG_TYPE, NOT_FINITE,
           UNMAPPED_VALUE, INVALID_TERM, TOO_MANY_TRIPLES, NO_TRIPLES)


class MappingError(ValueError):
    """A mapping the compiler cannot turn into code; the message names the term, template or triples map."""


class PayloadRejected(Exception):
    """A message a compiled mapping refuses whole: ``reason`` is one of REASONS, ``detail`` says what."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail

    def __reduce__(self):  # keep reason and detail when pickled
        return (self.__class__, (self.reason, self.detail))
