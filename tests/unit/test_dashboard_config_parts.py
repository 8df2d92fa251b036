"""A config document as the editor's parts and back: the round trip, the parts' own errors, and which part
the agent's reason concerns."""
from __future__ import annotations

from pathlib import Path

import pytest
from starlette.datastructures import FormData

from edgewave.agent.engine.config_check import check_config_document
from edgewave.cloud.dashboard import config_parts
from edgewave.cloud.dashboard.config_pages import check_parts
from edgewave.cloud.dashboard.config_parts import PartError, Parts, PatternPart
from edgewave.shared.alert_text import AlertText
from edgewave.shared.configdoc import ConfigDocument, ConfigRejected, build_config_document, load_config_document

REPO = Path(__file__).resolve().parents[2]
EX = "http://example.org/"

FIRE = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?t
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?o ex:temperature ?t ; ex:in ?room } ?room ex:threshold ?max FILTER(?t > ?max) }"""

SMOKE = FIRE.replace("<fire>", "<smoke>").replace("ex:temperature", "ex:smoke")

HAND_WRITTEN = f'''@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
# a comment outside every query
ew:config {{
  ex:cfg a ew:GatewayConfig ;
    ew:pattern [ a ew:Pattern ; ew:name "smoke" ; ew:query """{SMOKE}""" ] ,
               [ a ew:Pattern ; ew:name "fire" ; ew:title "Fire" ; ew:severity "critical" ;
                 ew:message "Fire in {{room}}: {{t}} °C" ; ew:query """{FIRE}""" ] ;
    ew:significance [ a ew:SignificanceRule ; ew:maxSilenceSeconds 600 ] ,
                    [ a ew:SignificanceRule ; ew:property ex:temperature ; ew:deadbandRelative 0.1 ;
                      ew:maxRatePerSecond 2 ] .
}}
ex:AcmeThermometer rdfs:subClassOf ex:Thermometer .
ew:static {{
  ex:room1 ex:threshold "057"^^xsd:integer ; rdfs:label "Room one"@en , "Raum eins"@de .
  ex:room1 ex:sensors ( ex:t1 ex:t2 ) .
  ex:room2 ex:threshold 60 ; ex:note """two
lines""" .
}}
'''
"""A document no parts editor wrote: prefixes, a schema axiom in the default graph, a literal as written
(057), language tags, a collection (blank nodes), a long string, a default significance rule."""


def same(a: ConfigDocument, b: ConfigDocument) -> None:
    """Equivalent documents: the same patterns, alert text, schema, static data (blank nodes as the graph
    they make) and significance rules."""
    assert a.patterns == b.patterns
    assert a.alerts == b.alerts
    assert config_parts.triples_text(a.schema) == config_parts.triples_text(b.schema)
    assert config_parts.triples_text(a.static) == config_parts.triples_text(b.static)
    assert a.significance == b.significance
    assert (a.version, a.reports) == (b.version, b.reports)


@pytest.mark.parametrize("path", ["configs/gateway-config.trig"])
def test_the_shipped_document_split_into_parts_and_built_again_says_the_same(path):
    text = (REPO / path).read_text()
    parts = config_parts.split_document(text, "trig")
    assert parts.unexpressed == []
    assert [p.name for p in parts.patterns] == sorted(load_config_document(text).patterns)
    again = config_parts.assemble(parts)
    same(load_config_document(text), load_config_document(again))
    check_config_document(again, "trig")                       # and the agent still compiles it
    assert config_parts.assemble(config_parts.split_document(again, "trig")) == again   # one canonical form


def test_a_hand_written_document_round_trips_through_its_parts():
    original = load_config_document(HAND_WRITTEN)
    parts = config_parts.split_document(HAND_WRITTEN, "trig")
    assert [(p.name, p.title, p.severity, p.message) for p in parts.patterns] == [
        ("fire", "Fire", "critical", "Fire in {room}: {t} °C"), ("smoke", "", "", "")]
    assert parts.schema == f"<{EX}AcmeThermometer> <http://www.w3.org/2000/01/rdf-schema#subClassOf> " \
                           f"<{EX}Thermometer> .\n"
    assert f'<{EX}room1> <{EX}threshold> "057"^^<http://www.w3.org/2001/XMLSchema#integer> .' in parts.static
    assert '"Raum eins"@de' in parts.static and '"two\\nlines"' in parts.static
    assert "_:t0" in parts.static                              # the collection's nodes, named in order
    assert "ew:maxSilenceSeconds 600.0" in parts.significance
    rebuilt = load_config_document(config_parts.assemble(parts))
    same(original, rebuilt)
    check_config_document(config_parts.assemble(parts), "trig")


def test_parts_built_by_hand_and_split_again_are_the_same_parts():
    parts = Parts([PatternPart("fire", FIRE, "Fire", "", "Fire in {room}")],
                  schema=f"@prefix ex: <{EX}> .\nex:A <http://www.w3.org/2000/01/rdf-schema#subClassOf> ex:B .",
                  static=f"<{EX}room1> <{EX}threshold> \"50\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n",
                  significance="@prefix ew: <https://edgewave.dev/ns#> .\n"
                               "[ a ew:SignificanceRule ; ew:deadbandAbsolute 1 ] .")
    text = config_parts.assemble(parts)
    back = config_parts.split_document(text, "trig")
    assert back.patterns == [PatternPart("fire", FIRE, "Fire", "", "Fire in {room}")]
    assert back.schema == f"<{EX}A> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{EX}B> .\n"  # Turtle in
    assert back.static == parts.static
    assert config_parts.parse_significance(back.significance) == config_parts.parse_significance(parts.significance)
    assert config_parts.assemble(back) == text


def test_a_report_policy_is_a_field_of_its_pattern_and_the_documents_own_version_is_left_out():
    reported = HAND_WRITTEN.replace('ew:name "smoke" ;', 'ew:name "smoke" ; ew:report "window-close" ;') \
        .replace("ex:cfg a ew:GatewayConfig ;", "ex:cfg a ew:GatewayConfig ; ew:version 3 ;")
    parts = config_parts.split_document(reported, "trig")
    assert parts.unexpressed == [] and parts.version == 3
    assert [p.report for p in parts.patterns if p.name == "smoke"] == ["window-close"]
    again = load_config_document(config_parts.assemble(parts), "trig")
    assert again.reports == {"smoke": "window-close"} and again.version is None    # a push gives the version


def test_a_document_with_what_the_parts_cannot_say_is_marked_and_its_diff_is_of_its_text():
    shared = "_:shared a ex:Room .\n"
    reported = HAND_WRITTEN + f"ew:schema {{ {shared} }}\new:static {{ {shared} }}\n"
    parts = config_parts.split_document(reported, "trig")
    assert parts.unexpressed == ["a blank node in both the schema and the static data"]
    assert config_parts.canonical_document(reported, "trig") == reported
    assert config_parts.canonical_document("not trig", "trig") == "not trig"
    with pytest.raises(ConfigRejected):
        config_parts.split_document("not trig", "trig")


def test_a_part_that_does_not_parse_is_named_with_its_line():
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([], static=f"<{EX}a> <{EX}b> <{EX}c> .\n<{EX}a> <{EX}b> \"open .\n"))
    assert bad.value.part == "static" and bad.value.reason.startswith("parse error at line 2")
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([], schema="ex:a ex:b ex:c ."))         # an undeclared prefix
    assert bad.value.part == "schema" and bad.value.reason.startswith("parse error")
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([], significance='@prefix ew: <https://edgewave.dev/ns#> .\n'
                                                '[ a ew:Pattern ; ew:name "x" ; ew:query "y" ] .'))
    assert bad.value.part == "significance" and "ew:SignificanceRule nodes only" in bad.value.reason
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([], significance="[ a ew:SignificanceRule ] ."))     # no @prefix ew:
    assert bad.value.part == "significance" and bad.value.reason.startswith("parse error")
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([], static="[" * 40 + "]" * 40))
    assert bad.value.part == "static" and "nested too deeply" in bad.value.reason
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([PatternPart("fire", FIRE), PatternPart(" ", SMOKE)]))
    assert (bad.value.part, bad.value.index) == ("pattern", 1)
    with pytest.raises(PartError) as bad:
        config_parts.assemble(Parts([PatternPart("fire", "  \n")]))
    assert (bad.value.part, bad.value.index, bad.value.reason) == ("pattern", 0, "pattern fire has no query")


def test_the_agents_reason_is_placed_beside_the_part_it_concerns():
    def answer(parts: Parts) -> dict:
        got = check_parts(parts)
        assert len(got["highlighted"]) == len(parts.patterns)
        if not got["ok"]:   # the very reason the agent's check gives for the document the parts make
            with pytest.raises(ConfigRejected) as agent:
                check_config_document(config_parts.assemble(parts), "trig")
            assert got["reason"] == agent.value.reason
        return got

    fire, smoke = PatternPart("fire", FIRE), PatternPart("smoke", SMOKE)
    ok = answer(Parts([fire, smoke]))
    assert ok["ok"] and ok["reason"] is None and '<span class="hl-kw">REGISTER</span>' in ok["highlighted"][0]
    typo = answer(Parts([fire, PatternPart("smoke", SMOKE.replace("SELECT", "SELEKT"))]))
    assert (typo["part"], typo["index"], typo["pattern"], typo["field"]) == ("pattern", 1, "smoke", "query")
    assert typo["reason"].startswith("parse error in pattern smoke at line 2")
    twice = answer(Parts([smoke, PatternPart("fire", FIRE), PatternPart("fire-2", FIRE)]))
    assert twice["reason"] == "duplicate pattern name fire" and twice["index"] == 2   # the later card
    message = answer(Parts([fire, PatternPart("smoke", SMOKE, message="Smoke in {floor}")]))
    assert (message["index"], message["field"]) == (1, "message") and "?floor" in message["reason"]
    severity = answer(Parts([PatternPart("fire", FIRE, severity="very bad")]))
    assert (severity["index"], severity["field"]) == (0, "severity")
    part = check_parts(Parts([fire], static="<nope"))
    assert (part["ok"], part["part"], part["index"]) == (False, "static", None)
    # A pattern named apart from what its REGISTER says is found by either name; the engine refusing the
    # static data is the static part's; anything else the document's.
    blaze = Parts([smoke, PatternPart("blaze", FIRE)])
    assert config_parts.locate("pattern fire cannot be compiled: no", blaze)["index"] == 1
    assert config_parts.locate("parse error in pattern blaze at line 1 column 1: no", blaze)["index"] == 1
    assert config_parts.locate("pattern smoke-2: no", blaze) == {"part": "document"}
    assert config_parts.locate("static data rejected by the engine: no", blaze) == {"part": "static"}
    assert config_parts.locate("document too large: 300000 bytes (at most 262144)", blaze) == {"part": "document"}


def test_the_form_gives_the_parts_in_page_order_with_lf_line_ends():
    form = FormData([("pattern_name", "b"), ("pattern_query", "Q1\r\nx"), ("pattern_title", ""),
                     ("pattern_severity", ""), ("pattern_message", ""),
                     ("pattern_name", "a"), ("pattern_query", "Q2"), ("pattern_title", "T"),
                     ("pattern_severity", "info"), ("pattern_message", "m"),
                     ("schema", "s\r\n"), ("static", ""), ("csrf_token", "x")])
    parts = config_parts.parts_from_form(form)
    assert parts.patterns == [PatternPart("b", "Q1\nx"), PatternPart("a", "Q2", "T", "info", "m")]
    assert (parts.schema, parts.static, parts.significance) == ("s\n", "", "")
    with pytest.raises(PartError) as bad:
        config_parts.parts_from_form(FormData([("pattern_name", "a"), ("pattern_query", "Q")]))
    assert bad.value.part == "document"


def test_build_config_document_is_what_assembles_the_parts():
    """The editor writes what make-config writes for the same parts, so documents from either diff cleanly."""
    parts = Parts([PatternPart("smoke", SMOKE), PatternPart("fire", FIRE, "Fire")])
    assert config_parts.assemble(parts) == build_config_document([("fire", FIRE), ("smoke", SMOKE)], [], [], [],
                                                            {"fire": AlertText("Fire")})
