"""RDF terms as the people reading the dashboard say them: names, values and units.

An event carries exact N-Triples terms (``<http://example.org/gw1/room3>``,
``"63.5"^^<http://www.w3.org/2001/XMLSchema#decimal>``); an operator wants "room 3" and
"63.5 °C". A gateway's config document says what is needed to show them so: the labels
its schema and static data give (``rdfs:label``, ``skos:prefLabel``), the prefixes its
patterns and document declare, and the units (``qudt:unit`` or ``qudt:hasUnit`` on an
observed property, a sensor or an observation; a unit's own ``qudt:symbol``, else the
symbol of a common QUDT unit). ``Naming`` holds that for one document.

- An IRI is shown as its label, else in a prefixed form (the document's prefixes, then the
  common vocabularies'), else as its last path segment; the exact term is kept beside it
  (``Shown.full``) for the hover title and the copy action.
- A literal is shown as its value: numbers formatted (``1,234.5``), booleans as yes/no,
  date-times in the viewer's time zone, strings as they are; a number that is an
  observation's result, with the unit the data gives for it.

Nothing here evaluates what a document says: labels and symbols are shown as text, and the
pages escape them like any other value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Iterable, Mapping, Sequence
from zoneinfo import ZoneInfo

from edgewave.shared.alert_text import AlertText, render
from edgewave.shared.ntriples import NTriplesError, is_blank, is_iri, is_literal, literal_parts, parse_line
from edgewave.shared.vocab import EW_NS, OWL_NS, RDF_NS, RDFS_NS, SOSA_NS, SSN_NS, XSD_NS

QUDT_NS = "http://qudt.org/schema/qudt/"
UNIT_NS = "http://qudt.org/vocab/unit/"
SKOS_NS = "http://www.w3.org/2004/02/skos/core#"

COMMON_PREFIXES: dict[str, str] = {
    "rdf": RDF_NS, "rdfs": RDFS_NS, "owl": OWL_NS, "xsd": XSD_NS, "sosa": SOSA_NS, "ssn": SSN_NS,
    "ew": EW_NS, "qudt": QUDT_NS, "unit": UNIT_NS, "skos": SKOS_NS,
    "foaf": "http://xmlns.com/foaf/0.1/", "geo": "http://www.w3.org/2003/01/geo/wgs84_pos#",
    "time": "http://www.w3.org/2006/time#", "schema": "https://schema.org/",
}
"""Vocabularies every gateway may use: their terms get these prefixes unless a document says otherwise."""

LABELS = (f"<{RDFS_NS}label>", f"<{SKOS_NS}prefLabel>")
UNITS = (f"<{QUDT_NS}unit>", f"<{QUDT_NS}hasUnit>")
SYMBOL = f"<{QUDT_NS}symbol>"
SIMPLE_RESULT = f"<{SOSA_NS}hasSimpleResult>"
OBSERVED_PROPERTY = f"<{SOSA_NS}observedProperty>"
MADE_BY_SENSOR = f"<{SOSA_NS}madeBySensor>"

UNIT_SYMBOLS: dict[str, str] = {
    "DEG_C": "°C", "DEG_F": "°F", "K": "K", "PERCENT": "%", "PERCENT_RH": "% RH", "PPM": "ppm",
    "PPB": "ppb", "LUX": "lx", "PA": "Pa", "HectoPA": "hPa", "KiloPA": "kPa", "BAR": "bar",
    "MilliBAR": "mbar", "W": "W", "KiloW": "kW",
    "W-HR": "Wh", "KiloW-HR": "kWh", "V": "V", "A": "A", "M": "m", "MilliM": "mm", "CentiM": "cm",
    "SEC": "s", "MilliSEC": "ms", "MIN": "min", "HR": "h", "DEG": "°", "DeciB": "dB", "DeciB_A": "dB(A)",
    "M-PER-SEC": "m/s", "KiloM-PER-HR": "km/h", "MicroGM-PER-M3": "µg/m³", "MilliGM-PER-M3": "mg/m³",
    "GM-PER-M3": "g/m³", "GM-PER-KiloGM": "g/kg", "BEAT-PER-MIN": "bpm", "NUM-PER-MIN": "/min",
    "L-PER-MIN": "L/min", "M3-PER-HR": "m³/h",
}
"""Symbols of common QUDT units, by the unit's local name (a unit with ``qudt:symbol`` in the data uses that)."""

NUMERIC = frozenset(f"<{XSD_NS}{t}>" for t in (
    "decimal", "integer", "int", "long", "short", "byte", "double", "float", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedLong", "unsignedInt",
    "unsignedShort", "unsignedByte"))
BOOLEAN = f"<{XSD_NS}boolean>"
DATE_TIME = frozenset(f"<{XSD_NS}{t}>" for t in ("dateTime", "dateTimeStamp"))
_PREFIX_LINE = re.compile(r"(?im)^\s*(?:@prefix|PREFIX)\s+([A-Za-z][\w.-]*)?:\s*<([^<>\s]*)>")
MAX_LABEL_CHARS = 120
DEFAULT_SHOWN = 4
"""Bindings a pattern without a message shows in its default one (the rest are on demand)."""


@dataclass(frozen=True)
class Shown:
    """A term as the page shows it, and exactly as the event gave it."""

    text: str
    full: str


@dataclass
class Naming:
    """How one gateway's terms are shown (module docstring); empty: common prefixes and local names only."""

    prefixes: dict[str, str] = field(default_factory=dict)    # namespace -> prefix, the document's first
    labels: dict[str, str] = field(default_factory=dict)      # IRI term -> label
    units: dict[str, str] = field(default_factory=dict)       # property, sensor or observation -> unit symbol
    alerts: dict[str, AlertText] = field(default_factory=dict)  # pattern -> its alert text

    @classmethod
    def of(cls, texts: Iterable[str], triples: Iterable[tuple[str, str, str]],
           alerts: Mapping[str, AlertText] | None = None) -> Naming:
        """The naming of a document: the prefixes declared in ``texts`` (its own text, its
        patterns' queries) and the labels and units among ``triples`` (its schema and static data)."""
        naming = cls(alerts=dict(alerts or {}))
        for text in texts:
            for prefix, namespace in _PREFIX_LINE.findall(text):
                if prefix and namespace:
                    naming.prefixes.setdefault(namespace, prefix)
        for prefix, namespace in COMMON_PREFIXES.items():
            naming.prefixes.setdefault(namespace, prefix)
        triples = list(triples)
        symbols = {s: _literal_text(o) for s, p, o in triples if p == SYMBOL and is_literal(o)}
        for s, p, o in triples:
            if p in LABELS and is_literal(o) and s not in naming.labels:
                label = _literal_text(o).strip()
                if label:
                    naming.labels[s] = label[:MAX_LABEL_CHARS]
            elif p in UNITS and s not in naming.units:
                naming.units[s] = symbols.get(o) or unit_symbol(o)
        return naming

    # -- terms --------------------------------------------------------------------------------
    def iri(self, term: str) -> str:
        """An IRI term's label, prefixed name or last segment."""
        label = self.labels.get(term)
        if label is not None:
            return label
        bare = term[1:-1]
        cut = max(bare.rfind("#"), bare.rfind("/"))
        namespace, local = bare[:cut + 1], bare[cut + 1:]
        prefix = self.prefixes.get(namespace)
        if local and prefix is not None:
            return f"{prefix}:{local}"
        return local or bare

    def term(self, term: str, zone: ZoneInfo | timezone = timezone.utc, unit: str | None = None) -> Shown:
        """One term as shown (``unit``: the symbol to put after a number)."""
        if is_iri(term):
            return Shown(self.iri(term), term)
        if is_literal(term):
            return Shown(literal_value(term, zone, unit), term)
        if is_blank(term):
            return Shown("(unnamed)", term)
        return Shown(term, term)

    def bindings(self, bindings: Sequence[Mapping[str, str]] | Mapping[str, str],
                 triples: Sequence[str] = (), zone: ZoneInfo | timezone = timezone.utc) -> list[tuple[str, Shown]]:
        """A match's bindings as (variable, shown value), with units read from its ``triples``."""
        pairs = _pairs(bindings)
        units = self.units_of(triples)
        return [(name, self.term(value, zone, units.get(value))) for name, value in pairs]

    def units_of(self, triples: Sequence[str]) -> dict[str, str]:
        """{result literal: unit symbol} for each observation result among an event's statements
        whose observation, sensor or observed property has a unit (the observation's first)."""
        if not self.units or not triples:
            return {}
        parsed = [t for t in (_split(s) for s in triples) if t is not None]
        about: dict[str, list[str]] = {}
        results: list[tuple[str, str]] = []
        for s, p, o in parsed:
            if p == SIMPLE_RESULT:
                results.append((s, o))
            elif p in (OBSERVED_PROPERTY, MADE_BY_SENSOR):
                about.setdefault(s, []).append(o)
        out: dict[str, str] = {}
        for observation, value in results:
            for subject in (observation, *about.get(observation, ())):
                unit = self.units.get(subject)
                if unit:
                    out.setdefault(value, unit)
                    break
        return out

    def statement(self, text: str, zone: ZoneInfo | timezone = timezone.utc) -> list[Shown] | None:
        """An event's statement ``s p o .`` as three shown terms (None when it is not one)."""
        triple = _split(text)
        if triple is None:
            return None
        return [self.term(t, zone) for t in triple]

    def event(self, item: Mapping, zone: ZoneInfo | timezone = timezone.utc) -> dict:
        """What a page shows of one event (a live-feed row): its message, title and severity
        first, then its bindings as (variable, text, full term), for the table and the live
        page's script alike."""
        triples = item.get("triples") or ()
        if item.get("kind") == "significant":
            return self._observation(item, zone)
        pattern = item.get("pattern")
        bindings = item.get("bindings") or ()
        pairs = _pairs(bindings)
        said = self._written(pattern, pairs, zone)
        return {"message": said if said is not None else self._values(pairs, triples, zone),   # the badge: the title
                "title": self.title(pattern), "severity": self.severity(pattern),
                "bindings": [{"variable": name, "text": shown.text, "full": shown.full}
                             for name, shown in self.bindings(bindings, triples, zone)]}

    def _observation(self, item: Mapping, zone: ZoneInfo | timezone) -> dict:
        """A significant observation: "<sensor>: <property> <value with unit>"."""
        sensor, prop, result = item.get("sensor"), item.get("property"), item.get("result")
        unit = self.units.get(sensor or "") or self.units.get(prop or "")
        parts = [(name, self.term(term, zone, unit if name == "result" else None))
                 for name, term in (("sensor", sensor), ("property", prop), ("result", result)) if term]
        shown = dict(parts)
        what = " ".join(shown[n].text for n in ("property", "result") if n in shown)
        message = f"{shown['sensor'].text}: {what}" if "sensor" in shown else what or "observation"
        return {"message": message, "title": "significant", "severity": None,
                "bindings": [{"variable": n, "text": v.text, "full": v.full} for n, v in parts]}

    # -- alert text ---------------------------------------------------------------------------
    def message(self, pattern: str | None, bindings: Sequence[Mapping[str, str]] | Mapping[str, str],
                triples: Sequence[str] = (), zone: ZoneInfo | timezone = timezone.utc) -> str:
        """What a match says to people: its pattern's message template filled in, else the
        pattern's title (or name) and its first values."""
        pairs = _pairs(bindings)
        said = self._written(pattern, pairs, zone)
        if said is not None:
            return said
        values = self._values(pairs, triples, zone)
        title = self.title(pattern)
        return f"{title} — {values}" if values else title

    def title(self, pattern: str | None) -> str:
        alert = self.alerts.get(pattern or "")
        return (alert.title if alert is not None and alert.title else None) or pattern or "event"

    def _written(self, pattern: str | None, pairs: list[tuple[str, str]], zone: ZoneInfo | timezone) -> str | None:
        """The pattern's message template filled in (values without units: the template says them), or None."""
        alert = self.alerts.get(pattern or "")
        if alert is None or not alert.message:
            return None
        return render(alert.message, dict(pairs), lambda term: self.term(term, zone).text)

    def _values(self, pairs: list[tuple[str, str]], triples: Sequence[str], zone: ZoneInfo | timezone) -> str:
        """The first ``DEFAULT_SHOWN`` values as "name: value", with their units."""
        units = self.units_of(triples)
        shown = [f"{name}: {self.term(value, zone, units.get(value)).text}" for name, value in pairs[:DEFAULT_SHOWN]]
        more = f" (+{len(pairs) - DEFAULT_SHOWN} more)" if len(pairs) > DEFAULT_SHOWN else ""
        return ", ".join(shown) + more

    def severity(self, pattern: str | None) -> str | None:
        alert = self.alerts.get(pattern or "")
        return alert.severity if alert is not None else None


def unit_symbol(unit: str) -> str:
    """The symbol of a unit IRI term: a common QUDT unit's, else its last segment."""
    bare = unit[1:-1] if is_iri(unit) else unit
    local = bare[max(bare.rfind("#"), bare.rfind("/")) + 1:]
    return UNIT_SYMBOLS.get(local, local or bare)


def literal_value(term: str, zone: ZoneInfo | timezone = timezone.utc, unit: str | None = None) -> str:
    """A literal's value for people (module docstring); its lexical form when it is not a valid one."""
    try:
        lexical, datatype, _ = literal_parts(term)
    except ValueError:
        return term
    if datatype in NUMERIC:
        number = _number(lexical)
        if number is None:
            return lexical
        return f"{number} {unit}" if unit else number
    if datatype == BOOLEAN:
        return {"true": "yes", "1": "yes", "false": "no", "0": "no"}.get(lexical.strip(), lexical)
    if datatype in DATE_TIME:
        return _date_time(lexical, zone)
    return lexical


def _number(lexical: str) -> str | None:
    try:
        value = Decimal(lexical.strip())
    except InvalidOperation:
        return None
    if not value.is_finite():
        return lexical.strip()
    if value == value.to_integral_value() and abs(value) < 10 ** 15:
        return f"{int(value):,}"
    if abs(value) >= Decimal("0.001") and abs(value) < 10 ** 15:
        text = f"{value:,.6f}".rstrip("0").rstrip(".")
        return text
    return f"{float(value):.4g}"


def _date_time(lexical: str, zone: ZoneInfo | timezone) -> str:
    try:
        moment = datetime.fromisoformat(lexical.strip().replace("Z", "+00:00"))
    except ValueError:
        return lexical
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    local = moment.astimezone(zone)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or "")


def _literal_text(term: str) -> str:
    try:
        return literal_parts(term)[0]
    except ValueError:
        return term


def _pairs(bindings: Sequence[Mapping[str, str]] | Mapping[str, str]) -> list[tuple[str, str]]:
    """[(variable, term)] from an event's ``[{variable, value}]`` or a ``{variable: term}``."""
    if isinstance(bindings, Mapping):
        return [(str(k), str(v)) for k, v in bindings.items()]
    return [(str(b.get("variable")), str(b.get("value"))) for b in bindings if isinstance(b, Mapping)]


def _split(statement: str) -> tuple[str, str, str] | None:
    """An event's statement ``s p o .`` as three terms (None when it is not one)."""
    try:
        return parse_line(statement)
    except NTriplesError:
        return None
