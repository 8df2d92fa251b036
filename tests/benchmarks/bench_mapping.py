"""Benchmark: device payloads through the compiled RML mappings (decoding + mapping), per preset.

SenML runs twice: as JSON (``senml``) and as the same packs in CBOR (``senml-cbor``: the
bounded check of the bytes, cbor2, then the same resolution and triples maps).

For each preset, a few thousand distinct messages (devices and values vary) are mapped one
at a time with ``CompiledMapping.map``, as the agent's intake would. Baselines in the same run:

- N-Triples: the same observations as N-Triples text (what the mapping produced, serialized),
  decoded as ``agent/intake.py`` decodes a message (``shared/ntriples.parse_lines`` over its
  lines, stopping one past the statement limit);
- a general mapping engine in Python, one message at a time: rdflib's JSON-LD parser with a
  context that maps the payload's keys to properties (the message wrapped as a JSON-LD node
  named by the observation IRI, parsed into a fresh graph). It makes fewer, flatter triples
  than the preset (no observation per key), so it is a generous baseline. morph-kgc, the
  engine to compare with, cannot be installed beside edgewave's pins (it pins rdflib 7.2.1,
  pyoxigraph 0.3.22 and ruamel.yaml < 0.19).

Rates are messages per second of CPU time (``time.process_time``), best of 3 rounds.

    python tests/benchmarks/bench_mapping.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from itertools import islice

import cbor2
import rdflib

from edgewave.agent.mapping import compile_mappings, preset_triples
from edgewave.shared import ntriples

BASE = "http://example.org/gw1/"
STREAM = "http://example.org/stream/building"
MAX_TRIPLES = 256


def messages(preset: str, count: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """(topic, payload) pairs as devices of each kind send them."""
    out = []
    for i in range(count):
        device = f"room{i % 7 + 1}-dev{i % 50}"
        t, h = round(rng.uniform(15, 30), 1), round(rng.uniform(30, 70), 1)
        if preset == "zigbee2mqtt":
            body = {"battery": 97, "humidity": h, "linkquality": rng.randint(20, 200), "temperature": t,
                    "voltage": 3000}
            out.append((f"zigbee2mqtt/{device}", json.dumps(body).encode()))
        elif preset == "tasmota":
            body = {"Time": "2026-11-29T09:14:23", "AM2301": {"Temperature": t, "Humidity": h}, "TempUnit": "C"}
            out.append((f"tele/{device}/SENSOR", json.dumps(body).encode()))
        elif preset == "esphome":
            out.append((f"{device}/sensor/temperature/state", f"{t:.2f}".encode()))
        elif preset == "senml":
            body = [{"bn": f"urn:dev:mac:{i:012x}/", "bt": 1.7e9 + i, "n": "temperature", "u": "Cel", "v": t},
                    {"n": "humidity", "u": "%RH", "v": h}]
            out.append((f"senml/{device}", json.dumps(body).encode()))
        else:       # senml-cbor: the same packs with RFC 8428's integer labels
            body = [{-2: f"urn:dev:mac:{i:012x}/", -3: 1.7e9 + i, 0: "temperature", 1: "Cel", 2: t},
                    {0: "humidity", 1: "%RH", 2: h}]
            out.append((f"senml-cbor/{device}", cbor2.dumps(body)))
    return out


def routes_for(preset: str) -> dict[str, object]:
    return {r.topic_filter: r for r in compile_mappings(preset_triples(preset, stream=STREAM, base_iri=BASE))}


def route_of(routes: dict, topic: str):
    given = topic.split("/")
    for filter_, route in routes.items():
        wanted = filter_.split("/")
        if len(wanted) == len(given) and all(w in ("+", g) for w, g in zip(wanted, given)):
            return route
    raise LookupError(topic)


def best_rate(run, count: int, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return count / best if best > 0 else float("inf")


CONTEXT = {"@vocab": "https://edgewave.dev/ns#", "temperature": {"@id": "http://www.w3.org/ns/sosa/hasSimpleResult"},
           "humidity": {"@id": "https://edgewave.dev/ns#humidity"}}


def jsonld_document(topic: str, payload: bytes, arrival: int) -> str | None:
    """The message as the JSON-LD a context-driven engine reads (SenML: its records as a list)."""
    if payload[:1] == b"\x82":          # a SenML CBOR pack: its records with JSON's labels
        from edgewave.agent.mapping.senml import CBOR_LABELS
        body = [{CBOR_LABELS[k]: v for k, v in record.items()} for record in cbor2.loads(payload)]
    else:
        body = json.loads(payload) if payload[:1] in (b"{", b"[") else {"value": payload.decode()}
    device = topic.split("/")[1] if not topic.split("/")[0] or "/" in topic else topic
    node = {"@context": CONTEXT, "@id": f"{BASE}obs/{device}/{arrival}"}
    if isinstance(body, list):
        node["record"] = body
    else:
        node.update(body)
    return json.dumps(node)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 messages a preset instead of 5,000")
    args = parser.parse_args(argv)
    count = 500 if args.quick else 5000
    rng = random.Random(7)
    print(f"{'preset':<12} {'triples/msg':>11} {'compiled msg/s':>15} {'N-Triples msg/s':>16} {'ratio':>6} "
          f"{'JSON-LD msg/s':>14} {'ratio':>7}")
    for preset in ("zigbee2mqtt", "tasmota", "esphome", "senml", "senml-cbor"):
        routes = routes_for(preset)
        batch = [(topic, payload, route_of(routes, topic)) for topic, payload in messages(preset, count, rng)]
        produced = [route.map(payload, topic, 1_764_407_663_123 + i) for i, (topic, payload, route) in enumerate(batch)]
        texts = ["\n".join(ntriples.serialize(t) for t in triples) for triples in produced]
        documents = [jsonld_document(topic, payload, i) for i, (topic, payload, _) in enumerate(batch)]

        def compiled() -> None:
            for i, (topic, payload, route) in enumerate(batch):
                route.map(payload, topic, 1_764_407_663_123 + i)

        def n_triples() -> None:
            for text in texts:
                errors: list = []
                tuple(islice(ntriples.parse_lines(text.split("\n"), errors=errors), MAX_TRIPLES + 1))

        def json_ld() -> None:
            for document in documents[: max(1, count // 10)]:
                rdflib.Graph().parse(data=document, format="json-ld")

        compiled_rate = best_rate(compiled, count)
        ntriples.clear_term_caches()
        nt_rate = best_rate(n_triples, count)
        jsonld_rate = best_rate(json_ld, max(1, count // 10))
        per_message = sum(map(len, produced)) / len(produced)
        print(f"{preset:<12} {per_message:>11.1f} {compiled_rate:>15,.0f} {nt_rate:>16,.0f} "
              f"{compiled_rate / nt_rate:>6.2f} {jsonld_rate:>14,.0f} {compiled_rate / jsonld_rate:>6.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
