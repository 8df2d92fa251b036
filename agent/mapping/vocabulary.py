"""The RML and edgewave terms a mapping is written in, as N-Triples terms.

RML-Core's namespace is ``http://w3id.org/rml/``. Mappings written for the older RML
(``http://semweb.mmlab.be/ns/rml#`` with R2RML's ``http://www.w3.org/ns/r2rml#`` and
``http://semweb.mmlab.be/ns/ql#``) are read too: ``canonical`` rewrites their terms to
RML-Core's before anything else looks at them.
"""
from __future__ import annotations

from edgewave.shared import vocab

RML = "http://w3id.org/rml/"
OLD_RML = "http://semweb.mmlab.be/ns/rml#"
R2RML = "http://www.w3.org/ns/r2rml#"
QL = "http://semweb.mmlab.be/ns/ql#"
EW = vocab.EW_NS
QUDT = "http://qudt.org/schema/qudt/"
UNIT = "http://qudt.org/vocab/unit/"


def rml(local: str) -> str:
    return f"<{RML}{local}>"


def ew(local: str) -> str:
    return f"<{EW}{local}>"


def canonical(term: str) -> str:
    """An old-namespace RML, R2RML or QL IRI term as its RML-Core term; any other term as it is."""
    if term.startswith("<http://"):
        for old in (OLD_RML, R2RML, QL):
            if term.startswith(old, 1):
                return rml(term[1 + len(old):-1])
    return term


RDF_TYPE = vocab.RDF_TYPE

# RML-Core terms the compiler reads.
TRIPLES_MAP = rml("TriplesMap")
LOGICAL_SOURCE = rml("logicalSource")
SOURCE = rml("source")
ITERATOR = rml("iterator")
REFERENCE_FORMULATION = rml("referenceFormulation")
JSONPATH = rml("JSONPath")
SUBJECT_MAP = rml("subjectMap")
SUBJECT = rml("subject")
PREDICATE_OBJECT_MAP = rml("predicateObjectMap")
PREDICATE_MAP = rml("predicateMap")
PREDICATE = rml("predicate")
OBJECT_MAP = rml("objectMap")
OBJECT = rml("object")
CLASS = rml("class")
CONSTANT = rml("constant")
REFERENCE = rml("reference")
TEMPLATE = rml("template")
TERM_TYPE = rml("termType")
DATATYPE = rml("datatype")
DATATYPE_MAP = rml("datatypeMap")
LANGUAGE = rml("language")
LANGUAGE_MAP = rml("languageMap")
GRAPH = rml("graph")
GRAPH_MAP = rml("graphMap")
DEFAULT_GRAPH = rml("defaultGraph")
IRI = rml("IRI")
URI = rml("URI")
BLANK_NODE = rml("BlankNode")
LITERAL = rml("Literal")
# Node types a mapping may state (and that say nothing more to the compiler).
DECLARED_TYPES = frozenset(rml(t) for t in (
    "TriplesMap", "LogicalSource", "SubjectMap", "PredicateObjectMap", "PredicateMap", "ObjectMap",
    "TermMap", "GraphMap", "DatatypeMap", "LanguageMap", "ExpressionMap", "Source"))

# edgewave's extensions.
MQTT_STREAM = ew("MqttStream")
TOPIC_FILTER = ew("topicFilter")
PAYLOAD_FORMAT = ew("payloadFormat")
STREAM = ew("stream")
BASE_IRI = ew("baseIRI")
TIME_REFERENCE = ew("timeReference")
NAME = ew("name")
MAP_VALUE = ew("mapValue")
FROM = ew("from")
TO = ew("to")
VALUE_TABLE = ew("valueTable")
SENML_UNITS = ew("SenMLUnits")
REQUIRED = ew("required")
PAYLOAD_TIME = ew("PayloadTime")
ARRIVAL_TIME = ew("ArrivalTime")
