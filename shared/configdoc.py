"""Gateway config documents: an RDF document (TriG or Turtle) and its signed envelope.

The document holds patterns, schema, static triples and significance settings
(see configs/gateway-config.trig). Parameters that patterns join against are
static triples, so a threshold change is a static-data change, not a new network.

On the wire the document travels in a JSON envelope signed with HMAC-SHA256 under
a per-gateway key, so an agent refuses a config it did not get from its cloud.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from . import vocab
from .alert_text import AlertText
from .bounded_json import PayloadError, load_json
from .ntriples import parse_lines

if TYPE_CHECKING:
    import rdflib

# rdflib is imported by the functions that read RDF, not here: a gateway verifies envelopes
# and holds ConfigDocuments without it (its documents are read in a child process,
# edgewave.agent.document_reader), which keeps about 15 MB out of its resident memory.

FORMATS = ("trig", "turtle")

# Why an envelope or document was refused (``ConfigRejected.kind``); the agent counts each
# kind (``config_rejected_<kind>`` in its status).
ENVELOPE_OVERSIZED = "envelope_oversized"    # the MQTT payload is larger than allowed
ENVELOPE_MALFORMED = "envelope_malformed"    # not JSON within the limits, or fields missing or mistyped
BAD_SIGNATURE = "bad_signature"
WRONG_GATEWAY = "wrong_gateway"
DOCUMENT_OVERSIZED = "document_oversized"    # too many bytes or terms to hand to rdflib
DOCUMENT_TOO_DEEP = "document_too_deep"      # [ ( << { nested deeper than allowed
PARSE_ERROR = "parse_error"                  # rdflib refused the text (or failed on it)
INVALID = "invalid"                          # parses, but says something the gateway cannot use
REJECTION_KINDS = (ENVELOPE_OVERSIZED, ENVELOPE_MALFORMED, BAD_SIGNATURE, WRONG_GATEWAY, DOCUMENT_OVERSIZED,
                   DOCUMENT_TOO_DEEP, PARSE_ERROR, INVALID)

ENVELOPE_MAX_DEPTH = 4        # the envelope is one flat JSON object
DEFAULT_MAX_ENVELOPE_BYTES = 1024 * 1024
LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1   # a version must fit the config store's SQLite INTEGER


@dataclass(frozen=True)
class DocumentLimits:
    """What a config document may hold before rdflib is allowed to parse it.

    rdflib's Turtle/TriG parser recurses once per nested ``[`` or ``(`` (about seven
    Python frames a level: some 140 levels exhaust the interpreter's stack), and it
    holds about 3 kB per triple while parsing: a 100 kB document of one long collection,
    ``( 0 0 0 ... )``, took 300 MB. Size alone does not bound that memory; the number of
    terms does, since rdflib builds at most two triples per term (at the default, one
    collection of 20,000 terms peaks at 110 MB). The defaults leave the demo's document
    (configs/gateway-config.trig: 50 kB, nesting 2, 1,500 terms, 1 MB to parse) ample room.
    """

    max_bytes: int = 256 * 1024
    max_nesting: int = 32
    max_terms: int = 20_000


# What rdflib does not recurse into and what holds no term of the document's own: strings
# (long ones first), IRIs, comments, and escaped characters of prefixed names (ex:a\().
# Each alternative is an unrolled loop, so the scan stays linear where nothing matches.
_OPAQUE = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"[^"\\\n\r]*(?:\\.[^"\\\n\r]*)*"'
    r"|'[^'\\\n\r]*(?:\\.[^'\\\n\r]*)*'"
    r'|<[^<>"{}|^`\\\x00-\x20]*(?:\\.[^<>"{}|^`\\\x00-\x20]*)*>'
    r"|#[^\n\r]*"
    r"|\\.",
    re.DOTALL)
_NESTING_TOKEN = re.compile(r"<<|>>|[\[\](){}]")
_NESTING_STEP = {"<<": 1, "[": 1, "(": 1, "{": 1, ">>": -1, "]": -1, ")": -1, "}": -1}
_WORD = re.compile(r"[^\s\[\](){},;]+")


def _opaque_placeholder(m: re.Match) -> str:
    first = m.group()[0]
    if first == "#":
        return " "            # a comment: nothing
    if first == "\\":
        return "x"            # an escaped character, part of a prefixed name
    return " x "              # a string or an IRI: one term


def document_shape(text: str) -> tuple[int, int]:
    """(nesting depth, terms) of a Turtle/TriG text, found without parsing it.

    Nesting counts ``[ ( << {`` open at once outside strings, IRIs and comments (a
    pattern's own braces, inside its query string, do not count). Terms are the words
    (names, numbers, strings, IRIs, ``a``, and a statement's final ``.``) plus one per
    ``[``, ``(`` and ``<<``: at least as many as the objects, of which rdflib makes at
    most two triples each. A closing bracket with nothing open stops rdflib right there,
    before any opening one after it, so a running count below zero hides no depth.
    """
    plain = _OPAQUE.sub(_opaque_placeholder, text)
    steps = map(_NESTING_STEP.__getitem__, _NESTING_TOKEN.findall(plain))
    depth = max(accumulate(steps), default=0)
    terms = len(_WORD.findall(plain)) + plain.count("[") + plain.count("(") + plain.count("<<")
    return max(depth, 0), terms


def check_document(text: str, limits: DocumentLimits) -> None:
    """Raise ConfigRejected when ``text`` is beyond ``limits``: before rdflib sees it."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise ConfigRejected(f"document too large: {size} bytes (at most {limits.max_bytes})", DOCUMENT_OVERSIZED)
    depth, terms = document_shape(text)
    if depth > limits.max_nesting:
        raise ConfigRejected(f"document nested too deeply: {depth} levels of [ ( << {{ "
                             f"(at most {limits.max_nesting})", DOCUMENT_TOO_DEEP)
    if terms > limits.max_terms:
        raise ConfigRejected(f"document too large: {terms} terms (at most {limits.max_terms})",
                             DOCUMENT_OVERSIZED)

# Schema vocabulary: triples with these predicates (or typing a class/property) go to the epsilon-network.
_SCHEMA_PREDICATES = {vocab.RDFS_SUBCLASSOF, vocab.RDFS_SUBPROPERTYOF, vocab.RDFS_DOMAIN, vocab.RDFS_RANGE,
                      vocab.OWL_INVERSEOF}
_SCHEMA_TYPES = {vocab.OWL_SYMMETRIC, vocab.RDFS_CLASS, vocab.OWL_CLASS,
                 "<http://www.w3.org/1999/02/22-rdf-syntax-ns#Property>",
                 "<http://www.w3.org/2002/07/owl#ObjectProperty>",
                 "<http://www.w3.org/2002/07/owl#DatatypeProperty>"}


class ConfigRejected(Exception):
    """A config document or envelope the agent must not apply; ``reason`` goes into the ack,
    ``kind`` (one of REJECTION_KINDS) into the agent's counters."""

    def __init__(self, reason: str, kind: str = INVALID) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass
class SignificanceRule:
    """Per observed property (None = the default for all): when an observation is worth forwarding."""

    property: str | None = None
    deadband_absolute: float | None = None
    deadband_relative: float | None = None
    max_silence_s: float | None = None
    max_rate_per_s: float | None = None


@dataclass
class ConfigDocument:
    """What a config document says, in engine terms (N-Triples strings)."""

    version: int | None = None
    patterns: dict[str, str] = field(default_factory=dict)
    alerts: dict[str, AlertText] = field(default_factory=dict)   # by pattern label, as patterns
    reports: dict[str, str] = field(default_factory=dict)        # by pattern label: ew:report, where given
    schema: list[tuple[str, str, str]] = field(default_factory=list)
    static: list[tuple[str, str, str]] = field(default_factory=list)
    significance: list[SignificanceRule] = field(default_factory=list)
    # The triples of the ew:mappings graph: RML mappings of sensor payloads (docs/mappings.md).
    mappings: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Envelope:
    gateway: str
    version: int
    format: str
    document: str
    signature: str


def _to_ntriples(graph: rdflib.Graph) -> list[tuple[str, str, str]]:
    """Triples of an rdflib graph as canonical N-Triples terms (through our own parser)."""
    data = graph.serialize(format="nt")
    return list(parse_lines(data.split("\n")))


def canonical_triples(triples: Iterable[tuple[str, str, str]], blank: str = "b") -> list[tuple[str, str, str]]:
    """``triples`` sorted, with blank node labels that depend on the graph alone (``_:<blank>0``, ...).

    A parser names blank nodes anew each time it reads a file; a document assembled from the same
    files must read the same, so the labels come from rdflib's canonical form (a hash of each blank
    node's surroundings), renamed short in sorted order."""
    triples = list(triples)
    if not any(term.startswith("_:") for triple in triples for term in triple):
        return sorted(set(triples))
    import rdflib
    from rdflib.compare import to_canonical_graph

    from .rdflib_literals import literals_as_written

    with literals_as_written():
        graph = rdflib.Graph()
        graph.parse(data="".join(f"{s} {p} {o} .\n" for s, p, o in triples), format="nt")
        canonical = _to_ntriples(to_canonical_graph(graph))
    names: dict[str, str] = {}

    def name(term: str) -> str:
        return names.setdefault(term, f"_:{blank}{len(names)}") if term.startswith("_:") else term

    ordered = sorted(canonical)
    return sorted((name(s), name(p), name(o)) for s, p, o in ordered)


def _parse_error(exc: Exception) -> ConfigRejected:
    text = str(exc)
    match = re.search(r"line (\d+)", text)
    where = f" at line {match.group(1)}" if match else ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.strip().startswith("at line")]
    what = lines[0] if lines else type(exc).__name__
    return ConfigRejected(f"parse error{where}: {what}", PARSE_ERROR)


def _text(graph: rdflib.Graph, node, pred: rdflib.URIRef) -> str | None:
    value = graph.value(node, pred)
    return None if value is None else str(value)


def _number(graph: rdflib.Graph, node, pred: str) -> float | None:
    from rdflib import Literal, URIRef

    value = graph.value(node, URIRef(vocab.iri(pred)))
    if value is None:
        return None
    try:
        return float(value.toPython() if isinstance(value, Literal) else value)
    except (TypeError, ValueError) as exc:
        raise ConfigRejected(f"{vocab.iri(pred)} must be a number, got {value!r}") from exc


def load_config_document(text: str, fmt: str = "trig",
                         limits: DocumentLimits | None = DocumentLimits()) -> ConfigDocument:
    """Parse a config document; raises ConfigRejected with a reason an operator can act on.

    ``limits`` are checked before rdflib runs (None: a document accepted before, from the
    config store). Whatever rdflib or the reading of its graphs raises, RecursionError and
    MemoryError included, is a ConfigRejected: the document fails, not its reader.
    """
    if fmt not in FORMATS:
        raise ConfigRejected(f"unknown config format {fmt!r} (expected one of {', '.join(FORMATS)})",
                             PARSE_ERROR)
    if limits is not None:
        check_document(text, limits)
    import rdflib

    from .rdflib_literals import literals_as_written

    dataset = rdflib.Dataset()
    try:
        with literals_as_written():
            dataset.parse(data=text, format=fmt)
    except Exception as exc:  # rdflib raises many types for bad syntax
        raise _parse_error(exc) from exc
    try:
        return _read_document(dataset)
    except ConfigRejected:
        raise
    except Exception as exc:  # e.g. a "\ud800" escape: rdflib accepts it, no UTF-8 writer does
        raise ConfigRejected(f"parse error: unreadable term ({type(exc).__name__}: {str(exc)[:200]})",
                             PARSE_ERROR) from exc


def _read_document(dataset: rdflib.Dataset) -> ConfigDocument:
    """Split a parsed dataset into patterns, schema, static triples and significance rules."""
    import rdflib
    from rdflib import URIRef

    config_graph = rdflib.Graph()
    schema_graph = rdflib.Graph()
    static_graph = rdflib.Graph()
    mappings_graph = rdflib.Graph()
    config_name = URIRef(vocab.iri(vocab.EW_CONFIG_GRAPH))
    schema_name = URIRef(vocab.iri(vocab.EW_SCHEMA_GRAPH))
    static_name = URIRef(vocab.iri(vocab.EW_STATIC_GRAPH))
    mappings_name = URIRef(vocab.iri(vocab.EW_MAPPINGS_GRAPH))
    config_preds = {URIRef(vocab.iri(p)) for p in (
        vocab.EW_HAS_PATTERN, vocab.EW_NAME, vocab.EW_QUERY, vocab.EW_TITLE, vocab.EW_SEVERITY, vocab.EW_MESSAGE,
        vocab.EW_REPORT, vocab.EW_VERSION, vocab.EW_SIGNIFICANCE,
        vocab.EW_PROPERTY, vocab.EW_DEADBAND_ABSOLUTE, vocab.EW_DEADBAND_RELATIVE, vocab.EW_MAX_SILENCE,
        vocab.EW_MAX_RATE)}
    config_types = {URIRef(vocab.iri(t)) for t in (vocab.EW_GATEWAY_CONFIG, vocab.EW_PATTERN,
                                                   vocab.EW_SIGNIFICANCE_RULE)}
    schema_preds = {URIRef(vocab.iri(p)) for p in _SCHEMA_PREDICATES}
    schema_types = {URIRef(vocab.iri(t)) for t in _SCHEMA_TYPES}
    rdf_type = URIRef(vocab.iri(vocab.RDF_TYPE))

    for s, p, o, g in dataset.quads((None, None, None, None)):
        name = getattr(g, "identifier", g)
        if name == config_name:
            config_graph.add((s, p, o))
        elif name == schema_name:
            schema_graph.add((s, p, o))
        elif name == static_name:
            static_graph.add((s, p, o))
        elif name == mappings_name:
            mappings_graph.add((s, p, o))
        elif p in config_preds or (p == rdf_type and o in config_types):
            config_graph.add((s, p, o))
        elif p in schema_preds or (p == rdf_type and o in schema_types):
            schema_graph.add((s, p, o))
        else:
            static_graph.add((s, p, o))

    doc = ConfigDocument(schema=_to_ntriples(schema_graph), static=_to_ntriples(static_graph),
                         mappings=_to_ntriples(mappings_graph))
    ew = rdflib.Namespace(vocab.EW_NS)
    for node in config_graph.subjects(rdf_type, ew.GatewayConfig):
        version = config_graph.value(node, ew.version)
        if version is not None:
            try:
                doc.version = int(version)
            except (ValueError, OverflowError) as exc:   # "1e400" is a float, infinity
                raise ConfigRejected(f"ew:version must be an integer, got {version!r}") from exc
    for node in set(config_graph.subjects(ew.query, None)):
        name = config_graph.value(node, ew.name)
        if name is None:
            raise ConfigRejected(f"pattern {node} has ew:query but no ew:name")
        if str(name) in doc.patterns:
            raise ConfigRejected(f"duplicate pattern name {name}")
        doc.patterns[str(name)] = str(config_graph.value(node, ew.query))
        alert = AlertText(*(_text(config_graph, node, p) for p in (ew.title, ew.severity, ew.message)))
        if alert != AlertText():
            doc.alerts[str(name)] = alert
        report = _text(config_graph, node, ew.report)
        if report is not None:
            doc.reports[str(name)] = report
    rules = set(config_graph.subjects(rdf_type, ew.SignificanceRule)) | set(config_graph.objects(None, ew.significance))
    for node in rules:
        prop = config_graph.value(node, ew.property)
        doc.significance.append(SignificanceRule(
            property=f"<{prop}>" if prop is not None else None,
            deadband_absolute=_number(config_graph, node, vocab.EW_DEADBAND_ABSOLUTE),
            deadband_relative=_number(config_graph, node, vocab.EW_DEADBAND_RELATIVE),
            max_silence_s=_number(config_graph, node, vocab.EW_MAX_SILENCE),
            max_rate_per_s=_number(config_graph, node, vocab.EW_MAX_RATE),
        ))
    doc.significance.sort(key=lambda r: r.property or "")
    return doc


def _signed_bytes(gateway: str, version: int, fmt: str, document: str) -> bytes:
    return json.dumps([gateway, int(version), fmt, document], ensure_ascii=True, separators=(",", ":")).encode()


def _key_bytes(key: str | bytes) -> bytes:
    if not key:
        raise ValueError("an empty signing key is not allowed")
    return key.encode() if isinstance(key, str) else key


def sign(gateway: str, version: int, fmt: str, document: str, key: str | bytes) -> str:
    """HMAC-SHA256 (hex) of the envelope's canonical bytes."""
    return hmac.new(_key_bytes(key), _signed_bytes(gateway, version, fmt, document), hashlib.sha256).hexdigest()


def sign_envelope(gateway: str, version: int, document: str, fmt: str, key: str | bytes) -> bytes:
    """The MQTT payload for ``ew/<gateway>/config``: the document with its signature."""
    envelope = {"gateway": gateway, "version": int(version), "format": fmt, "document": document,
                "signature": sign(gateway, version, fmt, document, key)}
    return json.dumps(envelope, ensure_ascii=False).encode("utf-8")


def verify_envelope(payload: bytes | str, key: str | bytes, gateway: str | None = None, *,
                    max_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES) -> Envelope:
    """Check an envelope's size, shape, signature and addressee; raises ConfigRejected with the reason.

    The payload is read with ``load_json`` (size, nesting and integer digits bounded, lone
    surrogates refused), and nothing in the document is parsed here: the signature is
    checked on the envelope's fields, before any RDF parser sees the document.
    """
    size = len(payload) if isinstance(payload, bytes) else len(payload.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ConfigRejected(f"envelope too large: {size} bytes (at most {max_bytes})", ENVELOPE_OVERSIZED)
    try:
        raw: Any = load_json(payload, max_bytes=max_bytes, max_depth=ENVELOPE_MAX_DEPTH)
    except PayloadError as exc:
        raise ConfigRejected(f"malformed envelope: {exc}", ENVELOPE_MALFORMED) from exc
    if not isinstance(raw, dict):
        raise ConfigRejected("malformed envelope: not a JSON object", ENVELOPE_MALFORMED)
    for name, kind in (("gateway", str), ("version", int), ("format", str), ("document", str), ("signature", str)):
        if not isinstance(raw.get(name), kind) or isinstance(raw.get(name), bool):
            raise ConfigRejected(f"malformed envelope: field {name!r} missing or not a {kind.__name__}",
                                 ENVELOPE_MALFORMED)
    if not LONG_MIN <= raw["version"] <= LONG_MAX:
        raise ConfigRejected(f"malformed envelope: version {raw['version']} is beyond a signed 64-bit integer",
                             ENVELOPE_MALFORMED)
    env = Envelope(raw["gateway"], raw["version"], raw["format"], raw["document"], raw["signature"])
    expected = sign(env.gateway, env.version, env.format, env.document, key)
    # As bytes: compare_digest refuses str with non-ASCII characters (TypeError).
    if not hmac.compare_digest(expected.encode(), env.signature.encode("utf-8")):
        raise ConfigRejected("bad signature", BAD_SIGNATURE)
    if gateway is not None and env.gateway != gateway:
        raise ConfigRejected(f"wrong gateway: document is for {env.gateway!r}, this is {gateway!r}", WRONG_GATEWAY)
    return env


def _long_string(text: str) -> str:
    """A Turtle long string literal holding ``text`` verbatim."""
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped = escaped[:-1] + '\\"'
    return f'"""{escaped}"""'


def build_config_document(patterns: Mapping[str, str] | Iterable[tuple[str, str]],
                          schema: list[tuple[str, str, str]], static: list[tuple[str, str, str]],
                          significance: list[SignificanceRule] = (),
                          alerts: Mapping[str, AlertText] | None = None,
                          mappings: list[tuple[str, str, str]] = (),
                          reports: Mapping[str, str] | None = None) -> str:
    """A TriG config document from its parts, the inverse of load_config_document.

    Operators keep patterns (.rq), schema (Turtle) and site data (N-Triples) as separate
    files; this assembles what a gateway receives. ``patterns`` may also be (name, text)
    pairs, written as given, so a name that comes twice stays in the document for the
    check to refuse rather than one of its patterns being dropped. ``alerts``: the alert
    text of patterns, by name; ``reports``: the report policy (``ew:report``) of per-instance
    queries, by name. ``mappings``: the RML mappings of sensor payloads, as
    triples (the ``ew:mappings`` graph, written only when there are some).
    """
    def graph(name: str, triples: list[tuple[str, str, str]]) -> str:
        body = "".join(f"  {s} {p} {o} .\n" for s, p, o in triples)
        return f"ew:{name} {{\n{body}}}\n"

    items = []
    for name, text in (patterns.items() if isinstance(patterns, Mapping) else patterns):
        alert = (alerts or {}).get(name, AlertText())
        said = "".join(f" ; ew:{key} {json.dumps(value, ensure_ascii=False)}" for key, value in
                       (("title", alert.title), ("severity", alert.severity), ("message", alert.message))
                       if value is not None)
        report = (reports or {}).get(name)
        if report is not None:
            said += f" ; ew:report {json.dumps(report)}"
        items.append(f'    ew:pattern [ a ew:Pattern ; ew:name {json.dumps(name)}{said} ; '
                     f'ew:query {_long_string(text)} ]')
    for rule in significance:
        fields = [("property", rule.property), ("deadbandAbsolute", rule.deadband_absolute),
                  ("deadbandRelative", rule.deadband_relative), ("maxSilenceSeconds", rule.max_silence_s),
                  ("maxRatePerSecond", rule.max_rate_per_s)]
        parts = ["a ew:SignificanceRule"] + [f"ew:{k} {v if k == 'property' else repr(float(v))}"
                                              for k, v in fields if v is not None]
        items.append(f"    ew:significance [ {' ; '.join(parts)} ]")
    config = "<urn:edgewave:config> a ew:GatewayConfig" + "".join(f" ;\n{item}" for item in items) + " .\n"
    return (f"@prefix ew: <{vocab.EW_NS}> .\n\n"
            f"ew:config {{\n{config}}}\n\n" + graph("schema", schema) + "\n" + graph("static", static)
            + ("\n" + graph("mappings", list(mappings)) if mappings else ""))
