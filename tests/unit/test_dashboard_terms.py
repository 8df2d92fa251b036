"""Terms as people read them (cloud/dashboard/terms.py, gateway_terms.py): labels, prefixed names,
values with units, alert messages, and each gateway's naming from the document it applied."""
from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

import sqlite_utils

from edgewave.cloud.dashboard import gateway_terms
from edgewave.cloud.dashboard.gateway_terms import GatewayTerms
from edgewave.cloud.dashboard.queries import Reader
from edgewave.cloud.dashboard.terms import Naming
from edgewave.cloud.registry import ensure_registry_schema, reserve_version, resolve_push
from edgewave.shared.alert_text import AlertText

EX = "http://example.org/gw1/"
XSD = "http://www.w3.org/2001/XMLSchema#"
SOSA = "http://www.w3.org/ns/sosa/"
EW = "https://edgewave.dev/ns#"
LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
UNIT = "<http://qudt.org/schema/qudt/unit>"
ROOM3 = f"<{EX}room3>"
TEMP = f'"63.5"^^<{XSD}decimal>'
FIRE_TRIPLES = [f"<{EX}obs1> <{SOSA}observedProperty> <{EW}AirTemperature> .",
                f"<{EX}obs1> <{SOSA}madeBySensor> <{EX}sensor7> .",
                f"<{EX}obs1> <{SOSA}hasSimpleResult> {TEMP} ."]
FIRE = [{"variable": "room", "value": ROOM3}, {"variable": "temp", "value": TEMP},
        {"variable": "threshold", "value": f'"57"^^<{XSD}decimal>'}]


def naming(**alerts: AlertText) -> Naming:
    return Naming.of([f"PREFIX ex: <{EX}>\n"],
                     [(ROOM3, LABEL, '"room 3"'), (f"<{EW}AirTemperature>", UNIT, "<http://qudt.org/vocab/unit/DEG_C>")],
                     alerts)


def test_iris_read_as_labels_then_prefixed_names_then_their_last_segment():
    n = naming()
    assert n.term(ROOM3).text == "room 3" and n.term(ROOM3).full == ROOM3
    assert n.term(f"<{EX}sensor7>").text == "ex:sensor7"                   # the document's prefix
    assert n.term(f"<{SOSA}Observation>").text == "sosa:Observation"       # a common vocabulary's
    assert n.term("<http://other.example/a/b/thing>").text == "thing"


def test_literals_read_as_values_and_a_result_with_its_unit():
    n = naming()
    assert [(name, shown.text) for name, shown in n.bindings(FIRE, FIRE_TRIPLES)] == \
        [("room", "room 3"), ("temp", "63.5 °C"), ("threshold", "57")]   # 57 is no observation's result
    assert n.term(f'"12345.500"^^<{XSD}decimal>').text == "12,345.5"
    assert n.term(f'"true"^^<{XSD}boolean>').text == "yes"
    berlin = n.term(f'"2026-11-29T06:00:00Z"^^<{XSD}dateTime>', ZoneInfo("Europe/Berlin"))
    assert berlin.text == "2026-11-29 07:00:00 CET"
    assert n.term('"not a number"^^<http://www.w3.org/2001/XMLSchema#decimal>').text == "not a number"
    assert n.term('"plain"@en').text == "plain"


def test_a_message_template_reads_first_and_a_pattern_without_one_gets_its_bindings():
    n = naming(fire=AlertText("Fire", "critical", "Fire in {room}: {temp} °C, threshold {threshold}"))
    assert n.message("fire", FIRE, FIRE_TRIPLES) == "Fire in room 3: 63.5 °C, threshold 57"
    assert n.severity("fire") == "critical"
    assert n.message("smoke", FIRE[:2], FIRE_TRIPLES) == "smoke — room: room 3, temp: 63.5 °C"
    many = [{"variable": f"v{i}", "value": f'"{i}"^^<{XSD}integer>'} for i in range(6)]
    assert n.message("p", many).endswith("v3: 3 (+2 more)")


DOC = f"""@prefix ew: <https://edgewave.dev/ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ew:config {{
<urn:edgewave:config> a ew:GatewayConfig ; ew:version 1 ;
    ew:pattern [ a ew:Pattern ; ew:name "fire" ; ew:message "Fire in {{room}}" ; ew:query \"\"\"
PREFIX ex: <{EX}>
REGISTER RSTREAM <fire> AS SELECT ?room
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT1M STEP PT1S]
WHERE {{ WINDOW <w> {{ ?s ex:smokeIn ?room }} }}\"\"\" ] .
}}
ew:static {{ <{EX}room3> rdfs:label "Room 3" . }}
"""


def test_each_gateway_is_named_from_the_document_it_applied(tmp_path: Path):
    db = sqlite_utils.Database(tmp_path / "cloud.db")
    ensure_registry_schema(db)
    version = reserve_version(db, "gw1", "trig", DOC, 1_000)
    terms = GatewayTerms(Reader(tmp_path / "cloud.db"), check_s=0)
    assert terms.of("gw1").message("fire", FIRE[:1]) == "fire — room: room3"   # pushed, not yet applied
    resolve_push(db, "gw1", version, "applied", "", 2_000)
    assert terms.of("gw1").message("fire", FIRE[:1]) == "Fire in Room 3"
    assert terms.of("gw2").term(ROOM3).text == "room3"             # no document: the last segment


def test_figures_over_every_gateway_are_named_by_the_gateways_namings_merged(tmp_path: Path, monkeypatch):
    db = sqlite_utils.Database(tmp_path / "cloud.db")
    ensure_registry_schema(db)
    for gateway, label in (("gw1", "Room 3"), ("gw2", "Hall")):
        doc = DOC.replace('"Room 3"', f'"{label}"').replace(f"<{EX}room3>", f"<{EX}{gateway}-room>")
        resolve_push(db, gateway, reserve_version(db, gateway, "trig", doc, 1_000), "applied", "", 2_000)
        db["gateways"].upsert({"gateway": gateway}, pk="gateway", alter=True)
    terms = GatewayTerms(Reader(tmp_path / "cloud.db"), check_s=60)
    monkeypatch.setattr(gateway_terms, "FLEET_READS", 1)           # a page reads one new document at most ...
    first = terms.fleet()
    assert (first.term(f"<{EX}gw1-room>").text, first.term(f"<{EX}gw2-room>").text) == ("Room 3", "ex:gw2-room")
    fleet = terms.fleet()                                          # ... the next page the next one
    assert (fleet.term(f"<{EX}gw1-room>").text, fleet.term(f"<{EX}gw2-room>").text) == ("Room 3", "Hall")
    assert fleet.term(f"<{EX}other>").text == "ex:other"          # a prefix a gateway's document declares
    assert terms.fleet() is fleet                                  # complete: kept for check_s


def test_the_live_csv_as_read_has_each_message_and_its_values_as_shown():
    from datetime import timezone

    from edgewave.cloud.dashboard.export import live_table, to_csv

    n = naming(fire=AlertText("Fire", "critical", "Fire in {room}: {temp} °C"))
    item = {"id": "urn:edgewave:event:1", "gateway": "gw1", "kind": "match", "pattern": "fire", "bindings": FIRE,
            "triples": FIRE_TRIPLES, "window_start": 1_000, "window_end": 2_000, "ingest_ms": 2_500}
    exact = to_csv(live_table([item], timezone.utc))
    read = to_csv(live_table([item], timezone.utc, lambda i: n.event(i)))
    assert f"?room={ROOM3}" in exact and "message" not in exact.splitlines()[0]
    header, row = read.splitlines()[:2]
    assert header.split(",")[5] == "message"
    assert "Fire in room 3: 63.5 °C" in row and "?room=room 3 ?temp=63.5 °C ?threshold=57" in row
