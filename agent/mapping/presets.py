"""The shipped mappings (Zigbee2MQTT, Tasmota, ESPHome, SenML in JSON and in CBOR) and how a gateway document gets one.

The presets live inside the package (``agent/mapping/ttl/``) so that they ship in the wheel
as package data and are found the same way from a checkout and an installed agent or
cloud; ``configs/mappings/`` links to them, where users look for configuration to read and
copy. A preset carries no stream and no base IRI: ``preset_triples`` adds them (the
cloud's make-config, when it puts a preset into a gateway's document). Reading Turtle
needs rdflib, which authoring tools have; the gateway compiles the N-Triples terms.
"""
from __future__ import annotations

from pathlib import Path

from edgewave.shared.ntriples import make_iri, make_literal, parse

from .errors import MappingError
from .vocabulary import BASE_IRI, MQTT_STREAM, RDF_TYPE, STREAM

PRESETS = ("senml", "senml-cbor", "zigbee2mqtt", "tasmota", "esphome")
_FOLDER = Path(__file__).resolve().parent / "ttl"


def preset_path(name: str) -> Path:
    """The Turtle file of a preset; MappingError for a name not in PRESETS."""
    if name not in PRESETS:
        raise MappingError(f"no mapping preset {name!r} (one of {', '.join(PRESETS)})")
    return _FOLDER / f"{name}.ttl"


def preset_triples(name: str, *, stream: str, base_iri: str) -> list[tuple[str, str, str]]:
    """The preset's triples as N-Triples terms, every ``ew:MqttStream`` given ``ew:stream <stream>``
    and ``ew:baseIRI "base_iri"`` (both bare IRIs)."""
    import rdflib

    graph = rdflib.Graph()
    graph.parse(preset_path(name), format="turtle")
    triples = parse(graph.serialize(format="nt"))
    stream_term, base_term = make_iri(stream), make_literal(base_iri)
    sources = sorted({s for s, p, o in triples if p == RDF_TYPE and o == MQTT_STREAM})
    for source in sources:
        triples.append((source, STREAM, stream_term))
        triples.append((source, BASE_IRI, base_term))
    return triples
