"""The cloud's validation of a config document is the agent's compile: the same verdict, in the same words,
for everything but what only a gateway knows (its streams)."""
from __future__ import annotations

import pytest

from edgewave.agent.config import AgentSettings
from edgewave.agent.reconfigure import compile_document, document_limits
from edgewave.cloud.publisher import InvalidDocument, validate_document
from edgewave.shared.configdoc import ConfigRejected

FIRE = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?level
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?s } ?s ex:locatedIn ?room }"""


def document(labels: dict[str, str], static: str = "ex:s1 ex:locatedIn ex:room1 .") -> str:
    patterns = " ;\n".join(f'    ew:pattern [ a ew:Pattern ; ew:name "{label}" ; ew:query """{text}""" ]'
                           for label, text in labels.items())
    return (f"@prefix ew: <https://edgewave.dev/ns#> .\n@prefix ex: <http://example.org/> .\n"
            f"ew:config {{\n  ex:cfg a ew:GatewayConfig ;\n{patterns} .\n}}\new:static {{ {static} }}\n")


def agent(text: str) -> str | None:
    """The agent's reason for refusing ``text`` pushed to it, None when it compiles it."""
    settings = AgentSettings()
    try:
        compile_document(1, "trig", text, settings, document_limits(settings))
    except ConfigRejected as exc:
        return exc.reason
    return None


def cloud(text: str) -> str | None:
    """The cloud's reason for refusing ``text`` before it signs it, None when it would push it."""
    try:
        validate_document(text, "trig")
    except InvalidDocument as exc:
        return str(exc)
    return None


CASES = {
    "valid": document({"fire": FIRE}),
    "two patterns, one name": document({"fire": FIRE, "fire-again": FIRE.replace("PT10S", "PT20S")}),
    "syntax error": document({"fire": FIRE.replace("?e ex:raisedBy ?s }", "?e ex:raisedBy }")}),
    "unsupported construct": document({"fire": FIRE.replace("?s ex:locatedIn ?room }",
                                                            "{ SELECT ?s WHERE { ?s ex:locatedIn ?room } } }")}),
    "per-instance query": document({"fire": FIRE.replace("?s ex:locatedIn ?room }",
                                                        "OPTIONAL { ?s ex:locatedIn ?room } }")}),
    "undeclared window": document({"fire": FIRE.replace("WINDOW <w> {", "WINDOW <v> {")}),
    "not TriG": "ew:config { oops",
    "one label twice": document({"fire": FIRE}) + document({"fire": FIRE.replace("PT10S", "PT20S")}),
    "nested too deeply": document({"fire": FIRE}, static="ex:a ex:b " + "[ ex:c " * 40 + "1" + " ]" * 40 + " ."),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cloud_refuses_what_the_agent_refuses_with_its_reason(name: str) -> None:
    assert cloud(CASES[name]) == agent(CASES[name])
    assert (agent(CASES[name]) is None) == (name in ("valid", "per-instance query"))


def test_only_a_gateway_judges_its_streams() -> None:
    elsewhere = document({"fire": FIRE.replace("http://example.org/stream/fire", "http://elsewhere.org/stream")})
    assert cloud(elsewhere) is None
    assert agent(elsewhere).startswith("unknown stream <http://elsewhere.org/stream> in pattern fire")


def with_mappings(*mappings: list[tuple[str, str, str]]) -> str:
    from edgewave.shared.configdoc import build_config_document, load_config_document

    doc = load_config_document(document({"fire": FIRE}), "trig")
    return build_config_document(doc.patterns, doc.schema, doc.static, mappings=[t for m in mappings for t in m])


def test_device_mappings_are_judged_alike_by_cloud_and_agent() -> None:
    from edgewave.agent.mapping import preset_triples

    def preset(name: str, stream: str = "http://example.org/stream/fire") -> list[tuple[str, str, str]]:
        return preset_triples(name, stream=stream, base_iri="http://example.org/gw1/")

    zigbee = preset("zigbee2mqtt")
    renamed = [(s, p, '"zigbee sensors on the second floor"') if p == "<https://edgewave.dev/ns#name>" else (s, p, o)
               for s, p, o in zigbee]
    overlapping = [(s, p, '"zigbee2mqtt/#"') if p == "<https://edgewave.dev/ns#topicFilter>" else (s, p, o)
                   for s, p, o in preset("tasmota")]
    cases = {
        "presets": (with_mappings(zigbee, preset("senml")), None),
        "a name that cannot name counters": (with_mappings(renamed), "its name must be 1 to 30 letters"),
        "overlapping filters": (with_mappings(zigbee, overlapping), "overlapping topic filters"),
        "no stream": (with_mappings([t for t in zigbee if t[1] != "<https://edgewave.dev/ns#stream>"]),
                      "names no stream"),
    }
    for what, (text, said) in cases.items():
        assert cloud(text) == agent(text), what
        assert (said is None and agent(text) is None) or said in (agent(text) or ""), (what, agent(text))
