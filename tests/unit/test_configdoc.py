"""Config documents: parse into patterns/schema/static/significance; signed envelopes."""
from __future__ import annotations

import json

import pytest

from edgewave.shared import configdoc
from edgewave.shared.configdoc import ConfigRejected

DOC = '''
@prefix ew:   <https://edgewave.dev/ns#> .
@prefix ex:   <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl:  <http://www.w3.org/2002/07/owl#> .

ew:config {
  ex:cfg a ew:GatewayConfig ;
    ew:version 7 ;
    ew:pattern [ a ew:Pattern ; ew:name "hot" ; ew:query """
PREFIX ex: <http://example.org/>
REGISTER RSTREAM <hot> AS SELECT ?s FROM NAMED WINDOW <w> ON <http://example.org/stream> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?s ex:temp ?t } ex:site ex:threshold ?th FILTER(?t > ?th) }""" ] ;
    ew:significance [ ew:deadbandAbsolute 0.5 ; ew:maxSilenceSeconds 300 ] ,
                    [ ew:property ex:temperature ; ew:deadbandRelative 0.05 ; ew:maxRatePerSecond 2 ] .
}
ew:schema {
  ex:SmokeDetector rdfs:subClassOf ex:Sensor .
  ex:hosts owl:inverseOf ex:isHostedBy .
}
ew:static {
  ex:site ex:threshold 57 .
  ex:s1 ex:locatedIn ex:room3 .
}
'''


def test_document_sections():
    doc = configdoc.load_config_document(DOC, "trig")
    assert doc.version == 7
    assert list(doc.patterns) == ["hot"] and "REGISTER RSTREAM <hot>" in doc.patterns["hot"]
    assert sorted(doc.schema) == sorted([
        ("<http://example.org/SmokeDetector>", "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", "<http://example.org/Sensor>"),
        ("<http://example.org/hosts>", "<http://www.w3.org/2002/07/owl#inverseOf>", "<http://example.org/isHostedBy>"),
    ])
    assert ("<http://example.org/site>", "<http://example.org/threshold>",
            '"57"^^<http://www.w3.org/2001/XMLSchema#integer>') in doc.static
    assert len(doc.static) == 2
    default, temperature = doc.significance
    assert default.property is None and default.deadband_absolute == 0.5 and default.max_silence_s == 300
    assert temperature.property == "<http://example.org/temperature>"
    assert temperature.deadband_relative == 0.05 and temperature.max_rate_per_s == 2


def test_static_literals_keep_their_lexical_form():
    """As the agent's stream does: rdflib alone would make "0.50" "0.5" and "1" "true"."""
    doc = configdoc.load_config_document(DOC.replace(
        "ex:site ex:threshold 57 .",
        'ex:site ex:threshold "0.50"^^xsd:decimal ; ex:armed "1"^^xsd:boolean ; ex:code "n/a"^^xsd:integer .'
    ).replace("@prefix ew:", "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n@prefix ew:"), "trig")
    xsd = "http://www.w3.org/2001/XMLSchema#"
    assert {o for _, _, o in doc.static} >= {
        f'"0.50"^^<{xsd}decimal>', f'"1"^^<{xsd}boolean>', f'"n/a"^^<{xsd}integer>'}


def test_turtle_document_is_split_by_vocabulary():
    ttl = DOC.replace("ew:config {", "").replace("ew:schema {", "").replace("ew:static {", "").replace("}\n", "\n")
    ttl = ttl.replace('FILTER(?t > ?th) \n', 'FILTER(?t > ?th) }')  # keep the query's own brace
    doc = configdoc.load_config_document(ttl.replace('?th) """', '?th) }"""'), "turtle")
    assert len(doc.schema) == 2 and len(doc.static) == 2 and list(doc.patterns) == ["hot"]


def test_syntax_error_names_the_line():
    bad = DOC.replace("ex:s1 ex:locatedIn ex:room3 .", "ex:s1 ex:locatedIn  .")
    with pytest.raises(ConfigRejected, match=r"parse error at line \d+"):
        configdoc.load_config_document(bad, "trig")


def test_unknown_format():
    with pytest.raises(ConfigRejected, match="unknown config format"):
        configdoc.load_config_document(DOC, "rdfxml")


def test_signed_envelope_verifies():
    payload = configdoc.sign_envelope("gw1", 8, DOC, "trig", "key-gw1")
    env = configdoc.verify_envelope(payload, "key-gw1", gateway="gw1")
    assert (env.gateway, env.version, env.format, env.document) == ("gw1", 8, "trig", DOC)


def test_tampered_document_is_rejected():
    raw = json.loads(configdoc.sign_envelope("gw1", 8, DOC, "trig", "key-gw1"))
    raw["document"] = raw["document"].replace("57", "99")
    with pytest.raises(ConfigRejected, match="bad signature"):
        configdoc.verify_envelope(json.dumps(raw), "key-gw1", gateway="gw1")


def test_tampered_version_is_rejected():
    raw = json.loads(configdoc.sign_envelope("gw1", 8, DOC, "trig", "key-gw1"))
    raw["version"] = 9
    with pytest.raises(ConfigRejected, match="bad signature"):
        configdoc.verify_envelope(json.dumps(raw), "key-gw1")


def test_wrong_key_is_rejected():
    payload = configdoc.sign_envelope("gw1", 8, DOC, "trig", "key-gw1")
    with pytest.raises(ConfigRejected, match="bad signature"):
        configdoc.verify_envelope(payload, "key-gw2", gateway="gw1")


def test_envelope_for_another_gateway_is_rejected():
    payload = configdoc.sign_envelope("gw2", 8, DOC, "trig", "shared-key")
    with pytest.raises(ConfigRejected, match="wrong gateway"):
        configdoc.verify_envelope(payload, "shared-key", gateway="gw1")


@pytest.mark.parametrize("payload", [b"garbage", b"[]", b'{"gateway": "gw1"}',
                                     b'{"gateway":"gw1","version":"8","format":"trig","document":"","signature":""}'])
def test_malformed_envelopes(payload):
    with pytest.raises(ConfigRejected, match="malformed envelope"):
        configdoc.verify_envelope(payload, "k")
