"""One reading as one MQTT message: a SOSA observation in N-Triples(-star).

Three firmware dialects, as a mixed fleet speaks them:

- ``sosa``: the plain SOSA shape (``sosa:madeBySensor``, ``sosa:hasSimpleResult``, ...);
- ``acme``: ACME building sensors type the observation ``acme:Measurement``, put the
  result under ``acme:value`` and state the sensor link from the sensor's side
  (``sensor sosa:madeObservation obs``);
- ``medisense``: MediSense wearables name the wearer with ``medi:patient``.

Kinds with a confidence annotate the result in RDF-star, as the RSP-QL* paper does:
``<< obs sosa:hasSimpleResult v >> ew:confidence "0.93"^^xsd:decimal``; the annotated
triple is asserted too. Vendor dialects differ from SOSA only in terms the schema maps
back onto SOSA, so with RDFS entailment every dialect is the same observation.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from edgewave.shared import vocab
from edgewave.shared.decimal_lexical import decimal_lexical
from edgewave.shared.ntriples import make_literal, make_quoted, serialize

from . import domain

if TYPE_CHECKING:
    from .site import SensorSpec


@dataclass(frozen=True)
class Reading:
    """A value a sensor reports at ``ms`` (epoch milliseconds); ``event`` marks injected readings."""

    ms: int
    sensor: "SensorSpec"
    value: Any
    confidence: float | None = None
    event: int | None = None  # index of the scenario event that injected it, None for background

    @property
    def observation(self) -> str:
        return observation_iri(self.sensor, self.ms)


def observation_iri(sensor: "SensorSpec", ms: int) -> str:
    """Observations are named by sensor and time: a sensor reports at most once per millisecond."""
    return domain.site_iri(sensor.gateway, "obs", sensor.local, str(ms))


def iso_time(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def result_term(result: str, value: Any) -> str:
    """The hasSimpleResult literal of a value of the given result type."""
    if result == "decimal":
        return make_literal(decimal_lexical(float(value)), vocab.XSD_DECIMAL)
    if result == "boolean":
        return make_literal("true" if value else "false", vocab.XSD_BOOLEAN)
    if result == "door":
        return make_literal(str(value))
    if result == "location":
        lat, long = value
        return make_literal(f"POINT({decimal_lexical(long)} {decimal_lexical(lat)})", domain.WKT_LITERAL)
    raise ValueError(f"unknown result type {result!r}")


def encode(reading: Reading) -> list[str]:
    """The N-Triples lines of one observation event, in a fixed order."""
    sensor = reading.sensor
    kind = sensor.kind
    obs = reading.observation
    result = result_term(kind.result, reading.value)
    dialect = sensor.dialect
    triples: list[tuple[str, str, str]] = []
    if dialect == "acme":
        triples.append((obs, vocab.RDF_TYPE, domain.ACME_MEASUREMENT))
        triples.append((sensor.iri, vocab.SOSA_MADE_OBSERVATION, obs))
    else:
        triples.append((obs, vocab.RDF_TYPE, vocab.SOSA_OBSERVATION))
        triples.append((obs, vocab.SOSA_MADE_BY_SENSOR, sensor.iri))
    triples.append((obs, vocab.SOSA_OBSERVED_PROPERTY, kind.observed_property))
    foi_property = domain.MEDI_PATIENT if dialect == "medisense" else vocab.SOSA_HAS_FEATURE_OF_INTEREST
    triples.append((obs, foi_property, sensor.feature_of_interest))
    result_property = domain.ACME_VALUE if dialect == "acme" else vocab.SOSA_HAS_SIMPLE_RESULT
    triples.append((obs, result_property, result))
    if reading.confidence is not None:
        annotated = make_quoted((obs, result_property, result))
        confidence = make_literal(decimal_lexical(reading.confidence), vocab.XSD_DECIMAL)
        triples.append((annotated, domain.CONFIDENCE, confidence))
    if kind.result == "location":
        lat, long = reading.value
        triples.append((obs, domain.GEO_LAT, make_literal(decimal_lexical(lat), vocab.XSD_DECIMAL)))
        triples.append((obs, domain.GEO_LONG, make_literal(decimal_lexical(long), vocab.XSD_DECIMAL)))
    triples.append((obs, vocab.SOSA_RESULT_TIME, make_literal(iso_time(reading.ms), vocab.XSD_DATETIME)))
    return [serialize(t) for t in triples]
