"""The dashboard's acceptance: a real pipeline fills the database, a real browser checks what the pages say.

Sensor messages -> gateway Mosquitto -> `edgewave-agent run` -> cloud Mosquitto -> `edgewave-cloud run`
(ingest, the Spark job and the dashboard), with the agent configured by `push-config`. One pipeline serves
the whole module; the tests run in file order (the last one stops the agent).

EDGEWAVE_UPDATE_SCREENSHOTS=1 also writes the live, alarm and configuration screenshots to docs/images/.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from agent_harness import ALARM, AVERAGE, KEY, AgentProcess, Publisher, alarm, observation
from broker_process import MosquittoBroker
from cloud_harness import CloudProcess, query, wait_for, write_config
from dashboard_data import (CHROMIUM, PASSWORDS, ROLES, HttpSession, fixture_password_hash, free_port,
                            save_screenshot, wait_until_serving)
from edgewave.shared.secret_files import write_private
from prometheus_client.parser import text_string_to_metric_families

import playwright.sync_api as playwright_sync  # noqa: E402  (a dev dependency)

EX = "http://example.org/"
XSD_INTEGER = "<http://www.w3.org/2001/XMLSchema#integer>"
FIRST_MATCHES = 4
METRICS_TOKEN = "scraper-token-of-the-test-0123456789"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


SCHEMA = "ex:triggeredBy rdfs:subPropertyOf ex:raisedBy ."
"""A vendor's term for raisedBy: an alarm that says triggeredBy matches through entailment."""


def document(patterns: dict[str, str], static: str = "ex:s1 ex:locatedIn ex:room1 .") -> str:
    """A config document (no ew:version: push-config assigns it)."""
    blocks = " ,\n    ".join(f'[ a ew:Pattern ; ew:name "{name}" ; ew:query """{text}""" ]'
                              for name, text in patterns.items())
    return (f"@prefix ew: <https://edgewave.dev/ns#> .\n@prefix ex: <{EX}> .\n"
            f"@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
            f"ew:config {{\n  ex:cfg a ew:GatewayConfig ;\n    ew:pattern {blocks} .\n}}\n"
            f"ew:schema {{ {SCHEMA} }}\new:static {{ {static} }}\n")


FIRST = document({"alarm": ALARM})


@dataclass
class Pipeline:
    url: str
    tmp: Path
    db: Path
    cloud: CloudProcess
    agent: AgentProcess
    sensors: Publisher
    port: int

    def publish_alarm(self, n: int, vendor: bool = False) -> None:
        """An alarm message that completes the `alarm` pattern on its own (room1, through static data);
        ``vendor``: it says triggeredBy, and the gateway entails raisedBy from the schema."""
        payload = alarm(n)
        if vendor:
            payload = payload.replace(f"<{EX}raisedBy>".encode(), f"<{EX}triggeredBy>".encode())
        self.sensors.publish("ew/in/alarm/s1", payload)

    def matches_in_sqlite(self) -> int:
        rows = query(self.db, "SELECT SUM(count) FROM matches_per_minute")
        return (rows[0][0] or 0) if rows else 0


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Iterator[Pipeline]:
    tmp = tmp_path_factory.mktemp("pipeline")
    local = MosquittoBroker(tmp / "local-broker").start()
    cloud_broker = MosquittoBroker(tmp / "cloud-broker").start()
    port = free_port()
    users = {name: {"role": ROLES[name], "password_hash": fixture_password_hash(pw)} for name, pw in PASSWORDS.items()}
    write_private(tmp / "metrics-token", METRICS_TOKEN + "\n")
    config = write_config(tmp, cloud_broker, dashboard={
        "host": "127.0.0.1", "port": port, "users": users, "secret_key_file": str(tmp / "dashboard-secret"),
        "offline_after_s": 60, "alarm_keys": {"alarm": ["room"]}, "metrics_token_file": str(tmp / "metrics-token")})
    cfg = yaml.safe_load(config.read_text())
    cfg["gateways"] = {"gw1": {"key": KEY}}
    cfg["push"] = {"ack_timeout_s": 30}
    config.write_text(yaml.safe_dump(cfg))
    cloud = CloudProcess(["run", "--config", str(config)], tmp / "cloud.log")
    agent = AgentProcess(tmp / "agent", local, cloud_broker)
    sensors = None
    try:
        wait_until_serving(port, cloud, timeout=180)
        wait_for(lambda: "ingest connected" in cloud.log(), 120, "ingest to connect", alive=cloud)
        agent.start()
        (tmp / "first.trig").write_text(FIRST)
        push = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config),
                               "--gateway", "gw1", str(tmp / "first.trig")], capture_output=True, text=True,
                              timeout=120)
        assert push.returncode == 0, push.stdout + push.stderr
        sensors = Publisher(local, "sensors")
        p = Pipeline(f"http://127.0.0.1:{port}", tmp, tmp / "cloud.db", cloud, agent, sensors, port)
        for n in range(1, FIRST_MATCHES + 1):
            p.publish_alarm(n)
        wait_for(lambda: p.matches_in_sqlite() >= FIRST_MATCHES, 300, "the Spark job to count the first matches",
                 interval=1, alive=cloud)
        yield p
    finally:
        if sensors is not None:
            sensors.close()
        agent.stop()
        code = cloud.stop()
        local.kill()
        cloud_broker.kill()
        assert code == 0, cloud.log()[-4000:]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def logged_in(browser, pipeline):
    """One browser context for the module, logged in as alice once (sessions outlive a dashboard restart)."""
    ctx = browser.new_context(base_url=pipeline.url, viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto("/login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORDS["alice"])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    page.close()
    yield ctx
    ctx.close()


@pytest.fixture
def page(logged_in):
    """A page of its own for each test, in the logged-in context."""
    page = logged_in.new_page()
    yield page
    page.close()


def reload_until(page, check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; page:\n{page.content()[:3000]}")
        time.sleep(1)
        page.reload()


def test_the_overview_chart_shows_exactly_the_counts_in_sqlite(page, pipeline):
    page.goto("/?range=1h")
    page.wait_for_selector("#matches-chart[data-drawn=chart] canvas")
    # The data the chart is drawn from, as the page's script asks for it (read through the page's
    # own session; reading the intercepted response fails when a refresh navigates meanwhile).
    chart = page.request.get("/api/matches?range=1h").json()
    start, end, bucket = chart["start_ms"], chart["end_ms"], chart["bucket_ms"]
    expected: dict[str, list[int]] = {}
    for pattern, minute, count in query(pipeline.db, "SELECT pattern, minute_ms, count FROM matches_per_minute "
                                        "WHERE minute_ms >= ? AND minute_ms < ?", (start, end)):
        expected.setdefault(pattern, [0] * ((end - start) // bucket))[(minute - start) // bucket] += count
    assert chart["series"] == expected and sum(expected["alarm"]) == FIRST_MATCHES
    assert page.locator("#matches-chart").get_attribute("data-total") == str(FIRST_MATCHES)
    assert page.locator("#total-matches").inner_text() == str(FIRST_MATCHES)
    assert page.locator("#patterns-table tbody tr", has_text="alarm").locator("td").nth(1).inner_text() \
        == str(FIRST_MATCHES)


def test_a_new_match_reaches_the_live_page_within_5s_with_its_evidence(page, pipeline):
    page.goto("/live")
    page.wait_for_selector("#live-state[data-state=live]")
    page.wait_for_selector("#live-table tr.live-match")           # the backlog: the first matches
    started = time.monotonic()
    pipeline.publish_alarm(10, vendor=True)
    row = page.locator("#live-table tbody tr", has=page.locator(f".term[data-full='<{EX}alarm10>']"))
    row.wait_for(timeout=5000)
    assert time.monotonic() - started < 5.0
    assert "gw1" in row.inner_text() and "alarm" in row.inner_text()
    assert "ex:alarm10" in row.locator("td.event").inner_text()       # the term as read, not the IRI
    row.locator("details.evidence > summary").click()
    panel = row.locator("details.evidence")
    assert f"<{EX}alarm10>" not in panel.inner_text()                  # the triples as read first ...
    panel.locator(".raw-toggle").click()                                # ... the exact ones one click away
    statement = f'<{EX}alarm10> <{EX}alarmLevel> "10"^^{XSD_INTEGER} .'
    assert statement in panel.inner_text()
    assert f"<{EX}alarm10> <{EX}raisedBy> <{EX}s1> ." in panel.inner_text()
    assert "Window" in panel.inner_text()
    # The contributing raisedBy triple was entailed from the message's triggeredBy, by the schema's axiom.
    entailed = panel.locator("li.triple.entailed")
    assert entailed.count() == 1 and f"<{EX}alarm10> <{EX}raisedBy> <{EX}s1> ." in entailed.inner_text()
    assert f"from <{EX}alarm10> <{EX}triggeredBy> <{EX}s1> ." in entailed.inner_text()
    assert f"<{EX}triggeredBy> <http://www.w3.org/2000/01/rdf-schema#subPropertyOf> <{EX}raisedBy> ." \
        in entailed.inner_text()
    # The match's own evidence page, from the dashboard's alarm state.
    panel.locator("a", has_text="evidence").click()
    page.wait_for_url(re.compile(r"/matches/"))
    page.locator(".evidence-page .raw-toggle").click()
    assert statement in page.locator(".evidence-page").inner_text()
    assert f"<{EX}room1>" in page.locator(".evidence-page table.bindings .term").evaluate_all(
        "terms => terms.map(t => t.dataset.full)")
    assert page.locator(".evidence-page li.triple.entailed .axioms").inner_text().count("subPropertyOf") == 1


def _dashboard_child(pipeline: Pipeline) -> int:
    import psutil

    for child in psutil.Process(pipeline.cloud.proc.pid).children():
        if "dashboard" in child.cmdline():
            return child.pid
    raise AssertionError("no dashboard child under edgewave-cloud run")


def test_an_acknowledged_alarm_stays_so_and_one_key_keeps_one_open_alarm(page, pipeline):
    page.goto("/alarms")
    rows = page.locator("#alarms-table tbody tr[data-state=active]", has_text="alarm")
    assert rows.count() == 1                                        # five matches of room1: one alarm
    assert rows.first.get_attribute("data-count") == str(FIRST_MATCHES + 1)
    alarm_id = rows.first.get_attribute("data-alarm-id")
    rows.first.locator("a").click()
    page.wait_for_url(re.compile(rf"/alarms/{alarm_id}$"))
    page.fill("form.ack input[name=comment]", "checking the sensor in room 1")
    page.click("form.ack button[type=submit]")
    page.wait_for_url(re.compile(rf"/alarms/{alarm_id}$"))
    assert page.locator("#alarm-state").inner_text() == "acknowledged"
    page.reload()
    assert page.locator("#alarm-state").inner_text() == "acknowledged"
    assert "checking the sensor in room 1" in page.locator("#alarm-ack").inner_text()
    # A dashboard restart (the service starts it again) keeps it acknowledged.
    os.kill(_dashboard_child(pipeline), signal.SIGTERM)
    wait_for(lambda: pipeline.cloud.log().count("service started child=dashboard") >= 2, 60,
             "the service to restart the dashboard", alive=pipeline.cloud)
    wait_until_serving(pipeline.port, pipeline.cloud, timeout=60)
    page.reload()
    assert page.locator("#alarm-state").inner_text() == "acknowledged"
    # Another match of the same key adds to the open alarm, on the list without a reload.
    page.goto("/alarms")
    page.wait_for_selector("#alarms-state[data-state=live]")
    pipeline.publish_alarm(11)
    row = page.locator(f"#alarms-table tbody tr[data-alarm-id='{alarm_id}'][data-count='{FIRST_MATCHES + 2}']")
    row.wait_for(timeout=5000)
    assert row.get_attribute("data-state") == "acknowledged"
    assert "ex:alarm11" in row.locator(".message").inner_text()      # what the newest match says, updated live
    assert page.locator("#alarms-table tbody tr", has=page.locator(f".term[data-full='<{EX}room1>']")).count() == 1
    # The list as CSV, the same filters, times in the viewer's zone: the acknowledged alarm with its comment.
    export = page.request.get(page.locator("#alarms-csv").get_attribute("href") + "&tz=Asia/Kolkata")
    assert export.ok and export.headers["content-type"].startswith("text/csv")
    [listed] = [r for r in csv.DictReader(io.StringIO(export.text())) if f"<{EX}room1>" in r["key"]]
    assert (listed["state"], listed["matches"], listed["comment"]) == \
        ("acknowledged", str(FIRST_MATCHES + 2), "checking the sensor in room 1")
    assert listed["acknowledged_by"] and listed["acknowledged_at"].endswith("+05:30")
    # Cleared: the next match opens a new alarm.
    page.goto(f"/alarms/{alarm_id}")
    page.click("form.clear button[type=submit]")
    page.wait_for_url(re.compile(rf"/alarms/{alarm_id}$"))
    assert page.locator("#alarm-state").inner_text() == "cleared"
    page.goto("/alarms")
    page.wait_for_selector("#alarms-state[data-state=live]")
    pipeline.publish_alarm(12)
    room1 = page.locator(f".term[data-full='<{EX}room1>']")
    fresh = page.locator("#alarms-table tbody tr[data-state=active]", has=room1)
    fresh.wait_for(timeout=5000)
    assert fresh.get_attribute("data-alarm-id") != alarm_id and fresh.get_attribute("data-count") == "1"


def _newest_push(page, gateway: str) -> tuple[str, str]:
    """(version, shown status) of the gateway's newest push on the configuration page."""
    row = page.locator(f"#config-table tr[data-gateway='{gateway}']")
    return row.get_attribute("data-version"), row.locator("[data-status]").get_attribute("data-status")


def test_pushing_from_the_form_is_applied_by_the_agent_and_a_broken_pattern_shows_why(page, pipeline):
    page.goto("/config")
    editor = page.locator("form.push-editor")
    assert editor.locator("textarea").input_value().strip() == FIRST.strip()     # the applied document
    second = FIRST.replace("ex:s1 ex:locatedIn ex:room1 .",
                           "ex:s1 ex:locatedIn ex:room1 . ex:s2 ex:locatedIn ex:room2 .")
    editor.locator("textarea").fill(second)
    editor.locator("input[name=gateway][value=gw1]").check()
    editor.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"/config\?pushed=gw1"))
    reload_until(page, lambda: _newest_push(page, "gw1") == ("2", "applied"), 60, "the agent to apply version 2")
    # The page may show the version the agent's status reports before ingest has the ack itself.
    wait_for(lambda: query(pipeline.db, "SELECT version, status FROM config_pushes WHERE gateway='gw1' "
                                        "ORDER BY version") == [(1, "applied"), (2, "applied")], 30,
             "both pushes recorded applied")
    save_screenshot(page, "dashboard-config.png")
    # A pattern that does not compile is refused with the reason before anything is published.
    page.locator("form.push-editor textarea").fill(FIRST.replace("REGISTER RSTREAM", "REGISTER RSTREEM"))
    page.locator("form.push-editor input[name=gateway][value=gw1]").check()
    page.locator("form.push-editor button[type=submit]").click()
    assert "parse error in pattern alarm at line" in page.locator("form.push-editor .error").inner_text()
    assert len(query(pipeline.db, "SELECT 1 FROM config_pushes WHERE gateway='gw1'")) == 2
    # One only the gateway can judge (a stream its sensor input does not reach): rejected, with its reason.
    page.goto("/config")
    elsewhere = ALARM.replace("http://example.org/stream/alarm", "http://elsewhere.org/stream")
    page.locator("form.push-editor textarea").fill(document({"alarm": elsewhere}))
    page.locator("form.push-editor input[name=gateway][value=gw1]").check()
    page.locator("form.push-editor button[type=submit]").click()
    page.wait_for_url(re.compile(r"/config\?pushed=gw1"))
    reload_until(page, lambda: _newest_push(page, "gw1") == ("3", "rejected"), 60, "the agent to reject version 3")
    assert "unknown stream" in page.locator("#config-table tr[data-gateway='gw1']").inner_text()
    # The old patterns keep matching.
    pipeline.publish_alarm(20)
    wait_for(lambda: any(e["pattern"] == "alarm" and f"<{EX}alarm20>" in str(e["bindings"]) for e in
                         page.request.get("/api/live?limit=5").json()["events"]), 15, "alarm 20 to match")
    # The gateway's configuration page: its applied document, highlighted; the history; a diff; a rollback.
    page.goto("/gateways/gw1/config")
    assert page.locator("figure.pattern[data-pattern=alarm] .hl-kw", has_text="REGISTER").count() == 1
    assert page.locator("figure.pattern[data-pattern=alarm] .hl-var", has_text="?room").count() >= 1
    history = page.locator("#config-history tbody tr")
    assert [r.get_attribute("data-version") for r in history.all()] == ["3", "2", "1"]
    assert "rejected" in history.nth(0).inner_text() and "applied" in history.nth(1).inner_text()
    save_screenshot(page, "dashboard-gateway-config.png")
    page.goto("/gateways/gw1/config/diff?a=1&b=2")
    added = page.locator("#diff-table tr.diff-add")
    assert added.count() == 1 and "ex:s2 ex:locatedIn ex:room2" in added.inner_text()
    page.goto("/gateways/gw1/config")
    page.locator("#config-history tr[data-version='1'] button", has_text="Roll back").click()
    page.wait_for_url(re.compile(r"/gateways/gw1/config\?rolled=1"))
    wait_for(lambda: query(pipeline.db, "SELECT status FROM config_pushes WHERE gateway='gw1' AND version=4")
             == [("applied",)], 60, "the rollback to be applied")
    assert query(pipeline.db, "SELECT document FROM config_pushes WHERE gateway='gw1' AND version=4") == [(FIRST,)]


def _scrape(pipeline: Pipeline, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(pipeline.url + "/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def json_of(session: HttpSession, path: str) -> dict:
    return json.loads(session.get(path))


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_prometheus_scrape_finds_the_counts_the_dashboard_shows(pipeline):
    """What a Prometheus a site already runs would read: the token opens /metrics, nothing else does,
    and its figures are the dashboard's own."""
    assert _scrape(pipeline, {})[0] == 401
    assert _scrape(pipeline, {"Authorization": "Bearer not-the-token"})[0] == 401
    session = HttpSession(pipeline.url)
    gateways = {g["gateway"]: g for g in json_of(session, "/api/gateways")["gateways"]}

    worker = (("worker", "0"),)

    def consistent() -> tuple[dict, dict] | None:
        """Two equal scrapes around the overview (no Spark commit in between), taken once ingest's
        figures, which each worker writes every few seconds, have caught up with what Spark counted."""
        status, before = _scrape(pipeline, {"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert status == 200, before
        overview = json_of(session, "/api/overview?range=1h")
        after = _samples(_scrape(pipeline, {"Authorization": f"Bearer {METRICS_TOKEN}"})[1])
        counted = sum(v for (name, _), v in after.items() if name == "edgewave_matches_total")
        landed = after.get(("edgewave_ingest_events_landed_total", worker), 0)
        return (after, overview) if _samples(before) == after and landed >= counted else None

    after, overview = wait_for(consistent, 60, "two equal scrapes, ingest's figures at least Spark's count")
    shown = {p["pattern"]: p["matches"] for p in overview["patterns"]}
    scraped = {dict(labels)["pattern"]: value for (name, labels), value in after.items()
               if name == "edgewave_matches_total" and dict(labels)["gateway"] == "gw1"}
    assert shown["alarm"] >= FIRST_MATCHES and scraped == shown
    gw1 = (("gateway", "gw1"),)
    assert after[("edgewave_gateway_online", gw1)] == 1
    assert after[("edgewave_gateway_config_version", gw1)] == gateways["gw1"]["config_version"]
    assert after[("edgewave_gateway_messages_in_total", gw1)] > 0
    assert sum(v for (name, _), v in after.items() if name == "edgewave_spark_batches_total") > 0
    # Ingest's figures: every counted event was landed.
    assert after[("edgewave_ingest_events_landed_total", worker)] >= sum(scraped.values())
    assert after[("edgewave_ingest_group_commit_seconds_count", worker)] > 0
    assert after[("edgewave_ingest_rejected_messages_total", (("reason", "invalid_event"), *worker))] == 0
    assert ("edgewave_live_streams", ()) in after
    # A logged-in viewer reads the same page without the token.
    assert _samples(session.get("/metrics").decode())[("edgewave_gateway_online", gw1)] == 1


def _spark_job(cloud: CloudProcess) -> list:
    """The Spark job's processes under ``edgewave-cloud run`` (its Python driver and the JVM)."""
    import psutil

    for child in psutil.Process(cloud.proc.pid).children(recursive=True):
        if "spark" in child.cmdline() and "edgewave.cloud.cli" in " ".join(child.cmdline()):
            return [child, *child.children(recursive=True)]
    return []


def test_a_pushed_aggregate_is_stored_once_through_agent_and_spark_kills_and_read_on_its_page(page, pipeline):
    """A per-instance query pushed to the running agent (the average temperature per room, tumbling
    2 s windows: a per-minute aggregate, shortened) reports each instance as one event; the agent
    is SIGKILLed and started again, and so is the Spark job (SIGKILL; the service starts it again),
    while readings arrive. Every instance is stored once, and every reading counted once; the
    query's page on the dashboard shows each stored row and charts the average."""
    static = "ex:s1 ex:locatedIn ex:room1 . ex:t1 ex:locatedIn ex:room1 ."
    (pipeline.tmp / "average.trig").write_text(document({"alarm": ALARM, "average": AVERAGE}, static=static))
    push = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config",
                           str(pipeline.tmp / "cloud.yaml"), "--gateway", "gw1", str(pipeline.tmp / "average.trig")],
                          capture_output=True, text=True, timeout=120)
    assert push.returncode == 0, push.stdout + push.stderr
    values = []
    for n in range(60):
        if n == 20:
            pipeline.agent.kill()
            time.sleep(1.0)
            pipeline.agent.start()
        if n == 35:
            spark = _spark_job(pipeline.cloud)
            assert spark, "the Spark job runs under edgewave-cloud run"
            for proc in spark:
                proc.send_signal(signal.SIGKILL)
        value = 10 + n % 7
        pipeline.sensors.publish("ew/in/fire/t1", observation(f"temp{n}", "t1", "temperature", value))
        values.append(value)
        time.sleep(0.1)

    def stored() -> list[tuple]:
        return query(pipeline.db, "SELECT window_start, window_end, operator, rows FROM instance_results "
                                  "WHERE gateway = 'gw1' AND query = 'average'")

    def counted() -> int:
        return sum(int(row["n"].split('"')[1]) for *_, rows in stored() for row in json.loads(rows))
    wait_for(lambda: counted() >= len(values), 240, lambda: f"{counted()} of {len(values)} readings stored",
             interval=1, alive=pipeline.cloud)
    rows = stored()
    ends = [end for _, end, _, _ in rows]
    assert len(ends) == len(set(ends)), f"an instance stored twice: {sorted(ends)}"
    assert all(end - start == 2000 and end % 2000 == 0 and op == "RSTREAM" for start, end, op, _ in rows)
    readings = [row for *_, r in rows for row in json.loads(r)]
    assert {row["room"] for row in readings} == {f"<{EX}room1>"}
    assert counted() == len(values)
    weighted = sum(float(row["avg"].split('"')[1]) * int(row["n"].split('"')[1]) for row in readings)
    assert abs(weighted - sum(values)) < 0.01
    assert "service child=spark exited" in pipeline.cloud.log()

    page.goto("/queries")
    page.locator("a", has_text="average").first.click()
    page.wait_for_url(re.compile(r"/queries/average"))
    table = page.locator("#rows-table tbody tr")
    assert table.count() == len(readings)
    assert sorted(int(r.get_attribute("data-end")) for r in table.all()) == sorted(ends)
    assert set(page.locator("#rows-table tbody td.value").all_inner_texts()) <= {"ex:room1", f"<{EX}room1>",
                                                                                 "room1"}
    page.locator("#instance-charts canvas").first.wait_for(timeout=15_000)


def test_stopping_the_agent_turns_its_gateway_offline(page, pipeline):
    page.goto("/gateways")
    assert page.locator("#gateways-table tr[data-gateway=gw1]").get_attribute("data-health") == "online"
    assert pipeline.agent.stop() == 0
    reload_until(page, lambda: page.locator("#gateways-table tr[data-gateway=gw1]").get_attribute("data-health")
                 == "offline", 30, "gw1 to show offline")
    assert "reported offline" in page.locator("#gateways-table tr[data-gateway=gw1]").inner_text()
