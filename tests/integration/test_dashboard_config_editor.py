"""The configuration editor made of parts, in a real browser against real processes.

`edgewave-cloud dashboard` over a cloud.yaml with a real cloud broker, and a real `edgewave-agent run` for gw1,
configured first by `push-config` (version 1, applied). An operator opens gw1's document as its parts, breaks
one pattern's query and sees the agent's own parse reason beside that pattern (nothing pushed), gives a message
a variable the pattern does not bind and sees that reason there too, fixes both, edits a title and the static
data, sees the diff against the applied version, and pushes: version 2 is recorded in config_pushes and applied
by the agent. A viewer sees the parts read-only and gets 403 from the validation endpoint.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from agent_harness import ALARM, KEY, AgentProcess
from broker_process import MosquittoBroker
from cloud_harness import CloudProcess, query, wait_for, write_config
from dashboard_data import (PASSWORDS, ROLES, chromium, fixture_password_hash, free_port, save_screenshot,
                            wait_until_serving)
from edgewave.shared.configdoc import load_config_document


EX = "http://example.org/"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HIGH = (ALARM.replace("<alarm>", "<alarm-high>").replace("?sensor ex:locatedIn ?room }",
                                                          "?sensor ex:locatedIn ?room FILTER(?level > 3) }"))
"""A second pattern on the same stream: alarms above level 3."""

FIRST = f"""@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ew:config {{
  ex:cfg a ew:GatewayConfig ;
    ew:pattern [ a ew:Pattern ; ew:name "alarm" ; ew:title "Alarm" ; ew:message "Alarm in {{room}}" ;
                 ew:query \"\"\"{ALARM}\"\"\" ] ,
               [ a ew:Pattern ; ew:name "alarm-high" ; ew:title "Alarm" ; ew:severity "critical" ;
                 ew:query \"\"\"{HIGH}\"\"\" ] ;
    ew:significance [ a ew:SignificanceRule ; ew:property ex:alarmLevel ; ew:deadbandAbsolute 1 ] .
}}
ew:schema {{ ex:triggeredBy rdfs:subPropertyOf ex:raisedBy . }}
ew:static {{ ex:s1 ex:locatedIn ex:room1 ; rdfs:label "sensor 1"@en . }}
"""
"""gw1's first document, written by hand (prefixes, a list of patterns): the editor shows it as parts."""

S2 = f"<{EX}s2> <{EX}locatedIn> <{EX}room2> ."


@dataclass
class Rig:
    url: str
    db: Path
    agent: AgentProcess


@pytest.fixture(scope="module")
def rig(tmp_path_factory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("config-editor")
    local = MosquittoBroker(tmp / "local-broker").start()
    cloud_broker = MosquittoBroker(tmp / "cloud-broker").start()
    port = free_port()
    users = {name: {"role": ROLES[name], "password_hash": fixture_password_hash(pw)} for name, pw in PASSWORDS.items()}
    config = write_config(tmp, cloud_broker, gateways={"gw1": {"key": KEY}}, push={"ack_timeout_s": 30},
                          dashboard={"host": "127.0.0.1", "port": port, "users": users,
                                     "secret_key_file": str(tmp / "dashboard-secret")})
    agent = AgentProcess(tmp / "agent", local, cloud_broker)
    dashboard = None
    try:
        agent.start()
        (tmp / "first.trig").write_text(FIRST)
        push = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config),
                               "--gateway", "gw1", str(tmp / "first.trig")], capture_output=True, text=True,
                              timeout=120)
        assert push.returncode == 0 and "applied version 1" in push.stdout, push.stdout + push.stderr
        dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp / "dashboard.log")
        wait_until_serving(port, dashboard)
        yield Rig(f"http://127.0.0.1:{port}", tmp / "cloud.db", agent)
    finally:
        code = dashboard.stop(timeout=20) if dashboard is not None else 0
        agent.stop()
        local.kill()
        cloud_broker.kill()
        assert code == 0, dashboard.log()[-3000:] if dashboard is not None else ""


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


def logged_in(browser, rig: Rig, name: str):
    ctx = browser.new_context(base_url=rig.url, viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto("/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORDS[name])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    return ctx, page


def pushes(rig: Rig) -> list[tuple]:
    return query(rig.db, "SELECT version, status FROM config_pushes WHERE gateway = 'gw1' ORDER BY version")


def card(page, name: str):
    return page.locator(f"#pattern-parts fieldset.pattern-part[data-pattern='{name}']")


def wait_state(page, state: str) -> None:
    page.wait_for_selector(f"form#config-parts[data-state={state}]", timeout=10_000)


def test_a_viewer_sees_the_parts_read_only_and_may_not_validate(browser, rig):
    ctx, page = logged_in(browser, rig, "victor")
    try:
        page.goto("/gateways/gw1/config")
        page.click("#open-parts")
        page.wait_for_url(re.compile(r"/gateways/gw1/config/parts$"))
        assert card(page, "alarm").count() == 1 and card(page, "alarm-high").count() == 1
        assert card(page, "alarm").locator("textarea[name=pattern_query]").get_attribute("readonly") is not None
        assert page.locator("#push-parts").count() == 0 and page.locator("#show-diff").count() == 0
        assert page.locator("form#config-parts").get_attribute("data-validate") is None
        token = page.locator("body").get_attribute("data-csrf")
        refused = page.request.post("/config/validate", form={"csrf_token": token, "pattern_name": "alarm",
                                                               "pattern_query": ALARM, "pattern_title": "",
                                                               "pattern_severity": "", "pattern_message": ""})
        assert refused.status == 403 and refused.json()["ok"] is False
    finally:
        ctx.close()


def test_an_operator_breaks_a_pattern_sees_why_beside_it_fixes_it_diffs_and_pushes(browser, rig):
    assert pushes(rig) == [(1, "applied")]
    ctx, page = logged_in(browser, rig, "alice")
    try:
        page.goto("/gateways/gw1/config")
        page.click("#open-parts")
        page.wait_for_url(re.compile(r"/gateways/gw1/config/parts$"))
        assert "Version 1, the applied one" in page.locator("#parts-source").inner_text()
        wait_state(page, "valid")
        alarm = card(page, "alarm")
        assert alarm.locator("input[name=pattern_message]").input_value() == "Alarm in {room}"
        assert card(page, "alarm-high").locator("input[name=pattern_severity]").input_value() == "critical"
        assert f'<{EX}s1> <{EX}locatedIn> <{EX}room1> .' in page.locator("textarea[name=static]").input_value()
        assert "ew:deadbandAbsolute 1.0" in page.locator("textarea[name=significance]").input_value()
        assert alarm.locator(".query-preview .hl-kw", has_text="REGISTER").count() == 1

        # A typo in one pattern's query: the agent's own parse reason, beside that pattern, as one types.
        query_box = alarm.locator("textarea[name=pattern_query]")
        query_box.fill(ALARM.replace("REGISTER RSTREAM", "REGISTER RSTREEM"))
        wait_state(page, "invalid")
        reason = alarm.locator(".part-error")
        assert reason.is_visible() and reason.inner_text().startswith("parse error in pattern alarm at line")
        assert "invalid" in alarm.get_attribute("class")
        assert not card(page, "alarm-high").locator(".part-error").is_visible()
        save_screenshot(page, "dashboard-config-parts.png")
        # The validation endpoint says what push-config would say of the document the parts make.
        answer = page.request.post("/config/validate", form={
            "csrf_token": page.locator("body").get_attribute("data-csrf"), "pattern_name": "alarm",
            "pattern_query": ALARM.replace("REGISTER RSTREAM", "REGISTER RSTREEM"), "pattern_title": "",
            "pattern_severity": "", "pattern_message": ""}).json()
        assert (answer["ok"], answer["part"], answer["index"], answer["pattern"]) == (False, "pattern", 0, "alarm")
        assert answer["reason"] == reason.inner_text()
        assert pushes(rig) == [(1, "applied")]                       # nothing pushed meanwhile
        # Pushing it anyway: the server refuses it with the same reason, beside the pattern; the edits stay.
        page.click("#push-parts")
        page.wait_for_selector("#push-error")
        assert page.locator("#push-error").inner_text() == "Not pushed: " + answer["reason"]
        assert "RSTREEM" in query_box.input_value() and reason.inner_text() == answer["reason"]
        assert pushes(rig) == [(1, "applied")]
        wait_state(page, "invalid")

        # Fixed; then a message naming a variable the pattern does not bind: its reason, beside it too.
        query_box.fill(ALARM)
        wait_state(page, "valid")
        assert not reason.is_visible()
        high = card(page, "alarm-high")
        high.locator("input[name=pattern_message]").fill("Level {level} in {floor}")
        wait_state(page, "invalid")
        assert "?floor" in high.locator(".part-error").inner_text() and not reason.is_visible()
        high.locator("input[name=pattern_message]").fill("Level {level} in {room}")
        high.locator("input[name=pattern_title]").fill("High alarm")
        high.locator("input[name=pattern_title]").press("Enter")     # Enter in a field does not push
        static = page.locator("textarea[name=static]")
        static.fill(static.input_value() + S2 + "\n")
        wait_state(page, "valid")
        # A broken static line is the static part's.
        static.fill(static.input_value() + "<broken\n")
        wait_state(page, "invalid")
        assert page.locator("[data-part=static] .part-error").inner_text().startswith("parse error")
        static.fill(static.input_value().replace("<broken\n", ""))
        wait_state(page, "valid")

        # The difference to the applied version: only what was edited.
        page.click("#show-diff")
        page.wait_for_selector("#parts-diff-table")
        added = page.locator("#parts-diff-table tr.diff-add").all_inner_texts()
        removed = page.locator("#parts-diff-table tr.diff-del").all_inner_texts()
        assert len(added) == 2 and len(removed) == 1, (added, removed)
        assert any('ew:title "High alarm"' in line and 'ew:message "Level {level} in {room}"' in line
                   for line in added)
        assert any(S2 in line for line in added)
        assert 'ew:name "alarm-high"' in removed[0] and 'ew:title "Alarm"' in removed[0]
        assert "version 1 (applied)" in page.locator("#parts-diff-table tr.diff-file").first.inner_text()
        assert pushes(rig) == [(1, "applied")] and "/gateways/gw1/config/parts" in page.url

        # Pushed as push-config pushes: recorded, signed, applied by the agent.
        page.click("#push-parts")
        page.wait_for_url(re.compile(r"/gateways/gw1/config\?pushed=1$"))
        wait_for(lambda: pushes(rig) == [(1, "applied"), (2, "applied")], 60, "the agent to apply version 2")
        [(text, fmt)] = query(rig.db, "SELECT document, format FROM config_pushes WHERE gateway='gw1' AND version=2")
        pushed, first = load_config_document(text, fmt), load_config_document(FIRST)
        assert pushed.patterns == first.patterns and pushed.schema == first.schema
        assert pushed.significance == first.significance
        assert set(pushed.static) == set(first.static) | {(f"<{EX}s2>", f"<{EX}locatedIn>", f"<{EX}room2>")}
        assert pushed.alerts["alarm"] == first.alerts["alarm"]
        assert (pushed.alerts["alarm-high"].title, pushed.alerts["alarm-high"].message) == \
            ("High alarm", "Level {level} in {room}")
        page.reload()
        assert page.locator("#config-history tr[data-version='2']").inner_text().count("applied") == 1
        # The editor now starts from version 2, and the same parts make no difference.
        page.goto("/gateways/gw1/config/parts")
        assert "Version 2, the applied one" in page.locator("#parts-source").inner_text()
        wait_state(page, "valid")
        page.click("#show-diff")
        page.wait_for_selector("#parts-diff .parts-diff[data-diff-lines='0']")
    finally:
        ctx.close()


def test_the_parts_requests_are_bounded_and_need_the_csrf_token(browser, rig):
    ctx, page = logged_in(browser, rig, "alice")
    try:
        token = page.locator("body").get_attribute("data-csrf")
        big = page.request.post("/config/validate", form={"csrf_token": token, "static": "x" * (5 * 1024 * 1024)})
        assert big.status == 413 and "larger than 4 MiB" in big.json()["reason"]
        no_token = page.request.post("/config/validate", form={"static": ""})
        assert no_token.status == 403
        push = page.request.post("/gateways/gw1/config/parts/push", form={"static": ""}, max_redirects=0)
        assert push.status == 403
        assert [v for v, _ in pushes(rig)] in ([1], [1, 2])          # nothing new from these
    finally:
        ctx.close()


def test_an_operator_adds_a_device_mapping_as_a_part_and_the_configuration_page_lists_its_topic(browser, rig):
    from edgewave.agent.mapping import preset_triples
    from edgewave.cloud.dashboard.config_parts import mappings_text

    applied = max(version for version, status in pushes(rig) if status == "applied")
    mapping = mappings_text(preset_triples("zigbee2mqtt", stream=f"{EX}stream/alarm", base_iri=f"{EX}gw1/"))
    ctx, page = logged_in(browser, rig, "alice")
    try:
        page.goto("/gateways/gw1/config")
        assert "No mappings" in page.locator("section.card").first.inner_text()
        page.goto("/gateways/gw1/config/parts")
        wait_state(page, "valid")
        box = page.locator("textarea[name=mappings]")
        box.fill(mapping.replace('"zigbee2mqtt/+"', '"zigbee2mqtt/+/#/x"'))     # not an MQTT topic filter
        wait_state(page, "invalid")
        said = page.locator("[data-part=mappings] .part-error").inner_text()
        assert "'#' must be a whole level, the last one" in said and "zigbee2mqtt" in said
        box.fill(mapping)
        wait_state(page, "valid")
        page.click("#push-parts")
        page.wait_for_url(re.compile(r"/gateways/gw1/config\?pushed=1$"))
        wait_for(lambda: (applied + 1, "applied") in pushes(rig), 60, "the agent to apply the mapping")
        wait_for(lambda: "zigbee2mqtt/+" in rig.agent.log(), 20, "the agent to subscribe to the mapping's topic")
        page.goto("/gateways/gw1/config")
        rows = page.locator("#mappings-table tbody tr")
        assert rows.count() == 1
        assert [c.strip() for c in rows.first.locator("td").all_inner_texts()][:3] == ["zigbee2mqtt/+", "json",
                                                                                       "zigbee2mqtt"]
        # the editor shows the mapping back as its part, and the same parts make no difference
        page.goto("/gateways/gw1/config/parts")
        assert "zigbee2mqtt/+" in page.locator("textarea[name=mappings]").input_value()
        wait_state(page, "valid")
        page.click("#show-diff")
        page.wait_for_selector("#parts-diff .parts-diff[data-diff-lines='0']")
    finally:
        ctx.close()
