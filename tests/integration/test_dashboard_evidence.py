"""An absence's and a chained match's evidence on the dashboard, in a real browser.

`edgewave-cloud dashboard` as a subprocess over a live feed written through ingest's own
writer (``LiveFeedWriter``, landing records as ingest makes them) and a Parquet history
folder written before the event format had ``entailed``, ``expected`` or ``derivedFrom``.
An absence must say what was expected and by when; a match built from a chained rule's
triples must link to the rule matches that made them, and the link must open that match.
What a gateway sent is text on the page: a statement or id with markup stays text, and an
id that is not an event id is no link.
"""
from __future__ import annotations

import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Iterator
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cloud_harness import CloudProcess, landing_record, wait_for
from dashboard_data import PASSWORDS, chromium, free_port, wait_until_serving, write_dashboard_config
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.shared.events import match_event


EX = "http://example.org/gw1/"
ZONE = "Europe/Berlin"
MINUTE = 60_000

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class Matches:
    """The events on the dashboard: an absence, a rule match, the chained match built from it, one from old history."""

    def __init__(self, now: int) -> None:
        self.start = now - 20 * MINUTE
        self.deadline = self.start + 5 * MINUTE
        self.heartbeat = f"<{EX}sensor7> <{EX}heartbeat> ?next ."
        self.hostile_statement = f'<{EX}sensor7> <{EX}note> "</code><script>alert(1)</script>" .'
        self.absence = match_event(
            "gw1", "silent-sensor", {"sensor": f"<{EX}sensor7>", "last": '"41"'}, self.start, self.deadline,
            [((f"<{EX}sensor7>", f"<{EX}heartbeat>", '"41"'), self.start)], self.deadline + 300,
            expected=[self.heartbeat, self.hostile_statement])
        self.rule = match_event(
            "gw1", "hot-rooms", {"room": f"<{EX}room3>", "building": f"<{EX}building1>"}, now - 9 * MINUTE,
            now - 8 * MINUTE, [((f"<{EX}room3>", f"<{EX}temperature>", '"63"'), now - 8 * MINUTE)], now - 8 * MINUTE)
        # The ids a gateway could send besides the real one: markup after the event id prefix (a link,
        # escaped, to a match that does not exist) and something that is no event id at all (no link).
        self.markup_id = 'urn:edgewave:event:"><img src=x onerror=alert(2)>'
        self.not_an_id = "javascript:alert(3)"
        self.chained = match_event(
            "gw1", "building-alert", {"building": f"<{EX}building1>"}, now - 8 * MINUTE, now - 8 * MINUTE,
            [((f"<{EX}room3>", f"<{EX}hotIn>", f"<{EX}building1>"), now - 8 * MINUTE)], now - 8 * MINUTE + 20,
            derived_from=[self.rule["id"], self.markup_id, self.not_an_id])
        self.old_id = "urn:edgewave:event:" + "0" * 31 + "1"
        self.old_triple = f"<{EX}smoke1> <http://www.w3.org/ns/sosa/hasSimpleResult> true ."
        self.old_end = now - 3 * 1440 * MINUTE


class Dashboard:
    def __init__(self, url: str, tmp: Path, matches: Matches, proc: CloudProcess) -> None:
        self.url, self.tmp, self.matches, self.proc = url, tmp, matches, proc


def write_old_history(history: Path, m: Matches) -> None:
    """A finished batch as a Spark job wrote it before ``entailed``, ``expected`` and ``derivedFrom`` existed."""
    folder = history / "events" / "batch_id=0"
    folder.mkdir(parents=True)
    row = {"id": m.old_id, "type": "Match", "gateway": "gw1", "pattern": "fire", "kind": "match",
           "windowStart": m.old_end - 4000, "windowEnd": m.old_end, "emittedAt": m.old_end + 10,
           "bindings": [{"variable": "room", "value": f"<{EX}room1>"}], "triples": [m.old_triple],
           "sensor": None, "property": None, "result": None, "ingestTime": m.old_end + 50}
    pq.write_table(pa.Table.from_pylist([row]), folder / "part-00000-old-c000.snappy.parquet")
    (folder / "_SUCCESS").write_bytes(b"")


def alarm_of(tmp: Path, event_id: str) -> int | None:
    """The alarm the dashboard's follower filed the match under (None: not yet)."""
    try:
        conn = sqlite3.connect(tmp / "dashboard.db")
        try:
            row = conn.execute("SELECT alarm_id FROM alarm_matches WHERE event_id = ?", (event_id,)).fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return None
    return None if row is None else row[0]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[Dashboard]:
    tmp = tmp_path_factory.mktemp("evidence")
    matches = Matches(int(time.time() * 1000))
    write_old_history(tmp / "history", matches)
    feed = LiveFeedWriter(tmp / "live.db", max_rows=100)
    feed.append([landing_record(e, e["emittedAt"] + 40) for e in (matches.absence, matches.rule, matches.chained)])
    feed.close()
    port = free_port()
    config = write_dashboard_config(tmp, port)
    settings = yaml.safe_load(config.read_text())
    settings["spark"] = {"history": str(tmp / "history")}
    config.write_text(yaml.safe_dump(settings))
    proc = CloudProcess(["dashboard", "--config", str(config)], tmp / "dashboard.log")
    try:
        wait_until_serving(port, proc)
        wait_for(lambda: alarm_of(tmp, matches.chained["id"]), 30, "the follower to file the matches", alive=proc)
        yield Dashboard(f"http://127.0.0.1:{port}", tmp, matches, proc)
    finally:
        assert proc.stop(timeout=20) == 0, proc.log()[-3000:]
    assert "Traceback" not in proc.log() and "level=ERROR" not in proc.log()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser, dashboard):
    context = browser.new_context(base_url=dashboard.url, timezone_id=ZONE)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto("/login")
    page.fill("input[name=username]", "victor")
    page.fill("input[name=password]", PASSWORDS["victor"])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    yield page
    context.close()
    assert dialogs == [], "a gateway's text ran as a script"


def local(ms: int) -> str:
    """A time as the server's pages write it, in the viewer's zone."""
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S")


def no_markup_from_gateways(page) -> None:
    assert page.locator("main script, main img").count() == 0


def exact_triples(page) -> list[str]:
    """The evidence's statements exactly as the event gave them: one click away from the ones shown as read."""
    page.locator(".evidence-page .raw-toggle").click()
    return page.locator(".evidence-page ol.triples li code.raw-statement").all_inner_texts()


def test_an_absence_shows_what_was_expected_and_by_when(page, dashboard):
    m = dashboard.matches
    page.goto(f"/matches/{quote(m.absence['id'])}")
    assert "absence" in page.locator("h1").inner_text()
    block = page.locator(".evidence-page .absence")
    assert block.locator("p").first.inner_text() == \
        f"Expected by {local(m.deadline)}, did not arrive within 5 min of the match's start:"
    assert block.locator("ul.expected li").all_inner_texts() == [m.heartbeat, m.hostile_statement]
    assert page.locator(".evidence-page ol.triples li").all_inner_texts() == ["sensor7 heartbeat 41"]   # as read
    assert exact_triples(page) == [f'<{EX}sensor7> <{EX}heartbeat> "41" .']
    assert page.locator(".evidence-page .derived-from").count() == 0
    no_markup_from_gateways(page)
    # Its alarm's page shows the same, the match marked an absence.
    page.goto(f"/alarms/{alarm_of(dashboard.tmp, m.absence['id'])}")
    match = page.locator(f"details.evidence[data-id='{m.absence['id']}']")
    assert "absence" in match.locator("summary").inner_text()
    assert f"Expected by {local(m.deadline)}" in match.locator(".absence").inner_text()
    assert match.locator("ul.expected li").all_inner_texts() == [m.heartbeat, m.hostile_statement]
    no_markup_from_gateways(page)


def test_a_chained_match_links_to_the_rule_matches_it_was_built_from(page, dashboard):
    m = dashboard.matches
    page.goto(f"/matches/{quote(m.chained['id'])}")
    assert "chained" in page.locator("h1").inner_text()
    built = page.locator(".evidence-page .derived-from")
    assert built.locator("p").inner_text().startswith("Built from:")
    assert built.locator("li").all_inner_texts() == [m.rule["id"], m.markup_id, f"{m.not_an_id} (not an event id)"]
    links = built.locator("a")
    assert links.all_inner_texts() == [m.rule["id"], m.markup_id]
    assert [a.get_attribute("href") for a in links.all()] == [
        f"/matches/{m.rule['id']}", "/matches/urn:edgewave:event:%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%282%29%3E"]
    assert page.locator(".evidence-page .absence").count() == 0
    no_markup_from_gateways(page)
    # The link opens the rule match's own evidence, kept with its alarm.
    links.first.click()
    page.wait_for_url(f"**/matches/{m.rule['id']}")
    assert page.locator("h1").inner_text() == "hot-rooms on gw1"
    assert exact_triples(page) == m.rule["triples"]
    # The id with markup names no match the dashboard has.
    assert page.goto(f"/matches/{quote(m.markup_id, safe=':')}").status == 404
    no_markup_from_gateways(page)


def test_the_live_page_marks_them_and_its_panel_shows_them(page, dashboard):
    m = dashboard.matches
    page.goto("/live")
    page.wait_for_selector("#live-state[data-state=live]")
    absence = page.wait_for_selector(f"#live-table tr[data-id='{m.absence['id']}']")
    chained = page.locator(f"#live-table tr[data-id='{m.chained['id']}']")
    rule = page.locator(f"#live-table tr[data-id='{m.rule['id']}']")
    assert absence.query_selector(".badge.marker").inner_text() == "absence"
    assert chained.locator(".badge.marker").all_inner_texts() == ["chained"]
    assert rule.locator(".badge.marker").count() == 0
    absence.query_selector("details.evidence > summary").click()
    panel = absence.query_selector(".absence")
    assert panel.inner_text().startswith("Expected by ") and "did not arrive within 5 min of the match's start" \
        in panel.inner_text()
    assert [li.inner_text() for li in panel.query_selector_all("ul.expected li")] == [m.heartbeat,
                                                                                     m.hostile_statement]
    chained.locator("details.evidence > summary").click()
    built = chained.locator(".derived-from")
    assert built.locator("li").all_inner_texts() == [m.rule["id"], m.markup_id, f"{m.not_an_id} (not an event id)"]
    assert built.locator("a").count() == 2
    no_markup_from_gateways(page)
    built.locator("a").first.click()
    page.wait_for_url(f"**/matches/{m.rule['id']}")
    assert page.locator("h1").inner_text() == "hot-rooms on gw1"
    # A time range lists them from the feed, marked the same way.
    page.goto("/live?range=1h")
    assert page.locator(f"#range-table tr[data-id='{m.absence['id']}'] .badge.marker").all_inner_texts() == \
        ["absence"]
    assert page.locator(f"#range-table tr[data-id='{m.chained['id']}'] .badge.marker").all_inner_texts() == \
        ["chained"]


def test_a_match_in_history_from_before_these_fields_opens_as_before(page, dashboard):
    m = dashboard.matches
    response = page.goto(f"/matches/{quote(m.old_id)}?at={m.old_end}")
    assert response.status == 200 and page.locator("#evidence-source").count() == 1
    assert exact_triples(page) == [m.old_triple]
    assert page.locator(".evidence-page .absence, .evidence-page .derived-from, h1 .badge.marker").count() == 0
    page.goto(f"/live?start={m.old_end - MINUTE}&end={m.old_end + MINUTE}")
    assert page.locator("#range-table tbody tr[data-id]").evaluate_all("rows => rows.map(r => r.dataset.id)") == \
        [m.old_id]
