"""Reading a mapping's RDF (N-Triples term triples) into triples-map descriptions.

Only what is reachable from a triples map is read, so a mapping may travel inside a
larger document (a gateway's config: patterns, schema, static data). Every predicate and
type in the RML and edgewave namespaces on a node the compiler reads must be one it
understands: anything else is a MappingError naming the term and the triples map, so a
mapping never silently means less than it says. Terms of other vocabularies
(``rdfs:comment``, ``rdfs:label``) are ignored.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from edgewave.shared.ntriples import is_blank, is_iri, is_literal, literal_parts
from edgewave.shared.topics import TopicError, check_topic_filter

from . import vocabulary as v
from .errors import MappingError
from .payload_formats import FORMATS

UNSAFE_IRI = v.rml("UnsafeIRI")
UNSAFE_URI = v.rml("UnsafeURI")
_TERM_TYPES = {v.IRI: v.IRI, v.URI: v.URI, UNSAFE_IRI: UNSAFE_IRI, UNSAFE_URI: UNSAFE_IRI,
               v.BLANK_NODE: v.BLANK_NODE, v.LITERAL: v.LITERAL}
_WATCHED = (f"<{v.RML}", f"<{v.EW}")


@dataclass(frozen=True)
class SourceSpec:
    """An ``ew:MqttStream``: where a triples map's messages come from and how to read them."""

    topic_filter: str
    payload_format: str
    stream: str | None            # IRI term
    base_iri: str | None          # bare IRI
    time_reference: str | None    # JSONPath from the payload's root to its time
    name: str | None


@dataclass(frozen=True)
class TermMapSpec:
    """One term map: how a term is made (``kind`` constant, reference, template or fresh blank)."""

    kind: str
    value: str
    term_type: str
    datatype: str | None = None
    language: str | None = None
    value_map: tuple[tuple[tuple[str, object], str], ...] | None = None
    value_table: str | None = None
    required: bool = False
    where: str = ""


@dataclass
class TriplesMapSpec:
    iri: str
    source: SourceSpec
    iterator: str
    base_iri: str | None
    subject: TermMapSpec
    classes: tuple[str, ...]
    predicate_objects: list[tuple[list[TermMapSpec], list[TermMapSpec]]] = field(default_factory=list)


def _label(term: str) -> str:
    return term if not is_blank(term) else "a blank node"


class _Graph:
    def __init__(self, triples: Iterable[tuple[str, str, str]]) -> None:
        self.out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for s, p, o in triples:
            self.out[v.canonical(s)][v.canonical(p)].append(v.canonical(o))

    def values(self, node: str, predicate: str) -> list[str]:
        found = self.out.get(node)
        return list(dict.fromkeys(found.get(predicate, ()))) if found else []

    def one(self, node: str, predicate: str, where: str) -> str | None:
        found = self.values(node, predicate)
        if len(found) > 1:
            raise MappingError(f"{where}: more than one {predicate}")
        return found[0] if found else None

    def check(self, node: str, allowed: set[str], where: str, types: frozenset[str] = v.DECLARED_TYPES) -> None:
        """MappingError for an RML or edgewave predicate or type on ``node`` that the compiler does not read."""
        for predicate, objects in self.out.get(node, {}).items():
            if predicate == v.RDF_TYPE:
                for o in objects:
                    if o.startswith(_WATCHED) and o not in types:
                        raise MappingError(f"{where}: type {o} is not supported")
            elif predicate.startswith(_WATCHED) and predicate not in allowed:
                raise MappingError(f"{where}: {predicate} is not supported")


def _string(graph: _Graph, node: str, predicate: str, where: str) -> str | None:
    term = graph.one(node, predicate, where)
    if term is None:
        return None
    if not is_literal(term):
        raise MappingError(f"{where}: {predicate} must be a string literal, not {term}")
    return literal_parts(term)[0]


def _check_topic_filter(topic: str, where: str) -> str:
    """The MQTT rules and edgewave's (shared/topics.py), as a MappingError naming the triples map."""
    try:
        return check_topic_filter(topic)
    except TopicError as exc:
        raise MappingError(f"{where}: {exc}") from None


_SOURCE_PREDICATES = {v.TOPIC_FILTER, v.PAYLOAD_FORMAT, v.STREAM, v.BASE_IRI, v.TIME_REFERENCE, v.NAME}


def _source(graph: _Graph, node: str, where: str) -> SourceSpec:
    if is_literal(node) or v.MQTT_STREAM not in graph.values(node, v.RDF_TYPE) and not graph.values(
            node, v.TOPIC_FILTER):
        kinds = ", ".join(graph.values(node, v.RDF_TYPE)) or _label(node)
        raise MappingError(f"{where}: rml:source must be an ew:MqttStream (edgewave reads MQTT messages "
                           f"only), not {kinds}")
    graph.check(node, _SOURCE_PREDICATES, where, v.DECLARED_TYPES | {v.MQTT_STREAM})
    topic = _string(graph, node, v.TOPIC_FILTER, where)
    if topic is None:
        raise MappingError(f"{where}: the ew:MqttStream has no ew:topicFilter")
    payload_format = _string(graph, node, v.PAYLOAD_FORMAT, where) or "json"
    if payload_format not in FORMATS:
        raise MappingError(f"{where}: ew:payloadFormat {payload_format!r} is not supported "
                           f"(one of {', '.join(FORMATS)})")
    stream = graph.one(node, v.STREAM, where)
    if stream is not None and not is_iri(stream):
        raise MappingError(f"{where}: ew:stream must be an IRI, not {stream}")
    base = graph.one(node, v.BASE_IRI, where)
    if base is not None:
        base = base[1:-1] if is_iri(base) else literal_parts(base)[0] if is_literal(base) else None
        if base is None:
            raise MappingError(f"{where}: ew:baseIRI must be an IRI or a string")
    time_reference = _string(graph, node, v.TIME_REFERENCE, where)
    if time_reference is not None and payload_format != "json":
        raise MappingError(f"{where}: ew:timeReference applies to json payloads only "
                           f"(SenML records carry their own time)")
    return SourceSpec(_check_topic_filter(topic, where), payload_format, stream, base, time_reference,
                      _string(graph, node, v.NAME, where))


_TERM_MAP_PREDICATES = {v.CONSTANT, v.REFERENCE, v.TEMPLATE, v.TERM_TYPE, v.DATATYPE, v.DATATYPE_MAP,
                        v.LANGUAGE, v.LANGUAGE_MAP, v.MAP_VALUE, v.VALUE_TABLE, v.REQUIRED}


def _constant_map(graph: _Graph, node: str, where: str) -> str:
    constant = graph.one(node, v.CONSTANT, where)
    if constant is None:
        raise MappingError(f"{where}: only constant-valued datatype and language maps are supported")
    graph.check(node, {v.CONSTANT}, where)
    return constant


def _value_map(graph: _Graph, node: str, where: str) -> tuple | None:
    entries = graph.values(node, v.MAP_VALUE)
    if not entries:
        return None
    out = []
    for entry in entries:
        graph.check(entry, {v.FROM, v.TO}, where)
        source, target = graph.one(entry, v.FROM, where), graph.one(entry, v.TO, where)
        if source is None or target is None or not is_literal(source):
            raise MappingError(f"{where}: each ew:mapValue needs one literal ew:from and one ew:to")
        out.append((value_key_of_literal(source), target))
    return tuple(out)


_NUMERIC = {f"<{v.vocab.XSD_NS}{n}>" for n in ("decimal", "integer", "int", "long", "double", "float")}


def value_key_of_literal(term: str) -> tuple[str, object]:
    """What an ``ew:from`` literal matches: booleans match JSON booleans, numbers numbers, the rest strings."""
    lexical, datatype, _ = literal_parts(term)
    if datatype == v.vocab.XSD_BOOLEAN:
        return ("boolean", lexical in ("true", "1"))
    if datatype in _NUMERIC:
        try:
            return ("number", float(lexical))
        except ValueError:
            raise MappingError(f"ew:from {term} is not a number") from None
    return ("string", lexical)


def _term_map(graph: _Graph, node: str, position: str, where: str) -> TermMapSpec:
    where = f"{where}, {position} map"
    allowed = set(_TERM_MAP_PREDICATES)
    if position == "subject":
        allowed |= {v.CLASS, v.GRAPH_MAP, v.GRAPH}
    for refused in (v.rml("parentTriplesMap"), v.rml("joinCondition")):
        if graph.values(node, refused):
            raise MappingError(f"{where}: {refused} (referencing object maps, joins) is not supported")
    graph.check(node, allowed, where)
    expressions = [(kind, graph.one(node, p, where)) for kind, p in (
        ("constant", v.CONSTANT), ("reference", v.REFERENCE), ("template", v.TEMPLATE))]
    expressions = [(k, e) for k, e in expressions if e is not None]
    if len(expressions) > 1:
        raise MappingError(f"{where}: more than one of rml:constant, rml:reference, rml:template")
    term_type = graph.one(node, v.TERM_TYPE, where)
    if term_type is not None and term_type not in _TERM_TYPES:
        raise MappingError(f"{where}: rml:termType {term_type} is not supported")
    term_type = _TERM_TYPES.get(term_type) if term_type else None
    datatype = graph.one(node, v.DATATYPE, where)
    language = _string(graph, node, v.LANGUAGE, where)
    if graph.values(node, v.DATATYPE_MAP):
        if datatype is not None:
            raise MappingError(f"{where}: both rml:datatype and rml:datatypeMap")
        datatype = _constant_map(graph, graph.one(node, v.DATATYPE_MAP, where), where)
    if graph.values(node, v.LANGUAGE_MAP):
        if language is not None:
            raise MappingError(f"{where}: both rml:language and rml:languageMap")
        tag = _constant_map(graph, graph.one(node, v.LANGUAGE_MAP, where), where)
        if not is_literal(tag):
            raise MappingError(f"{where}: a language map's constant must be a string")
        language = literal_parts(tag)[0]
    if datatype is not None and not is_iri(datatype):
        raise MappingError(f"{where}: rml:datatype must be an IRI, not {datatype}")
    if datatype is not None and language is not None:
        raise MappingError(f"{where}: a literal has a datatype or a language tag, not both")
    value_map = _value_map(graph, node, where)
    value_table = graph.one(node, v.VALUE_TABLE, where)
    if value_table is not None and value_table != v.SENML_UNITS:
        raise MappingError(f"{where}: ew:valueTable {value_table} is not a table edgewave knows "
                           f"(ew:SenMLUnits)")
    if (value_map or value_table) and not expressions or (value_map or value_table) and \
            expressions[0][0] == "constant":
        raise MappingError(f"{where}: ew:mapValue and ew:valueTable apply to references and templates")
    if value_map and value_table:
        raise MappingError(f"{where}: both ew:mapValue and ew:valueTable")
    required = graph.one(node, v.REQUIRED, where)
    required_flag = required is not None and is_literal(required) and literal_parts(required)[0] in ("true", "1")
    if not expressions:
        if term_type == v.BLANK_NODE:
            return TermMapSpec("blank", "", v.BLANK_NODE, where=where)
        raise MappingError(f"{where}: needs one of rml:constant, rml:reference, rml:template")
    kind, expression = expressions[0]
    if kind == "constant":
        if term_type is not None or datatype is not None or language is not None:
            if (term_type == v.LITERAL and is_literal(expression)
                    or term_type in (v.IRI, v.URI) and is_iri(expression)):
                pass
            elif term_type is not None:
                raise MappingError(f"{where}: constant {expression} is not of rml:termType {term_type}")
        if position in ("subject", "predicate", "class") and not is_iri(expression) and not (
                position == "subject" and is_blank(expression)):
            raise MappingError(f"{where}: a {position} must be an IRI, not {expression}")
        return TermMapSpec("constant", expression, "", where=where)
    if not is_literal(expression):
        raise MappingError(f"{where}: rml:{kind} must be a string literal, not {expression}")
    text = literal_parts(expression)[0]
    if term_type is None:
        if position == "object" and (kind == "reference" or datatype is not None or language is not None):
            term_type = v.LITERAL
        else:
            term_type = v.IRI
    if term_type == v.LITERAL and position != "object":
        raise MappingError(f"{where}: a {position} cannot be a literal (rml:termType rml:Literal)")
    if term_type == v.BLANK_NODE and position == "predicate":
        raise MappingError(f"{where}: a predicate cannot be a blank node")
    if term_type != v.LITERAL and (datatype is not None or language is not None):
        raise MappingError(f"{where}: rml:datatype and rml:language apply to literals only")
    return TermMapSpec(kind, text, term_type, datatype, language, value_map, value_table, required_flag, where)


def _graph_is_default(graph: _Graph, node: str, where: str) -> None:
    """Graph maps are refused, except those naming the default graph (which say nothing)."""
    for constant in graph.values(node, v.GRAPH):
        if constant != v.DEFAULT_GRAPH:
            raise MappingError(f"{where}: named graphs (rml:graph {constant}) are not supported; "
                               "an event is triples in the default graph")
    for graph_map in graph.values(node, v.GRAPH_MAP):
        graph.check(graph_map, {v.CONSTANT}, where)
        if graph.values(graph_map, v.CONSTANT) != [v.DEFAULT_GRAPH]:
            raise MappingError(f"{where}: named graphs (rml:graphMap) are not supported; "
                               "an event is triples in the default graph")


def _shortcut_or_maps(graph: _Graph, node: str, shortcut: str, full: str, position: str,
                      where: str) -> list[TermMapSpec]:
    out = [TermMapSpec("constant", c, "", where=where) for c in graph.values(node, shortcut)]
    for c in graph.values(node, shortcut):
        if position != "object" and not is_iri(c) and not (position == "subject" and is_blank(c)):
            raise MappingError(f"{where}: a {position} must be an IRI, not {c}")
    out += [_term_map(graph, m, position, where) for m in graph.values(node, full)]
    return out


def read_triples_maps(triples: Iterable[tuple[str, str, str]]) -> list[TriplesMapSpec]:
    """Every triples map in ``triples``, read and checked; MappingError for anything outside the subset."""
    graph = _Graph(triples)
    roots = {s for s, props in graph.out.items()
             if v.TRIPLES_MAP in props.get(v.RDF_TYPE, ()) or v.LOGICAL_SOURCE in props}
    if not roots:
        raise MappingError("no rml:TriplesMap in the mapping")
    specs = []
    for iri in sorted(roots):
        where = f"triples map {_label(iri)}"
        graph.check(iri, {v.LOGICAL_SOURCE, v.SUBJECT_MAP, v.SUBJECT, v.PREDICATE_OBJECT_MAP, v.rml("baseIRI")},
                    where)
        for refused in (v.rml("logicalTable"),):
            if graph.values(iri, refused):
                raise MappingError(f"{where}: {refused} (SQL sources) is not supported")
        logical = graph.one(iri, v.LOGICAL_SOURCE, where)
        if logical is None:
            raise MappingError(f"{where}: has no rml:logicalSource")
        graph.check(logical, {v.SOURCE, v.ITERATOR, v.REFERENCE_FORMULATION}, where)
        formulation = graph.one(logical, v.REFERENCE_FORMULATION, where)
        if formulation is not None and formulation != v.JSONPATH:
            raise MappingError(f"{where}: rml:referenceFormulation {formulation} is not supported (rml:JSONPath)")
        source_node = graph.one(logical, v.SOURCE, where)
        if source_node is None:
            raise MappingError(f"{where}: the logical source has no rml:source")
        source = _source(graph, source_node, where)
        iterator = _string(graph, logical, v.ITERATOR, where) or "$"
        base = graph.one(iri, v.rml("baseIRI"), where)
        if base is not None:
            base = base[1:-1] if is_iri(base) else literal_parts(base)[0] if is_literal(base) else None
        subjects = _shortcut_or_maps(graph, iri, v.SUBJECT, v.SUBJECT_MAP, "subject", where)
        if len(subjects) != 1:
            raise MappingError(f"{where}: needs exactly one subject map (has {len(subjects)})")
        classes: tuple[str, ...] = ()
        for subject_map in graph.values(iri, v.SUBJECT_MAP):
            _graph_is_default(graph, subject_map, where)
            classes = tuple(graph.values(subject_map, v.CLASS))
            for c in classes:
                if not is_iri(c):
                    raise MappingError(f"{where}: rml:class {c} is not an IRI")
        spec = TriplesMapSpec(iri, source, iterator, base, subjects[0], classes)
        for pom in graph.values(iri, v.PREDICATE_OBJECT_MAP):
            pom_where = f"{where}, predicate-object map"
            graph.check(pom, {v.PREDICATE, v.PREDICATE_MAP, v.OBJECT, v.OBJECT_MAP, v.GRAPH, v.GRAPH_MAP},
                        pom_where)
            _graph_is_default(graph, pom, pom_where)
            predicates = _shortcut_or_maps(graph, pom, v.PREDICATE, v.PREDICATE_MAP, "predicate", pom_where)
            objects = _shortcut_or_maps(graph, pom, v.OBJECT, v.OBJECT_MAP, "object", pom_where)
            if not predicates or not objects:
                raise MappingError(f"{pom_where}: needs at least one predicate and one object")
            spec.predicate_objects.append((predicates, objects))
        specs.append(spec)
    return specs
