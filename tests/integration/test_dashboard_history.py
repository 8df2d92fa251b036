"""Matches and ranges SQLite no longer holds, read from the Parquet history the real Spark job wrote.

Known events land in a landing zone; `edgewave-cloud spark --available-now` (the real
job, several micro-batches) writes them to Parquet and the aggregates. The live feed
keeps only the newest few (as a small ``live_feed.max_rows`` would), and the dashboard's
follower makes alarms of those. The live page's ranges and its CSV must list every
event in a range, newest first, and a match whose row is deleted from the dashboard's
SQLite must still open to its evidence, from Parquet: an absence's too, with what it
expected, and a chained match's, with links to the rule matches it was built from.
"""
from __future__ import annotations

import csv
import io
import re
import sqlite3
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import pytest
import yaml

from cloud_harness import CloudProcess, fill_landing_zone, landing_record, wait_for, write_config
from dashboard_data import CHROMIUM, PASSWORDS, free_port, wait_until_serving, write_dashboard_config
from edgewave.agent.engine.evidence import Entailment
from edgewave.cloud.dashboard.bucketing import preset_range
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.shared.events import match_event, significant_event

import playwright.sync_api as playwright_sync  # noqa: E402  (a dev dependency)

EX = "http://example.org/b#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
AXIOM = (f"<{EX}locatedIn>", "<http://www.w3.org/2000/01/rdf-schema#range>", f"<{EX}Room>")
MINUTE = 60_000
FEED_ROWS = 40

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def known_events(now: int) -> list[dict]:
    """240 matches, one every 15 minutes back over two and a half days, and 20 significant observations."""
    events = []
    for i in range(240):
        end = now - i * 15 * MINUTE - 7_000
        room = f"<{EX}room{i % 5}>"
        located = (f"<{EX}sensor{i}>", f"<{EX}locatedIn>", room)
        is_room = (room, RDF_TYPE, f"<{EX}Room>")
        entailed = [Entailment(is_room, end - 1000, located, "O", room, (AXIOM,))] if i % 4 == 0 else []
        events.append(match_event("gw1" if i % 3 else "gw2", "fire" if i % 2 == 0 else "intrusion", {"room": room},
                                  end - 4000, end, [(located, end - 1000), (is_room, end - 1000)], end + 50,
                                  entailed=entailed))
    events.extend(absence_and_chain(now))
    for i in range(20):
        at = now - i * 97 * MINUTE - 3_000
        events.append(significant_event("gw1", f"<{EX}temp{i}>", f"<{EX}Temperature>", f'"{20 + i}"', at,
                                        [(f"<{EX}obs{i}>", f"<{EX}hasResult>", f'"{20 + i}"')], at + 20))
    return sorted(events, key=lambda e: e["windowEnd"])      # oldest first, as they were ingested


def absence_and_chain(now: int) -> list[dict]:
    """A day back (long out of the feed): an absence, a rule match and the chained match built from it."""
    start = now - 1440 * MINUTE - 11_000
    absence = match_event("gw1", "silent-sensor", {"sensor": f"<{EX}sensor1>"}, start, start + 5 * MINUTE,
                          [((f"<{EX}sensor1>", f"<{EX}heartbeat>", '"7"'), start)], start + 5 * MINUTE + 200,
                          expected=[f"<{EX}sensor1> <{EX}heartbeat> ?next ."])
    rule = match_event("gw2", "hot-rooms", {"room": f"<{EX}room1>"}, start, start + 1000,
                       [((f"<{EX}room1>", f"<{EX}temperature>", '"64"'), start + 1000)], start + 1100)
    chained = match_event("gw2", "building-alert", {"building": f"<{EX}b1>"}, start + 1000, start + 1000,
                          [((f"<{EX}room1>", f"<{EX}hotIn>", f"<{EX}b1>"), start + 1000)], start + 1100,
                          derived_from=[rule["id"]])
    return [absence, rule, chained]


class Rig:
    def __init__(self, url: str, tmp: Path, events: list[dict], proc: CloudProcess) -> None:
        self.url, self.tmp, self.events, self.proc = url, tmp, events, proc
        self.by_id = {e["id"]: e for e in events}

    def expected(self, start: int, end: int, gateway: str | None = None, pattern: str | None = None) -> list[str]:
        """Ids of the events with match time in [start, end), newest first (what the page must list)."""
        chosen = [e for e in self.events if start <= e["windowEnd"] < end and gateway in (None, e["gateway"])
                  and pattern in (None, e["pattern"])]
        return [e["id"] for e in sorted(chosen, key=lambda e: (e["windowEnd"], e["id"]), reverse=True)]


def history_files(tmp: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (tmp / "history").rglob("*")}


@pytest.fixture(scope="module")
def rig(tmp_path_factory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("history")
    now = int(time.time() * 1000)
    events = known_events(now)
    fill_landing_zone(tmp / "landing" / "events", events)
    port = free_port()
    dashboard_cfg = yaml.safe_load(write_dashboard_config(tmp, port).read_text())["dashboard"]
    config = write_config(tmp, dashboard=dashboard_cfg, spark={"max_files_per_trigger": 2},
                          live_feed={"max_rows": FEED_ROWS})
    job = CloudProcess(["spark", "--config", str(config), "--available-now"], tmp / "job.log")
    assert job.wait(timeout=400) == 0, job.log()[-3000:]
    batches = [p for p in (tmp / "history" / "events").iterdir() if p.name.startswith("batch_id=")]
    assert len(batches) >= 3, "the history should span several micro-batches"
    # Ingest's live feed keeps only the newest events; the dashboard makes alarms of them.
    feed = LiveFeedWriter(tmp / "live.db", FEED_ROWS)
    feed.append(landing_record(e, now) for e in events)
    feed.close()
    before = history_files(tmp)
    proc = CloudProcess(["dashboard", "--config", str(config)], tmp / "dashboard.log")
    try:
        wait_until_serving(port, proc)
        rig = Rig(f"http://127.0.0.1:{port}", tmp, events, proc)
        newest = [e for e in events if e["kind"] == "match"][-1]
        wait_for(lambda: alarm_row(tmp, newest["id"]), 30, "the follower to make alarms of the feed", alive=proc)
        yield rig
    finally:
        assert proc.stop(timeout=20) == 0, proc.log()[-3000:]
    assert history_files(tmp) == before, "the dashboard must never write where Spark writes"
    assert "Traceback" not in proc.log() and "level=ERROR" not in proc.log()


def alarm_row(tmp: Path, event_id: str) -> bool:
    conn = sqlite3.connect(tmp / "dashboard.db")
    try:
        return bool(conn.execute("SELECT 1 FROM alarm_matches WHERE event_id = ?", (event_id,)).fetchall())
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


@pytest.fixture(scope="module")
def page(rig) -> Iterator[object]:
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        context = browser.new_context(base_url=rig.url, timezone_id="America/New_York")
        page = context.new_page()
        page.goto("/login")
        page.fill("input[name=username]", "victor")
        page.fill("input[name=password]", PASSWORDS["victor"])
        page.click("button[type=submit]")
        page.wait_for_load_state()
        yield page
        browser.close()


def listed(page) -> list[str]:
    return page.locator("#range-table tbody tr[data-id]").evaluate_all("rows => rows.map(r => r.dataset.id)")


def test_a_range_older_than_the_live_feed_is_listed_from_the_parquet_history(rig, page):
    now = int(time.time() * 1000)
    page.goto("/live?range=7d&gateway=gw1&pattern=fire")
    expected = rig.expected(now - 7 * 1440 * MINUTE, now + MINUTE, "gw1", "fire")
    assert len(expected) == 80 and listed(page) == expected
    assert "the Parquet history's" in page.locator(".range-text").inner_text()
    # A range two days back (the feed holds the last few hours only), chosen in the viewer's local time.
    page.goto("/live")
    start, end = now - 2 * 1440 * MINUTE, now - 2 * 1440 * MINUTE + 5 * 60 * MINUTE
    local = page.evaluate("""([a, b]) => [a, b].map(ms => { const d = new Date(ms - new Date(ms).getTimezoneOffset()
                             * 60000); return d.toISOString().slice(0, 16); })""", [start, end])
    page.fill("input[name=from_local]", local[0])
    page.fill("input[name=to_local]", local[1])
    page.click("#live-filters button[type=submit]")
    page.wait_for_selector("#range-table")
    shown = re.search(r"start=(\d+)&end=(\d+)", page.url)
    assert shown, page.url
    expected = rig.expected(int(shown.group(1)), int(shown.group(2)))
    assert len(expected) >= 19 and listed(page) == expected      # 20 matches in 5 h, and what the minutes cut
    assert all(rig.by_id[i]["windowEnd"] < now - 40 * 15 * MINUTE for i in expected)   # none of them in the feed


def test_the_live_tables_csv_has_the_pages_filters_in_the_viewers_zone(rig, page):
    now = int(time.time() * 1000)
    page.goto("/live?range=24h&gateway=gw2")
    link = page.locator("#live-csv").get_attribute("href")
    assert "range=24h" in link and "gateway=gw2" in link and "tz=America%2FNew_York" in link
    rows = list(csv.DictReader(io.StringIO(page.request.get(link).text())))
    # The last 24 h widened outwards to whole buckets, as every range is (bucketing.make_range):
    # an event a little older than 24 h can be in it.
    expected = rig.expected(preset_range("24h", now).start_ms, now + MINUTE, "gw2")
    assert [r["event_id"] for r in rows] == expected == listed(page)
    first = rig.by_id[expected[0]]
    assert rows[0]["gateway"] == "gw2" and rows[0]["pattern"] == first["pattern"]
    assert rows[0]["bindings"] == f"?room={first['bindings'][0]['value']}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d-0[45]:00", rows[0]["match_time"])
    # The live stream's table (no range): the newest events the feed holds, with the pattern filter.
    page.goto("/live?pattern=intrusion")
    in_feed = [e for e in rig.events[-FEED_ROWS:] if e.get("pattern") == "intrusion"]
    page.wait_for_selector(f"#live-table[data-count='{len(in_feed)}']")
    live_rows = list(csv.DictReader(io.StringIO(page.request.get(page.locator("#live-csv").get_attribute("href"))
                                                .text())))
    assert [r["event_id"] for r in live_rows] == [e["id"] for e in reversed(in_feed)]
    assert len(live_rows) == int(page.locator("#live-table").get_attribute("data-count"))


def test_a_match_deleted_from_sqlite_opens_from_the_parquet_history(rig, page):
    newest = [e for e in rig.events if e["kind"] == "match"][-1]
    assert newest["entailed"], "the newest match should carry entailment"
    page.goto(f"/matches/{quote(newest['id'])}")
    assert page.locator("a", has_text="Its alarm").count() == 1 and page.locator("#evidence-source").count() == 0
    conn = sqlite3.connect(rig.tmp / "dashboard.db")
    with conn:
        assert conn.execute("DELETE FROM alarm_matches WHERE event_id = ?", (newest["id"],)).rowcount == 1
    conn.close()
    page.goto(f"/matches/{quote(newest['id'])}")
    assert page.locator("#evidence-source").count() == 1
    shown = page.locator("ol.triples li code").all_inner_texts()
    assert shown[:2] == newest["triples"]
    assert page.locator("li.triple.entailed").count() == 1
    page.locator(".evidence-page .raw-toggle").click()          # the exact statements
    assert newest["entailed"][0]["from"] in page.locator("li.triple.entailed").inner_text()
    # An old match (never in the feed) from the range table's link, and by its id alone.
    old = [e for e in rig.events if e["kind"] == "match"][10]
    for path in (f"/matches/{quote(old['id'])}?at={old['windowEnd']}", f"/matches/{quote(old['id'])}"):
        response = page.goto(path)
        assert response.status == 200 and page.locator("#evidence-source").count() == 1
        assert page.locator("ol.triples li code").all_inner_texts() == old["triples"]
    assert page.goto("/matches/urn:edgewave:event:" + "0" * 32).status == 404


def test_an_absence_and_a_chained_match_open_from_the_parquet_history_with_their_origins(rig, page):
    """The job keeps ``expected`` and ``derivedFrom`` in its history; the match pages read them from there."""
    absence, rule, chained = (next(e for e in rig.events if e.get("pattern") == name)
                              for name in ("silent-sensor", "hot-rooms", "building-alert"))
    page.goto(f"/matches/{quote(absence['id'])}?at={absence['windowEnd']}")
    assert page.locator("#evidence-source").count() == 1
    assert page.locator(".absence ul.expected li").all_inner_texts() == absence["expected"]
    assert page.locator(".absence p").first.inner_text().endswith("did not arrive within 5 min of the match's start:")
    page.goto(f"/matches/{quote(chained['id'])}?at={chained['windowEnd']}")
    assert page.locator("#evidence-source").count() == 1
    link = page.locator(".derived-from a")
    assert link.all_inner_texts() == [rule["id"]]
    link.click()
    page.wait_for_url(f"**/matches/{rule['id']}")
    assert page.locator("#evidence-source").count() == 1 and page.locator("h1").inner_text() == "hot-rooms on gw2"
    assert page.locator("ol.triples li code").all_inner_texts() == rule["triples"]
    # The range that holds them lists them marked.
    page.goto(f"/live?start={absence['windowStart']}&end={absence['windowEnd'] + MINUTE}")
    markers = {row.get_attribute("data-id"): row.locator(".badge.marker").all_inner_texts()
               for row in page.locator("#range-table tbody tr[data-id]").all()}
    assert (markers[absence["id"]], markers[chained["id"]], markers[rule["id"]]) == (["absence"], ["chained"], [])
