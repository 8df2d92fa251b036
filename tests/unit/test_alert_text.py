"""A pattern's alert text: its template checked against what the pattern binds, and filled in."""
from __future__ import annotations

import pytest

from edgewave.agent.engine.config_check import check_config_document
from edgewave.shared.alert_text import AlertText, TemplateError, check_alert_text, render, template_names
from edgewave.shared.configdoc import ConfigRejected, load_config_document

FIRE = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?temp
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?s ex:temp ?temp } ?s ex:locatedIn ?room }"""


def document(alert: str) -> str:
    return f'''@prefix ew: <https://edgewave.dev/ns#> .
ew:config {{ [] a ew:GatewayConfig ;
  ew:pattern [ a ew:Pattern ; ew:name "fire-label" ; ew:query """{FIRE}""" {alert} ] . }}
'''


def test_names_in_order_with_escaped_braces_and_question_marks() -> None:
    assert template_names("Fire in {room}: {?temp} °C {{not a name}} {room}") == ["room", "temp", "room"]


@pytest.mark.parametrize("template, why", [
    ("Fire in {room", "expected '}'"),
    ("Fire in room}", "Single '}'"),
    ("{room.__class__}", "is not a variable name"),
    ("{room!r}", "is not a variable name"),
    ("{temp:>10}", "is not a variable name"),
    ("{0}", "is not a variable name"),
    ("{}", "is not a variable name"),
    ("x" * 1001, "at most 1000"),
])
def test_a_malformed_template_is_refused_with_why(template: str, why: str) -> None:
    with pytest.raises(TemplateError, match=why.replace(".", r"\.").replace("'", ".")):
        template_names(template)


def test_the_check_names_the_pattern_and_every_unbound_variable() -> None:
    with pytest.raises(TemplateError) as caught:
        check_alert_text(AlertText(message="{room} {s} {x} {s}"), "fire", ["room", "temp"])
    assert str(caught.value) == "pattern fire: its message names ?s, ?x, which the pattern does not bind " \
                                "(it binds ?room, ?temp)"
    with pytest.raises(TemplateError, match="ew:severity 'very bad' is not a word"):
        check_alert_text(AlertText(severity="very bad"), "fire", [])
    check_alert_text(AlertText("Fire", "critical", "Fire in {room}"), "fire", ["room"])


def test_render_shows_each_bound_term_and_leaves_the_rest_as_written() -> None:
    bindings = {"room": "<http://example.org/room3>", "temp": '"63.5"'}
    assert render("Fire in {room}: {?temp} °C {{ok}} {other}", bindings, lambda t: t.strip('<>"')) == \
        "Fire in http://example.org/room3: 63.5 °C {ok} {other}"


def test_the_document_carries_the_alert_text_by_label_and_none_of_it_as_static_data() -> None:
    text = document('; ew:title "Fire" ; ew:severity "critical" ; ew:message "Fire in {room}: {temp} °C"')
    doc = load_config_document(text)
    assert doc.alerts == {"fire-label": AlertText("Fire", "critical", "Fire in {room}: {temp} °C")}
    assert doc.static == [] and doc.schema == []
    checked = check_config_document(text, "trig")
    assert checked.alerts == {"fire": doc.alerts["fire-label"]}      # by the name it registers
    assert load_config_document(document("")).alerts == {}


def test_the_config_check_refuses_an_unbound_name_in_the_agents_words() -> None:
    with pytest.raises(ConfigRejected) as caught:
        check_config_document(document('; ew:message "{room} by {s}"'), "trig")
    assert caught.value.reason == "pattern fire: its message names ?s, which the pattern does not bind " \
                                  "(it binds ?room, ?temp)"
