"""What made a match: its bindings, its window and the triples that contributed, for the evidence views.

The live feed's row of a match carries its bindings, the window interval and the
contributing triples as N-Triples statements, and (from agents that report it)
``entailed``: which of those triples the gateway entailed, each with the asserted
triple it came from and the schema axioms, in order (docs/ARCHITECTURE.md,
"Uplink events"). Entailed triples are marked and show that chain; an event
without the field (an older agent) shows the triples as they are. Per-triple
timestamps are shown where the row carries them.

Two kinds of match say more. An absence ("P, then no compatible Q within D")
carries ``expected``: Q's triple patterns with the match's bindings filled in, due
by the window's end; the view says what did not arrive and by when. A match that
used triples a chained rule constructed carries ``derived_from``: the event ids of
the rule matches that made them, each a link to that match's own evidence page.
The ids come from a gateway: only those of the event id form (``urn:edgewave:event:``)
become links.

One function serves the server-rendered evidence pages and the live page's panel
(which gets the same structure inside each server-sent event).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import timezone
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from edgewave.shared.events import EVENT_ID_PREFIX

from .terms import Naming

ENTAILMENT_FIELD = "entailed"
MAX_AXIOMS = 32


@dataclass
class TripleView:
    text: str
    entailed: bool = False
    axioms: list[str] = field(default_factory=list)
    time_ms: int | None = None
    source: str | None = None       # the asserted triple it was entailed from, when the event says


@dataclass
class RuleMatchLink:
    """A rule match a chained match was built from: its id, and the page of its evidence (None: not an event id)."""

    event_id: str
    href: str | None


def match_link(event_id: str) -> RuleMatchLink:
    """The link to a match's evidence page, for an id of the event id form only (the rest is escaped in the path)."""
    linkable = event_id.startswith(EVENT_ID_PREFIX)
    return RuleMatchLink(event_id, "/matches/" + quote(event_id, safe=":") if linkable else None)


@dataclass
class Evidence:
    event_id: str
    gateway: str
    pattern: str | None
    bindings: list[tuple[str, str]]
    window_start: int | None
    window_end: int | None
    emitted_at: int | None
    ingest_ms: int | None
    triples: list[TripleView]
    reports_entailment: bool
    """whether the event says which triples were entailed (older agents do not)"""
    expected: list[str] = field(default_factory=list)
    """an absence's missing triple patterns (``?name``: still unbound), due by ``window_end``"""
    derived_from: list[RuleMatchLink] = field(default_factory=list)
    """the rule matches whose constructed triples this match used"""

    @property
    def waited_ms(self) -> int | None:
        """How long after the match began the expected triples were still awaited (its deadline)."""
        if self.window_start is None or self.window_end is None:
            return None
        return self.window_end - self.window_start

    def as_item(self) -> dict[str, Any]:
        """The match as a live-feed row holds it: what the pages say of it is made from that (Formatter.event)."""
        return {"kind": "match", "gateway": self.gateway, "pattern": self.pattern,
                "bindings": [{"variable": k, "value": v} for k, v in self.bindings],
                "triples": [t.text for t in self.triples]}

    def as_json(self, naming: Naming | None = None, zone: ZoneInfo | timezone = timezone.utc) -> dict[str, Any]:
        """For the live page's script; with ``naming``, each triple also as shown terms
        (``shown``: [{text, full}] x 3, or null for a statement that is not a triple; the same
        for the triple it was entailed from and its axioms, ``source_shown`` and ``axioms_shown``)."""
        def triple(t: TripleView) -> dict[str, Any]:
            out = asdict(t)
            if naming is not None:
                out["shown"] = shown(t.text)
                out["source_shown"] = shown(t.source) if t.source else None
                out["axioms_shown"] = [shown(a) for a in t.axioms]
            return out

        def shown(text: str) -> list[dict[str, str]] | None:
            assert naming is not None
            terms = naming.statement(text, zone)
            return None if terms is None else [asdict(term) for term in terms]

        return {"window_start": self.window_start, "window_end": self.window_end,
                "reports_entailment": self.reports_entailment, "triples": [triple(t) for t in self.triples],
                "expected": self.expected, "waited_ms": self.waited_ms,
                "derived_from": [asdict(link) for link in self.derived_from]}


def _loaded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _statement(text: str) -> str:
    """A triple as the event writes it: ``s p o .`` (the trailing dot added when missing)."""
    text = text.strip()
    return text if text.endswith(".") else f"{text} ."


def _text(term: Any) -> str | None:
    """A statement given as text, or as [s, p, o]."""
    if isinstance(term, str):
        return _statement(term)
    if isinstance(term, list) and len(term) == 3 and all(isinstance(t, str) for t in term):
        return _statement(" ".join(term))
    return None


def _entailments(raw: Any) -> dict[str, tuple[list[str], str | None]]:
    """{statement: (axiom chain, the triple it came from)} from the event's ``entailed`` list of
    ``{triple, from, axioms}``; entries of another shape are skipped."""
    out: dict[str, tuple[list[str], str | None]] = {}
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        target = _text(entry.get("triple"))
        if target is None:
            continue
        axioms = entry.get("axioms")
        chain = [t for t in (_text(a) for a in axioms) if t] if isinstance(axioms, list) else []
        out[target] = (chain[:MAX_AXIOMS], _text(entry.get("from")))
    return out


def _times(item: dict[str, Any], count: int) -> list[int | None]:
    """Per-triple timestamps when the row carries them (``triple_times``/``tripleTimes``, aligned with triples)."""
    raw = _loaded(item.get("triple_times", item.get("tripleTimes")))
    if isinstance(raw, list) and len(raw) == count:
        return [_int(v) for v in raw]
    return [None] * count


def evidence_of(item: dict[str, Any]) -> Evidence:
    """The evidence of one live-feed row (a match or a significant observation)."""
    triples = [t for t in (_loaded(item.get("triples")) or []) if isinstance(t, str)]
    raw = _loaded(item.get(ENTAILMENT_FIELD))
    entailed = _entailments(raw)
    times = _times(item, len(triples))
    views = []
    for text, time_ms in zip(triples, times):
        found = entailed.get(_statement(text))
        axioms, source = found if found is not None else ([], None)
        views.append(TripleView(text, found is not None, axioms, time_ms, source))
    bindings = [(str(b.get("variable")), str(b.get("value"))) for b in (_loaded(item.get("bindings")) or [])
                if isinstance(b, dict)]
    return Evidence(str(item.get("id", "")), str(item.get("gateway", "")), item.get("pattern"), bindings,
                    _int(item.get("window_start")), _int(item.get("window_end")), _int(item.get("emitted_at")),
                    _int(item.get("ingest_ms")), views, isinstance(raw, list), _strings(item.get("expected")),
                    [match_link(i) for i in _strings(item.get("derived_from"))])


def _strings(value: Any) -> list[str]:
    """The strings of a JSON list (as text in a feed row, a list in an alarm's or the history's); [] for null."""
    loaded = _loaded(value)
    return [v for v in loaded if isinstance(v, str)] if isinstance(loaded, list) else []
