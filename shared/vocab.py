"""The vocabulary edgewave speaks: the ew: namespace and the SOSA/SSN terms it uses.

Terms are given in N-Triples form (``<...>``), the form the engine and codecs use;
``iri(term)`` strips the brackets for rdflib or JSON-LD.
"""
from __future__ import annotations

EW_NS = "https://edgewave.dev/ns#"
SOSA_NS = "http://www.w3.org/ns/sosa/"
SSN_NS = "http://www.w3.org/ns/ssn/"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_NS = "http://www.w3.org/2000/01/rdf-schema#"
OWL_NS = "http://www.w3.org/2002/07/owl#"
XSD_NS = "http://www.w3.org/2001/XMLSchema#"


def iri(term: str) -> str:
    """The bare IRI of an N-Triples IRI term."""
    return term[1:-1] if term.startswith("<") and term.endswith(">") else term


def _t(ns: str, local: str) -> str:
    return f"<{ns}{local}>"


# RDF / RDFS / OWL terms the epsilon-network reads from schemas.
RDF_TYPE = _t(RDF_NS, "type")
RDFS_SUBCLASSOF = _t(RDFS_NS, "subClassOf")
RDFS_SUBPROPERTYOF = _t(RDFS_NS, "subPropertyOf")
RDFS_DOMAIN = _t(RDFS_NS, "domain")
RDFS_RANGE = _t(RDFS_NS, "range")
RDFS_CLASS = _t(RDFS_NS, "Class")
RDFS_LABEL = _t(RDFS_NS, "label")
OWL_INVERSEOF = _t(OWL_NS, "inverseOf")
OWL_SYMMETRIC = _t(OWL_NS, "SymmetricProperty")
OWL_CLASS = _t(OWL_NS, "Class")

XSD_INTEGER = _t(XSD_NS, "integer")
XSD_DECIMAL = _t(XSD_NS, "decimal")
XSD_DOUBLE = _t(XSD_NS, "double")
XSD_BOOLEAN = _t(XSD_NS, "boolean")
XSD_STRING = _t(XSD_NS, "string")
XSD_DATETIME = _t(XSD_NS, "dateTime")
XSD_LONG = _t(XSD_NS, "long")

# SOSA/SSN: the observation model sensors publish.
SOSA_OBSERVATION = _t(SOSA_NS, "Observation")
SOSA_SENSOR = _t(SOSA_NS, "Sensor")
SOSA_OBSERVABLE_PROPERTY = _t(SOSA_NS, "ObservableProperty")
SOSA_FEATURE_OF_INTEREST = _t(SOSA_NS, "FeatureOfInterest")
SOSA_PLATFORM = _t(SOSA_NS, "Platform")
SOSA_MADE_BY_SENSOR = _t(SOSA_NS, "madeBySensor")
SOSA_MADE_OBSERVATION = _t(SOSA_NS, "madeObservation")
SOSA_OBSERVED_PROPERTY = _t(SOSA_NS, "observedProperty")
SOSA_OBSERVES = _t(SOSA_NS, "observes")
SOSA_HAS_FEATURE_OF_INTEREST = _t(SOSA_NS, "hasFeatureOfInterest")
SOSA_HAS_SIMPLE_RESULT = _t(SOSA_NS, "hasSimpleResult")
SOSA_RESULT_TIME = _t(SOSA_NS, "resultTime")
SOSA_IS_HOSTED_BY = _t(SOSA_NS, "isHostedBy")
SOSA_HOSTS = _t(SOSA_NS, "hosts")

# ew: terms of events, config documents and significance settings.
EW = EW_NS
EW_MATCH = _t(EW_NS, "Match")
EW_SIGNIFICANT = _t(EW_NS, "Significant")
EW_GATEWAY_CONFIG = _t(EW_NS, "GatewayConfig")
EW_PATTERN = _t(EW_NS, "Pattern")
EW_HAS_PATTERN = _t(EW_NS, "pattern")
EW_NAME = _t(EW_NS, "name")
EW_QUERY = _t(EW_NS, "query")
EW_TITLE = _t(EW_NS, "title")          # a pattern's alert text (shared/alert_text.py)
EW_SEVERITY = _t(EW_NS, "severity")
EW_MESSAGE = _t(EW_NS, "message")
EW_REPORT = _t(EW_NS, "report")      # a per-instance query's report policy
EW_VERSION = _t(EW_NS, "version")
EW_SIGNIFICANCE = _t(EW_NS, "significance")
EW_SIGNIFICANCE_RULE = _t(EW_NS, "SignificanceRule")
EW_PROPERTY = _t(EW_NS, "property")
EW_DEADBAND_ABSOLUTE = _t(EW_NS, "deadbandAbsolute")
EW_DEADBAND_RELATIVE = _t(EW_NS, "deadbandRelative")
EW_MAX_SILENCE = _t(EW_NS, "maxSilenceSeconds")
EW_MAX_RATE = _t(EW_NS, "maxRatePerSecond")
EW_CONFIDENCE = _t(EW_NS, "confidence")
EW_SCHEMA_GRAPH = _t(EW_NS, "schema")
EW_STATIC_GRAPH = _t(EW_NS, "static")
EW_CONFIG_GRAPH = _t(EW_NS, "config")
EW_MAPPINGS_GRAPH = _t(EW_NS, "mappings")   # RML mappings of sensor payloads (agent/mapping/)
