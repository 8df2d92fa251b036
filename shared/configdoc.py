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
from typing import Any

import rdflib
from rdflib import Literal, URIRef

from . import vocab
from .ntriples import parse_lines
from .rdflib_literals import literals_as_written

FORMATS = ("trig", "turtle")

# Schema vocabulary: triples with these predicates (or typing a class/property) go to the epsilon-network.
_SCHEMA_PREDICATES = {vocab.RDFS_SUBCLASSOF, vocab.RDFS_SUBPROPERTYOF, vocab.RDFS_DOMAIN, vocab.RDFS_RANGE,
                      vocab.OWL_INVERSEOF}
_SCHEMA_TYPES = {vocab.OWL_SYMMETRIC, vocab.RDFS_CLASS, vocab.OWL_CLASS,
                 "<http://www.w3.org/1999/02/22-rdf-syntax-ns#Property>",
                 "<http://www.w3.org/2002/07/owl#ObjectProperty>",
                 "<http://www.w3.org/2002/07/owl#DatatypeProperty>"}


class ConfigRejected(Exception):
    """A config document or envelope the agent must not apply; ``reason`` goes into the ack."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
    schema: list[tuple[str, str, str]] = field(default_factory=list)
    static: list[tuple[str, str, str]] = field(default_factory=list)
    significance: list[SignificanceRule] = field(default_factory=list)


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


def _parse_error(exc: Exception) -> ConfigRejected:
    text = str(exc)
    match = re.search(r"line (\d+)", text)
    where = f" at line {match.group(1)}" if match else ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.strip().startswith("at line")]
    what = lines[0] if lines else type(exc).__name__
    return ConfigRejected(f"parse error{where}: {what}")


def _number(graph: rdflib.Graph, node, pred: str) -> float | None:
    value = graph.value(node, URIRef(vocab.iri(pred)))
    if value is None:
        return None
    try:
        return float(value.toPython() if isinstance(value, Literal) else value)
    except (TypeError, ValueError) as exc:
        raise ConfigRejected(f"{vocab.iri(pred)} must be a number, got {value!r}") from exc


def load_config_document(text: str, fmt: str = "trig") -> ConfigDocument:
    """Parse a config document; raises ConfigRejected with a reason an operator can act on."""
    if fmt not in FORMATS:
        raise ConfigRejected(f"unknown config format {fmt!r} (expected one of {', '.join(FORMATS)})")
    dataset = rdflib.Dataset()
    try:
        with literals_as_written():
            dataset.parse(data=text, format=fmt)
    except Exception as exc:  # rdflib raises many types for bad syntax
        raise _parse_error(exc) from exc

    config_graph = rdflib.Graph()
    schema_graph = rdflib.Graph()
    static_graph = rdflib.Graph()
    config_name = URIRef(vocab.iri(vocab.EW_CONFIG_GRAPH))
    schema_name = URIRef(vocab.iri(vocab.EW_SCHEMA_GRAPH))
    static_name = URIRef(vocab.iri(vocab.EW_STATIC_GRAPH))
    config_preds = {URIRef(vocab.iri(p)) for p in (
        vocab.EW_HAS_PATTERN, vocab.EW_NAME, vocab.EW_QUERY, vocab.EW_VERSION, vocab.EW_SIGNIFICANCE,
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
        elif p in config_preds or (p == rdf_type and o in config_types):
            config_graph.add((s, p, o))
        elif p in schema_preds or (p == rdf_type and o in schema_types):
            schema_graph.add((s, p, o))
        else:
            static_graph.add((s, p, o))

    doc = ConfigDocument(schema=_to_ntriples(schema_graph), static=_to_ntriples(static_graph))
    ew = rdflib.Namespace(vocab.EW_NS)
    for node in config_graph.subjects(rdf_type, ew.GatewayConfig):
        version = config_graph.value(node, ew.version)
        if version is not None:
            try:
                doc.version = int(version)
            except ValueError as exc:
                raise ConfigRejected(f"ew:version must be an integer, got {version!r}") from exc
    for node in set(config_graph.subjects(ew.query, None)):
        name = config_graph.value(node, ew.name)
        if name is None:
            raise ConfigRejected(f"pattern {node} has ew:query but no ew:name")
        if str(name) in doc.patterns:
            raise ConfigRejected(f"duplicate pattern name {name}")
        doc.patterns[str(name)] = str(config_graph.value(node, ew.query))
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


def verify_envelope(payload: bytes | str, key: str | bytes, gateway: str | None = None) -> Envelope:
    """Check an envelope's shape, addressee and signature; raises ConfigRejected with the reason."""
    try:
        raw: Any = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigRejected(f"malformed envelope: not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ConfigRejected("malformed envelope: not a JSON object")
    for name, kind in (("gateway", str), ("version", int), ("format", str), ("document", str), ("signature", str)):
        if not isinstance(raw.get(name), kind) or isinstance(raw.get(name), bool):
            raise ConfigRejected(f"malformed envelope: field {name!r} missing or not a {kind.__name__}")
    env = Envelope(raw["gateway"], raw["version"], raw["format"], raw["document"], raw["signature"])
    expected = sign(env.gateway, env.version, env.format, env.document, key)
    if not hmac.compare_digest(expected, env.signature):
        raise ConfigRejected("bad signature")
    if gateway is not None and env.gateway != gateway:
        raise ConfigRejected(f"wrong gateway: document is for {env.gateway!r}, this is {gateway!r}")
    return env


def _long_string(text: str) -> str:
    """A Turtle long string literal holding ``text`` verbatim."""
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped = escaped[:-1] + '\\"'
    return f'"""{escaped}"""'


def build_config_document(patterns: dict[str, str], schema: list[tuple[str, str, str]],
                          static: list[tuple[str, str, str]],
                          significance: list[SignificanceRule] = ()) -> str:
    """A TriG config document from its parts, the inverse of load_config_document.

    Operators keep patterns (.rq), schema (Turtle) and site data (N-Triples) as separate
    files; this assembles what a gateway receives.
    """
    def graph(name: str, triples: list[tuple[str, str, str]]) -> str:
        body = "".join(f"  {s} {p} {o} .\n" for s, p, o in triples)
        return f"ew:{name} {{\n{body}}}\n"

    items = []
    for name, text in patterns.items():
        items.append(f'    ew:pattern [ a ew:Pattern ; ew:name {json.dumps(name)} ; ew:query {_long_string(text)} ]')
    for rule in significance:
        fields = [("property", rule.property), ("deadbandAbsolute", rule.deadband_absolute),
                  ("deadbandRelative", rule.deadband_relative), ("maxSilenceSeconds", rule.max_silence_s),
                  ("maxRatePerSecond", rule.max_rate_per_s)]
        parts = ["a ew:SignificanceRule"] + [f"ew:{k} {v if k == 'property' else repr(float(v))}"
                                              for k, v in fields if v is not None]
        items.append(f"    ew:significance [ {' ; '.join(parts)} ]")
    config = "<urn:edgewave:config> a ew:GatewayConfig" + "".join(f" ;\n{item}" for item in items) + " .\n"
    return (f"@prefix ew: <{vocab.EW_NS}> .\n\n"
            f"ew:config {{\n{config}}}\n\n" + graph("schema", schema) + "\n" + graph("static", static))
