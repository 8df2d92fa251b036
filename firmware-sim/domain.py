"""Terms of the simulated domain (configs/schema/building.ttl), in N-Triples form.

The SOSA terms and the ``ew:`` namespace come from ``edgewave.shared.vocab``; this module
adds the domain classes and properties, the two vendors' terms, and the IRIs the
simulator mints for sites, sensors and observations.
"""
from __future__ import annotations

from edgewave.shared.vocab import EW_NS, XSD_NS

GEO_NS = "http://www.w3.org/2003/01/geo/wgs84_pos#"
FOAF_NS = "http://xmlns.com/foaf/0.1/"
GEOSPARQL_NS = "http://www.opengis.net/ont/geosparql#"
ACME_NS = "https://acme.example/ns#"
MEDI_NS = "https://medisense.example/ns#"
# Instances: every IRI of a gateway's site starts with this and the gateway id.
SITE_NS = "http://example.org/"
# Stream IRIs as the agent maps topic segments by default (input.default_stream).
STREAM_NS = "http://example.org/stream/"


def _t(ns: str, local: str) -> str:
    return f"<{ns}{local}>"


def ew(local: str) -> str:
    return _t(EW_NS, local)


def acme(local: str) -> str:
    return _t(ACME_NS, local)


def medi(local: str) -> str:
    return _t(MEDI_NS, local)


def site_iri(gateway: str, *path: str) -> str:
    """``<http://example.org/<gateway>/<path...>>``: the IRI of anything on a gateway's site."""
    return "<" + SITE_NS + "/".join((gateway,) + path) + ">"


def stream_iri(stream: str) -> str:
    return _t(STREAM_NS, stream)


XSD_DATETIME_IRI = f"<{XSD_NS}dateTime>"

GEO_LAT = _t(GEO_NS, "lat")
GEO_LONG = _t(GEO_NS, "long")
WKT_LITERAL = _t(GEOSPARQL_NS, "wktLiteral")
FOAF_PERSON = _t(FOAF_NS, "Person")
FOAF_KNOWS = _t(FOAF_NS, "knows")

# Classes of the site.
BUILDING = ew("Building")
ROOM = ew("Room")
HOME = ew("Home")
RESIDENT = ew("Resident")
PATIENT = ew("Patient")

# Site relations and the parameters patterns join against.
LOCATED_IN = ew("locatedIn")
IN_BUILDING = ew("inBuilding")
LIVES_IN = ew("livesIn")
WORN_BY = ew("wornBy")
ARMED = ew("armed")
FIRE_TEMPERATURE_THRESHOLD = ew("fireTemperatureThreshold")
HEART_RATE_UPPER_LIMIT = ew("heartRateUpperLimit")
BREATHING_RATE_LOWER_LIMIT = ew("breathingRateLowerLimit")
MINIMUM_CONFIDENCE = ew("minimumConfidence")
NEARBY_WITHIN_DEGREES = ew("nearbyWithinDegrees")
CONFIDENCE = ew("confidence")

# Vendor terms (section 5 of the schema).
ACME_MEASUREMENT = acme("Measurement")
ACME_VALUE = acme("value")
MEDI_PATIENT = medi("patient")
