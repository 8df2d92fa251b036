"""A gateway's config document as its parts, for the configuration editor.

The configuration editor shows a document as its parts: each pattern (its name, alert text
and query), the schema and the static data (N-Triples, one triple a line; Turtle is taken
too) and the significance rules (Turtle, as `make-config --significance` takes them). The
parts are assembled again with shared.configdoc.build_config_document, the function
`make-config` uses, in one canonical order (patterns by name, triples sorted), so a document
split and assembled again says the same, and two assemblies differ only where the parts do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import rdflib

from edgewave.shared import vocab
from edgewave.shared.alert_text import AlertText
from edgewave.shared.configdoc import (ConfigRejected, DocumentLimits, SignificanceRule, build_config_document,
                                       canonical_triples, check_document, load_config_document)
from edgewave.shared.ntriples import parse_lines
from edgewave.shared.rdflib_literals import literals_as_written


SCHEMA, STATIC, SIGNIFICANCE, MAPPINGS, PATTERN, DOCUMENT = ("schema", "static", "significance", "mappings", "pattern",
                                                             "document")
# Prefixes the mappings part is written with (RML, as docs/mappings.md writes it).
_MAPPING_PREFIXES = {"rml": "http://w3id.org/rml/", "ew": vocab.EW_NS, "sosa": "http://www.w3.org/ns/sosa/",
                     "xsd": "http://www.w3.org/2001/XMLSchema#", "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
                     "qudt": "http://qudt.org/schema/qudt/", "unit": "http://qudt.org/vocab/unit/"}


@dataclass
class PatternPart:
    name: str
    query: str
    title: str = ""
    severity: str = ""
    message: str = ""
    report: str = ""          # a per-instance query's report policy (ew:report), "" for the default


@dataclass
class Parts:
    patterns: list[PatternPart] = field(default_factory=list)
    schema: str = ""          # N-Triples (or Turtle)
    static: str = ""          # N-Triples (or Turtle)
    significance: str = ""    # Turtle: ew:SignificanceRule nodes
    mappings: str = ""        # Turtle: the RML mappings of device payloads (docs/mappings.md)
    unexpressed: list[str] = field(default_factory=list)
    """What the document says that the parts cannot (a blank node shared by the schema and the static
    data): such a document is edited whole."""
    version: int | None = None
    """The document's own ew:version, left out of the parts: a push gives the next version."""


class PartError(ValueError):
    """A part that cannot go into a document; ``part`` names it (schema, static, significance, pattern
    with ``index``, the card's place on the page, or document)."""

    def __init__(self, part: str, reason: str, index: int | None = None) -> None:
        super().__init__(reason)
        self.part, self.reason, self.index = part, reason, index


def triples_text(triples: Iterable[tuple[str, str, str]], blank: str = "b") -> str:
    """Triples as N-Triples lines, in the canonical order."""
    return "".join(f"{s} {p} {o} .\n" for s, p, o in canonical_triples(triples, blank))


def _rule_fields(rule: SignificanceRule) -> list[str]:
    fields = [("property", rule.property), ("deadbandAbsolute", rule.deadband_absolute),
              ("deadbandRelative", rule.deadband_relative), ("maxSilenceSeconds", rule.max_silence_s),
              ("maxRatePerSecond", rule.max_rate_per_s)]
    return [f"ew:{k} {v if k == 'property' else repr(float(v))}" for k, v in fields if v is not None]


def significance_text(rules: Iterable[SignificanceRule]) -> str:
    """Significance rules as Turtle, one ``[ a ew:SignificanceRule ; ... ] .`` a line ("" for none)."""
    lines = [f"[ {' ; '.join(['a ew:SignificanceRule', *_rule_fields(rule)])} ] .\n" for rule in rules]
    return f"@prefix ew: <{vocab.EW_NS}> .\n\n" + "".join(lines) if lines else ""


def split_document(text: str, fmt: str) -> Parts:
    """A config document as its parts; raises ConfigRejected (the agent's reason) when it does not parse."""
    doc = load_config_document(text, fmt)
    patterns = []
    for name, query in sorted(doc.patterns.items()):
        alert = doc.alerts.get(name, AlertText())
        patterns.append(PatternPart(name, query, alert.title or "", alert.severity or "", alert.message or "",
                                    doc.reports.get(name, "")))
    unexpressed = []
    shared = ({t for triple in doc.schema for t in triple if t.startswith("_:")}
              & {t for triple in doc.static for t in triple if t.startswith("_:")})
    if shared:
        unexpressed.append("a blank node in both the schema and the static data")
    return Parts(patterns, triples_text(doc.schema, "s"), triples_text(doc.static, "t"),
                 significance_text(doc.significance), mappings_text(doc.mappings), unexpressed, doc.version)


def mappings_text(triples: Iterable[tuple[str, str, str]]) -> str:
    """The mappings as Turtle with the usual prefixes ("" for none): RML is written nested, by people."""
    triples = list(triples)
    if not triples:
        return ""
    graph = rdflib.Graph()
    for prefix, namespace in _MAPPING_PREFIXES.items():
        graph.bind(prefix, namespace)
    with literals_as_written():
        graph.parse(data=triples_text(triples, "m"), format="nt")
    return graph.serialize(format="turtle")


def _parse_failure(exc: Exception) -> str:
    """rdflib's complaint about a part, as the agent words one about a document: ``parse error at line N: ...``."""
    text = str(exc)
    line = re.search(r"line (\d+)", text)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.strip().startswith("at line")]
    return f"parse error{f' at line {line.group(1)}' if line else ''}: {lines[0] if lines else type(exc).__name__}"


def parse_triples(text: str, part: str) -> list[tuple[str, str, str]]:
    """The triples of a schema or static part (N-Triples or Turtle) as N-Triples terms; PartError names the
    part and the line. Within the agent's document limits before rdflib sees it, as a document is."""
    if not text.strip():
        return []
    try:
        check_document(text, DocumentLimits())
    except ConfigRejected as exc:
        raise PartError(part, exc.reason) from exc
    graph = rdflib.Graph()
    try:
        with literals_as_written():
            graph.parse(data=text, format="turtle")
        return list(parse_lines(graph.serialize(format="nt").split("\n")))
    except Exception as exc:  # rdflib raises many types for bad syntax
        raise PartError(part, _parse_failure(exc)) from exc


def parse_significance(text: str) -> list[SignificanceRule]:
    """The significance rules of a Turtle part; PartError when it does not parse or holds anything else."""
    if not text.strip():
        return []
    try:
        doc = load_config_document(text, "turtle")
    except ConfigRejected as exc:
        raise PartError(SIGNIFICANCE, exc.reason) from exc
    if doc.patterns or doc.schema or doc.static or doc.version is not None:
        raise PartError(SIGNIFICANCE, "this part holds ew:SignificanceRule nodes only: patterns, schema and "
                                      "static triples have their own parts")
    return doc.significance


def assemble(parts: Parts) -> str:
    """The TriG document the parts make (build_config_document), patterns by name; PartError names a part
    that cannot go in. Whether the document is valid is check_config_document's to say."""
    schema = canonical_triples(parse_triples(parts.schema, SCHEMA), "s")
    static = canonical_triples(parse_triples(parts.static, STATIC), "t")
    rules = parse_significance(parts.significance)
    mappings = canonical_triples(parse_triples(parts.mappings, MAPPINGS), "m")
    pairs: list[tuple[str, str]] = []
    alerts: dict[str, AlertText] = {}
    reports: dict[str, str] = {}
    for index, pattern in enumerate(parts.patterns):
        name = pattern.name.strip()
        if not name:
            raise PartError(PATTERN, "a pattern needs a name (the one its REGISTER gives, as a rule)", index)
        if not pattern.query.strip():
            raise PartError(PATTERN, f"pattern {name} has no query", index)
        pairs.append((name, pattern.query))    # a name twice stays twice, for the check to refuse
        alert = AlertText(pattern.title or None, pattern.severity or None, pattern.message or None)
        if alert != AlertText():
            alerts[name] = alert
        if pattern.report.strip():
            reports[name] = pattern.report.strip()
    pairs.sort(key=lambda pair: pair[0])
    return build_config_document(pairs, schema, static, rules, alerts, mappings, reports)


def canonical_document(text: str, fmt: str) -> str:
    """A document as the parts editor would assemble it unchanged (for a diff against edited parts); the
    text itself when it cannot be split into parts or says what they cannot."""
    try:
        parts = split_document(text, fmt)
        return text if parts.unexpressed else assemble(parts)
    except (ConfigRejected, PartError):
        return text


def parts_from_form(form: Mapping[str, Any]) -> Parts:
    """The parts an editor's form sends: ``pattern_name``, ``pattern_query``, ``pattern_title``,
    ``pattern_severity``, ``pattern_message``, ``pattern_report`` once per card, in page order; ``schema``, ``static``,
    ``significance``, ``mappings``. Line ends as a textarea sends them (CRLF) become LF."""
    def text(value: Any) -> str:
        return str(value or "").replace("\r\n", "\n")

    columns = [[text(v) for v in form.getlist(f"pattern_{key}")]   # type: ignore[attr-defined]
               for key in ("name", "query", "title", "severity", "message", "report")]
    if not columns[-1]:          # a page from before reports were a field: none set
        columns[-1] = [""] * len(columns[0])
    if len({len(column) for column in columns}) > 1:
        raise PartError(DOCUMENT, "the form's pattern fields do not line up: reload the page")
    patterns = [PatternPart(*row) for row in zip(*columns)]
    return Parts(patterns, text(form.get("schema")), text(form.get("static")), text(form.get("significance")),
                 text(form.get("mappings")))


_PATTERN_REFERENCE = r"\bpattern (?:name )?{}(?=$|[\s:,])"


def locate(reason: str, parts: Parts) -> dict[str, Any]:
    """Which part the agent's ``reason`` concerns: {part, index (a pattern's card), pattern, field}.

    The check names a pattern by its ew:name (a parse error) or by the name its REGISTER gives
    (``pattern fire cannot be compiled``, ``duplicate pattern name fire``); of several cards it could
    be, the one the check reaches last (it goes by ew:name). Static data the engine refuses is the
    static part; anything else the document's."""
    if reason.startswith("static data rejected"):
        return {"part": STATIC}
    if reason.startswith("mapping"):
        return {"part": MAPPINGS}

    def named(name: str | None) -> bool:
        return bool(name) and re.search(_PATTERN_REFERENCE.format(re.escape(name or "")), reason) is not None

    by_label = reason.startswith("parse error in pattern ")
    cards = [i for i, p in enumerate(parts.patterns)
             if named(p.name.strip()) or (not by_label and named(_registered(p.query)))]
    if not cards:
        return {"part": DOCUMENT}
    found = max(cards, key=lambda i: (parts.patterns[i].name.strip(), i))
    field_name = "query"
    for key, said in (("title", "ew:title"), ("severity", "ew:severity"), ("message", "message"),
                      ("report", "ew:report")):
        if said in reason and not reason.startswith("parse error"):
            field_name = key
    return {"part": PATTERN, "index": found, "pattern": parts.patterns[found].name.strip(), "field": field_name}


def _registered(query: str) -> str | None:
    """The name a query's REGISTER gives, or None if it does not parse."""
    from edgewave.agent.engine.per_instance import parse_for_evaluation

    try:
        return parse_for_evaluation(query).name
    except Exception:  # only a name is wanted here: the check gives the reason
        return None
