"""Real sensor payloads (Zigbee2MQTT, Tasmota, ESPHome, SenML in JSON or CBOR) to SOSA triples, by RML mappings.

A mapping is RDF (RML-Core with a few edgewave extensions, docs/mappings.md) carried in a
gateway's config document. ``compile_mappings`` turns it, once, into one
``CompiledMapping`` per MQTT source; ``CompiledMapping.map(payload, topic, arrival_ms)``
gives all triples of one message or raises ``PayloadRejected`` with one of ``REASONS``.
No I/O and no logging here: the agent's intake counts and logs.
"""
from __future__ import annotations

from .compiled import CompiledMapping, compile_mappings
from .errors import REASONS, MappingError, PayloadRejected
from .limits import PayloadLimits
from .presets import PRESETS, preset_path, preset_triples

__all__ = ["CompiledMapping", "MappingError", "PRESETS", "PayloadLimits", "PayloadRejected", "REASONS",
           "compile_mappings", "preset_path", "preset_triples"]
