"""The dashboard in a real browser: `edgewave-cloud dashboard` as a subprocess, Debian's chromium driven by Playwright.

One dashboard process and one browser serve the whole module; each test gets a fresh
browser context (its own cookies). The database is filled through the cloud's own
code (aggregates.apply_batch, registry.record_status) with known counts.

EDGEWAVE_UPDATE_SCREENSHOTS=1 also writes the screenshots to docs/images/ for the README.
"""
from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import pytest

from cloud_harness import CloudProcess, landing_record
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.shared.events import instance_events, match_event, rows_dicts, significant_event
from dashboard_data import PASSWORDS, KnownData, chromium, fill_known_database, free_port, save_screenshot, \
    wait_until_serving, write_dashboard_config


REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class Dashboard:
    def __init__(self, url: str, db: Path, data: KnownData, proc: CloudProcess) -> None:
        self.url, self.db, self.data, self.proc = url, db, data, proc


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory) -> Iterator[Dashboard]:
    tmp = tmp_path_factory.mktemp("dashboard")
    data = fill_known_database(tmp / "cloud.db")
    port = free_port()
    config = write_dashboard_config(tmp, port, login_failures_per_user=3, login_failures_per_address=6)
    proc = CloudProcess(["dashboard", "--config", str(config)], tmp / "dashboard.log")
    try:
        wait_until_serving(port, proc)
        yield Dashboard(f"http://127.0.0.1:{port}", tmp / "cloud.db", data, proc)
    finally:
        assert proc.stop(timeout=20) == 0, proc.log()[-3000:]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def context(browser, dashboard):
    ctx = browser.new_context(base_url=dashboard.url, viewport={"width": 1280, "height": 900},
                              timezone_id="Europe/Berlin")
    yield ctx
    ctx.close()


def log_in(context, name: str, password: str | None = None):
    page = context.new_page()
    page.goto("/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password or PASSWORDS[name])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "/login" not in page.url, page.content()[:2000]
    return page


def sqlite_rows(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_every_page_and_api_needs_a_login(context):
    for path in ("/", "/live", "/gateways", "/gateways/gw-ok", "/overview/tables", "/gateways/table"):
        response = context.request.get(path, max_redirects=0)
        assert response.status in (303, 401), path
        if response.status == 303:
            assert response.headers["location"].startswith("/login"), path
    for path in ("/api/matches", "/api/overview", "/api/gateways", "/api/gateways/gw-ok/history", "/api/live",
                 "/api/live/stream", "/export/matches.csv", "/export/gateways/gw-ok/history.csv"):
        response = context.request.get(path, max_redirects=0)
        assert response.status == 401, path
        assert "gw-ok" not in response.text() and "fire" not in response.text()
    post = context.request.post("/gateways/gw-ok/push", multipart={"format": "trig"}, max_redirects=0)
    assert post.status == 401
    # A browser is sent to the login page and, after logging in, back where it wanted to go.
    page = context.new_page()
    page.goto("/gateways")
    assert page.url.endswith("/login?next=/gateways")
    page.fill("input[name=username]", "victor")
    page.fill("input[name=password]", PASSWORDS["victor"])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/gateways$"))
    cookie = next(c for c in context.cookies() if c["name"] == "edgewave_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and not cookie["secure"]


def test_overview_chart_shows_the_counts_in_sqlite(context, dashboard):
    page = log_in(context, "alice")
    page.goto("/gateways")   # away from the overview the login landed on (its chart fetch is done)
    for range_name in ("24h", "7d"):
        with page.expect_response(lambda r: "/api/matches" in r.url and f"range={range_name}" in r.url) as info:
            page.goto(f"/?range={range_name}")
        chart = info.value.json()
        page.wait_for_selector("#matches-chart[data-drawn=chart] canvas")
        start, end, bucket = chart["start_ms"], chart["end_ms"], chart["bucket_ms"]
        # The chart's buckets, summed from the minute rows in SQLite independently of the dashboard.
        expected: dict[str, list[int]] = {}
        for pattern, minute, count in sqlite_rows(dashboard.db, "SELECT pattern, minute_ms, count FROM "
                                                  "matches_per_minute WHERE minute_ms >= ? AND minute_ms < ?",
                                                  (start, end)):
            expected.setdefault(pattern, [0] * ((end - start) // bucket))[(minute - start) // bucket] += count
        assert chart["series"] == dict(sorted(expected.items())), range_name
        assert len(chart["x"]) == (end - start) // bucket <= 1500
        assert chart["x"][0] * 1000 == start and chart["x"][1] * 1000 - start == bucket
        # What the page drew: every point, and the totals in the table agree.
        drawn = page.locator("#matches-chart")
        assert int(drawn.get_attribute("data-points")) == len(chart["x"]) * len(expected)
        assert drawn.get_attribute("data-patterns") == ",".join(sorted(expected))
        totals = {p: sum(v) for p, v in expected.items()}
        table = {row.locator("td").nth(0).inner_text(): int(row.locator("td").nth(1).inner_text().replace(",", ""))
                 for row in page.locator("#patterns-table tbody tr").all()}
        assert {p: n for p, n in table.items() if n} == totals
        assert page.locator("#total-matches").inner_text().replace(",", "") == str(sum(totals.values()))
    # The week: 10-minute buckets; the canvas has pixels drawn.
    assert chart["bucket_ms"] == 600_000
    assert page.evaluate("""() => { const c = document.querySelector('#matches-chart canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""") > 1000
    # Delay percentiles and the uplink table, as the aggregates and status counters say.
    delays = page.locator("#delays-table tbody tr").first.inner_text()
    assert "match" in delays and "200" in delays and "2,210 ms" in delays
    uplink = page.locator("#uplink-table tbody tr", has_text="gw-ok").inner_text()
    assert "976.6 KiB" in uplink and "(96 %)" in uplink
    page.set_viewport_size({"width": 1280, "height": 1400})
    page.goto("/?range=24h")
    page.wait_for_selector("#matches-chart[data-drawn=chart] canvas")
    save_screenshot(page, "dashboard-overview.png")


def test_overview_csv_export_is_in_the_viewers_zone(context, dashboard):
    page = log_in(context, "victor")
    for _ in range(3):
        # "the last hour" moves with the clock: the page and the file are compared when both
        # were read within one minute (the known data has a bucket every minute)
        minute = time.time() // 60
        page.goto("/?range=1h")
        href = page.locator("a.csv").first.get_attribute("href")
        response = context.request.get(href)
        if time.time() // 60 == minute:
            break
    assert "tz=Europe%2FBerlin" in href
    assert response.status == 200 and response.headers["content-type"].startswith("text/csv")
    lines = response.text().splitlines()
    assert lines[0].startswith("bucket_start,bucket_minutes,")
    assert re.search(r"\+0[12]:00,1,", lines[1]), lines[1]   # Berlin: +01:00 or +02:00
    fire = lines[0].split(",").index("fire")
    assert sum(int(line.split(",")[fire]) for line in lines[1:]) == \
        int(page.locator("#patterns-table tbody tr", has_text="fire").locator("td").nth(1).inner_text())


def test_a_custom_range_is_taken_in_the_viewers_local_time(context, dashboard):
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    end = datetime.now(berlin).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=3)
    page = log_in(context, "victor")
    page.goto("/gateways")
    page.goto("/?range=24h")
    page.wait_for_selector("#matches-chart[data-drawn=chart] canvas")
    page.fill("input[name=from_local]", start.strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=to_local]", end.strftime("%Y-%m-%dT%H:%M"))
    with page.expect_response(lambda r: "/api/matches" in r.url and "start=" in r.url) as info:
        page.click("#custom-range button[type=submit]")
    chart = info.value.json()
    assert (chart["start_ms"], chart["end_ms"], chart["bucket_ms"]) == (int(start.timestamp() * 1000),
                                                                         int(end.timestamp() * 1000), 60_000)
    expected = dict(sqlite_rows(dashboard.db, "SELECT pattern, SUM(count) FROM matches_per_minute WHERE minute_ms >= ? "
                                "AND minute_ms < ? GROUP BY pattern", (chart["start_ms"], chart["end_ms"])))
    assert chart["totals"] == expected
    assert page.locator(".range-text").inner_text().startswith(start.strftime("%Y-%m-%d %H:%M:%S"))


def test_offline_and_lagging_gateways_stand_out_and_come_first(context, dashboard):
    page = log_in(context, "victor")
    page.goto("/gateways")
    assert page.locator("footer").inner_text() == "Times in Europe/Berlin."   # the browser's zone, not the server's
    rows = page.locator("#gateways-table tbody tr")
    order = [(r.get_attribute("data-gateway"), r.get_attribute("data-health")) for r in rows.all()]
    assert order == [("gw-silent", "offline"), ("gw-will", "offline"), ("gw-lag", "lagging"), ("gw-ok", "online"),
                     ("gw-zeta", "online")]
    assert dict(order) == dashboard.data.expected_health
    # ages count on from when the data was written: a minute more on a loaded machine is right
    assert re.search(r"no status for 2[01] min", rows.nth(0).inner_text())
    assert "Last Will" in rows.nth(1).inner_text()
    lag = rows.nth(2).inner_text()
    assert "4,200" in lag and "17" in lag and re.search(r"\b1[56] min\b", lag), lag
    # They stand out: a coloured row, not just a word.
    assert rows.nth(0).evaluate("r => getComputedStyle(r).backgroundColor") != \
        rows.nth(3).evaluate("r => getComputedStyle(r).backgroundColor")
    save_screenshot(page, "dashboard-gateways.png")
    # A gateway's page shows its status history, newest first.
    page.click("text=gw-ok")
    page.wait_for_url(re.compile(r"/gateways/gw-ok$"))
    history = page.locator("#history-table tbody tr")
    assert history.count() == 4
    assert "5,300" in history.nth(0).inner_text() and "5,000" in history.nth(3).inner_text()
    assert page.locator("#gateway-health").inner_text() == "online"


def test_pages_fit_a_phone_screen(browser, dashboard, instances):
    ctx = browser.new_context(base_url=dashboard.url, viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = log_in(ctx, "victor")
        for path in ("/", "/live", "/alarms", "/gateways", "/gateways/gw-lag", "/queries", "/queries/co2-per-room"):
            page.goto(path)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), path
        page.goto("/")
        page.wait_for_selector("#matches-chart[data-drawn=chart] canvas")
    finally:
        ctx.close()


def test_a_viewer_may_not_push_and_every_form_needs_its_csrf_token(context, browser, dashboard):
    page = log_in(context, "victor")
    page.goto("/gateways/gw-ok")
    assert page.locator("form.push").count() == 0   # no push form for a viewer
    token = page.locator("body").get_attribute("data-csrf")
    document = {"name": "gw.trig", "mimeType": "application/trig", "buffer": b"not a config document"}
    refused = context.request.post("/gateways/gw-ok/push", max_redirects=0,
                                   multipart={"csrf_token": token, "format": "trig", "document": document})
    assert refused.status == 403 and "operator" in refused.text()
    assert sqlite_rows(dashboard.db, "SELECT COUNT(*) FROM config_pushes") == [(0,)]

    operator = browser.new_context(base_url=dashboard.url)
    try:
        page = log_in(operator, "alice")
        page.goto("/gateways/gw-ok")
        token = page.locator("body").get_attribute("data-csrf")
        no_token = operator.request.post("/gateways/gw-ok/push", max_redirects=0,
                                         multipart={"format": "trig", "document": document})
        assert no_token.status == 403 and "security token" in no_token.text()
        wrong_token = operator.request.post("/gateways/gw-ok/push", max_redirects=0,
                                            multipart={"csrf_token": "x" * 43, "format": "trig", "document": document})
        assert wrong_token.status == 403
        # With the token the operator gets through to validation, which refuses this document before publishing.
        page.set_input_files("form.push input[type=file]", files=[document])
        page.click("form.push button[type=submit]")
        page.wait_for_load_state()
        assert "error" in page.locator("form.push .error").get_attribute("class")
        assert page.locator("form.push .error").inner_text()
        assert sqlite_rows(dashboard.db, "SELECT COUNT(*) FROM config_pushes") == [(0,)]
        # Logging out needs the token too.
        assert operator.request.post("/logout", max_redirects=0).status == 403
        assert operator.request.post("/logout", form={"csrf_token": token}, max_redirects=0).status == 303
        assert operator.request.get("/api/gateways", max_redirects=0).status == 401
    finally:
        operator.close()


def test_the_login_form_needs_its_csrf_token(browser, dashboard):
    ctx = browser.new_context(base_url=dashboard.url)
    try:
        response = ctx.request.post("/login", form={"username": "alice", "password": PASSWORDS["alice"]},
                                    max_redirects=0)
        assert response.status == 403
        assert ctx.request.get("/api/gateways", max_redirects=0).status == 401
        # A token from another session does not do either.
        other = browser.new_context(base_url=dashboard.url)
        page = other.new_page()
        page.goto("/login")
        foreign = page.locator("input[name=csrf_token]").get_attribute("value")
        other.close()
        response = ctx.request.post("/login", form={"username": "alice", "password": PASSWORDS["alice"],
                                                    "csrf_token": foreign}, max_redirects=0)
        assert response.status == 403
    finally:
        ctx.close()


def test_a_cookie_copied_before_logout_is_refused_after_it(browser, dashboard):
    """Sessions live server-side: logging out ends the session, not just the browser's copy of the cookie."""
    victim = browser.new_context(base_url=dashboard.url)
    thief = browser.new_context(base_url=dashboard.url)
    try:
        page = log_in(victim, "victor")
        stolen = [c for c in victim.cookies() if c["name"] == "edgewave_session"]
        assert len(stolen) == 1 and "victor" not in stolen[0]["value"]   # the cookie holds an id, not the user
        thief.add_cookies(stolen)
        assert thief.request.get("/api/gateways", max_redirects=0).status == 200
        sessions = dashboard.db.parent / "dashboard.db"
        open_before = sqlite_rows(sessions, "SELECT COUNT(*) FROM sessions WHERE user = 'victor'")[0][0]
        page.click("form.logout button[type=submit]")
        page.wait_for_url(re.compile(r"/login$"))
        assert thief.request.get("/api/gateways", max_redirects=0).status == 401
        refused = thief.request.get("/gateways", max_redirects=0)
        assert refused.status == 303 and refused.headers["location"].startswith("/login")
        assert victim.request.get("/api/gateways", max_redirects=0).status == 401
        assert sqlite_rows(sessions, "SELECT COUNT(*) FROM sessions WHERE user = 'victor'")[0][0] == open_before - 1
    finally:
        victim.close()
        thief.close()


def test_live_matches_arrive_within_seconds_with_their_evidence(context, dashboard):
    """Events ingest appends to the live feed (its own code path) reach an open page over server-sent events."""
    now = int(time.time() * 1000)
    smoke = (("<http://example.org/b#smoke3>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", '"0.8"'), now - 2000)
    fire = match_event("gw-ok", "fire", {"room": "<http://example.org/b#room3>"}, now - 5000, now - 1000, [smoke],
                       now - 900)
    before = match_event("gw-lag", "intrusion", {"door": "<http://example.org/b#frontDoor>"}, now - 9000, now - 8000,
                         [(("<http://example.org/b#door1>", "<http://example.org/b#state>", '"open"'), now - 8500)],
                         now - 7900)
    writer = LiveFeedWriter(dashboard.db.parent / "live.db", max_rows=1000)
    try:
        writer.append([landing_record(before, now - 7000)])     # already there when the page opens: backlog
        page = log_in(context, "victor")
        page.goto("/live")
        page.wait_for_selector("#live-state[data-state=live]")
        page.wait_for_selector(f"#live-table tr[data-id='{before['id']}']")
        started = time.monotonic()
        writer.append([landing_record(fire, now)])
        row = page.wait_for_selector(f"#live-table tr[data-id='{fire['id']}']", timeout=5000)
        arrived_s = time.monotonic() - started
        signif = significant_event("gw-ok", "<http://example.org/b#temp1>", "<http://www.w3.org/ns/sosa/Temperature>",
                                   "23.5", now, [("<http://example.org/b#obs9>", "<http://www.w3.org/ns/sosa/hasSimpleResult>",
                                                  '"23.5"')], now)
        writer.append([landing_record(signif, now + 50)])
        page.wait_for_selector(f"#live-table tr[data-id='{signif['id']}']", timeout=5000)
    finally:
        writer.close()
    assert arrived_s < 3.0
    rows = page.locator("#live-table tbody tr")
    assert [r.get_attribute("data-id") for r in rows.all()] == [signif["id"], fire["id"], before["id"]]
    text = row.inner_text()
    assert "gw-ok" in text and "fire" in text and "room: room3" in text       # the term as read ...
    assert row.query_selector("dl.values .term").get_attribute("title") == "<http://example.org/b#room3>"  # ... exact
    row.query_selector("details.evidence > summary").click()
    row.query_selector(".raw-toggle").click()
    assert '<http://example.org/b#smoke3> <http://www.w3.org/ns/sosa/hasSimpleResult> "0.8" .' in row.inner_text()
    assert "23.5" in rows.nth(0).inner_text()
    # A filter by pattern shows only that pattern's events.
    page.goto("/live?pattern=intrusion")
    page.wait_for_selector(f"#live-table tr[data-id='{before['id']}']")
    assert page.locator("#live-table tbody tr").count() == 1


def test_only_an_operator_acknowledges_or_clears_an_alarm_and_only_with_the_token(context, browser, dashboard):
    """The live test's matches opened alarms (the dashboard's follower); a viewer sees them and changes nothing."""
    page = log_in(context, "victor")
    page.goto("/alarms")
    row = page.locator("#alarms-table tbody tr[data-state=active]", has_text="fire").first
    alarm_id = row.get_attribute("data-alarm-id")
    page.goto(f"/alarms/{alarm_id}")
    assert page.locator("form.ack").count() == 0 and page.locator("form.clear").count() == 0
    token = page.locator("body").get_attribute("data-csrf")
    refused = context.request.post(f"/alarms/{alarm_id}/ack", form={"csrf_token": token, "comment": "mine"},
                                   max_redirects=0)
    assert refused.status == 403 and "operator" in refused.text()
    operator = browser.new_context(base_url=dashboard.url)
    try:
        page = log_in(operator, "alice")
        page.goto(f"/alarms/{alarm_id}")
        assert operator.request.post(f"/alarms/{alarm_id}/clear", max_redirects=0).status == 403   # no token
        empty = operator.request.post(f"/alarms/{alarm_id}/ack", max_redirects=0, form={
            "csrf_token": page.locator("body").get_attribute("data-csrf"), "comment": " "})
        assert empty.status == 409 and "comment is empty" in empty.text()
        assert page.locator("#alarm-state").inner_text() == "active"
        page.reload()
        assert page.locator("#alarm-state").inner_text() == "active"
    finally:
        operator.close()
    assert "dashboard refused user=victor role=viewer needs=operator path=/alarms/" in dashboard.proc.log()


XSD = "http://www.w3.org/2001/XMLSchema#"
EVIL_QUERY = "co2</h1><script>alert('q')</script>/x"
EVIL_GATEWAY = "gw-<b>evil</b>"


def co2_instances(gateway: str, rooms: int, minutes: int, now_ms: int) -> list[dict]:
    """co2-per-room as a gateway reports it: a row per room and minute (the newest minute without room 1's
    average: unbound), the average a decimal and the readings an integer."""
    events = []
    for m in range(minutes):
        end = (now_ms // 60_000 - m) * 60_000
        rows = [{"room": f"<http://example.org/{gateway}/room{r}>",
                 "average": f'"{400 + 10 * r + m}.5"^^<{XSD}decimal>', "readings": f'"{6 + r}"^^<{XSD}integer>'}
                for r in range(rooms)]
        if m == 0:
            del rows[1]["average"]
        events += instance_events(gateway, "co2-per-room", end - 60_000, end, "RSTREAM", rows, end + 300)
    return events


def store_instances(db: Path, batch_id: int, events: list[dict]) -> None:
    """Instance events into SQLite as the Spark job stores them (its row per event, its part)."""
    from edgewave.cloud.aggregates import BatchAggregates, InstanceResult, apply_batch, instance_part
    from edgewave.cloud.database import open_database

    results = [InstanceResult(e["id"], e["gateway"], e["pattern"], e["windowStart"], e["windowEnd"], e["operator"],
                              json.dumps(rows_dicts(e)), e["emittedAt"] + 100,
                              instance_part(e["id"], e["gateway"], e["pattern"], e["windowStart"], e["windowEnd"],
                                            e["operator"])) for e in events]
    conn = open_database(db)
    try:
        assert apply_batch(conn, "test-query", batch_id, BatchAggregates(rows=len(results), instances=results))
    finally:
        conn.conn.close()


@pytest.fixture(scope="module")
def instances(dashboard) -> dict[str, list[dict]]:
    """Per-instance results of three queries, stored through apply_batch: co2-per-room from two gateways, an
    instance of 700 rows in two parts (stored second part first), and a query whose name, gateway and values
    are made to break out of the page."""
    now = int(time.time() * 1000)
    ok, lag = co2_instances("gw-ok", 3, 30, now), co2_instances("gw-lag", 2, 10, now)
    end = now // 60_000 * 60_000
    seen = instance_events("gw-ok", "sensors-seen", end - 10_000, end, "ISTREAM",
                           [{"sensor": f"<http://example.org/gw-ok/s{i:03d}>"} for i in range(700)], end)
    evil = instance_events(EVIL_GATEWAY, EVIL_QUERY, end - 60_000, end, "RSTREAM", [
        {"who": '"<img src=x onerror=alert(1)>"', "v": f'"-5"^^<{XSD}integer>', "f": '"=HYPERLINK(\\"http://x\\")"'},
        {"who": "<http://example.org/a?b=<script>alert(2)</script>>", "v": f'"7.25"^^<{XSD}double>',
         "f": '"+1"'}], end)
    store_instances(dashboard.db, 1, ok + lag + seen[1:])
    store_instances(dashboard.db, 2, seen[:1] + evil)
    return {"gw-ok": ok, "gw-lag": lag, "seen": seen, "evil": evil}


def berlin(ms: int) -> str:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(ms / 1000, ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d %H:%M:%S")


def table_rows(page, selector: str = "#rows-table tbody tr") -> list[list[str]]:
    return page.evaluate("""s => Array.from(document.querySelectorAll(s)).map(
        tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent))""", selector)


def test_a_per_instance_querys_rows_and_charts_from_the_navigation(context, dashboard, instances):
    page = log_in(context, "victor")
    page.click("header nav >> text=Queries")
    page.wait_for_url(re.compile(r"/queries$"))
    listed = {(r.get_attribute("data-query"), r.get_attribute("data-gateway")): r.inner_text()
              for r in page.locator("#queries-table tbody tr").all()}
    assert set(listed) == {("co2-per-room", "gw-lag"), ("co2-per-room", "gw-ok"), ("sensors-seen", "gw-ok"),
                           (EVIL_QUERY, EVIL_GATEWAY)}
    assert "\t30\t" in listed[("co2-per-room", "gw-ok")] and "?room ?average ?readings" in listed[
        ("co2-per-room", "gw-ok")]
    # One gateway's page: the rows of its newest instance first: gateway, the instance's bounds as times, operator,
    # then the variables (an IRI as N-Triples, a number as its lexical form, an unbound variable empty).
    page.locator("#queries-table tr[data-gateway='gw-ok'][data-query='co2-per-room'] td").nth(1).locator("a").click()
    page.wait_for_url(re.compile(r"/queries/co2-per-room\?gateway=gw-ok$"))
    page.wait_for_selector("#instance-charts[data-drawn=chart] canvas")
    assert page.locator("#rows-table thead").inner_text().split() == ["Gateway", "Start", "End", "Operator", "?room",
                                                                      "?average", "?readings"]
    expected = [["gw-ok", berlin(e["windowStart"]), berlin(e["windowEnd"]), "RSTREAM", row["room"],
                 row["average"][1:row["average"].index('"', 1)] if "average" in row else "", row["readings"][1:2]]
                for e in sorted(instances["gw-ok"], key=lambda e: -e["windowEnd"]) for row in rows_dicts(e)]
    assert table_rows(page) == expected
    assert page.locator("#rows-table tbody tr.instance-first").count() == 30
    # The same rows in SQLite: every instance stored once.
    assert sqlite_rows(dashboard.db, "SELECT COUNT(*) FROM instance_results WHERE query = 'co2-per-room' "
                       "AND gateway = 'gw-ok'") == [(30,)]
    # The charts: one per numeric variable, a line per room, the values the rows hold.
    charts = page.locator("#instance-charts figure.instance-chart")
    assert [c.get_attribute("data-variable") for c in charts.all()] == ["average", "readings"]
    assert charts.nth(0).get_attribute("data-series") == "3"
    assert int(charts.nth(0).get_attribute("data-points")) == 3 * 30 - 1     # room1's newest average is unbound
    with page.expect_response(lambda r: "/api/queries/co2-per-room" in r.url) as info:
        page.reload()
    chart = info.value.json()
    page.wait_for_selector("#instance-charts[data-drawn=chart] canvas")
    ends = sorted(e["windowEnd"] for e in instances["gw-ok"])
    assert chart["x"] == [end / 1000 for end in ends] and chart["group_by"] == ["room"]
    average = chart["charts"][0]
    assert [s["label"] for s in average["series"]] == ["room0", "room1", "room2"]
    for r, series in enumerate(average["series"]):
        minutes_ago = [len(ends) - 1 - i for i in range(len(ends))]
        assert series["values"] == [None if (r == 1 and m == 0) else 400 + 10 * r + m + 0.5 for m in minutes_ago]
    legend = page.locator("#instance-charts figure.instance-chart").nth(0).locator(".u-legend").inner_text()
    assert "room0" in legend and "room2" in legend
    assert page.evaluate("""() => { const c = document.querySelector('#instance-charts canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""") > 1000
    page.goto("/queries/co2-per-room?gateway=gw-lag")      # ten instances: a short page for the docs
    page.wait_for_selector("#instance-charts[data-drawn=chart] canvas")
    save_screenshot(page, "dashboard-query.png")
    # Every gateway: a line per gateway and room, both gateways' rows.
    page.select_option("#gateway-choice", "")
    page.click(".toolbar form:not(#custom-range) button[type=submit]")
    page.wait_for_selector("#instance-charts[data-drawn=chart] canvas")
    assert page.locator("#instance-charts figure.instance-chart").nth(0).get_attribute("data-series") == "5"
    assert {r[0] for r in table_rows(page)} == {"gw-ok", "gw-lag"}
    assert page.locator("#rows-table tbody tr").count() == 30 * 3 + 10 * 2


def test_an_instance_in_two_parts_reads_in_its_rows_order(context, instances):
    page = log_in(context, "victor")
    page.goto("/queries/sensors-seen")
    rows = table_rows(page)
    assert [r[4] for r in rows] == [f"<http://example.org/gw-ok/s{i:03d}>" for i in range(700)]
    page.wait_for_selector("#instance-charts[data-drawn=empty]")
    assert "No numeric variable" in page.locator("#instance-charts").inner_text()


def test_a_querys_csv_has_a_line_per_row_in_the_viewers_zone(context, dashboard, instances):
    page = log_in(context, "victor")
    page.goto("/queries/co2-per-room?range=1h")
    href = page.locator("#query-csv").get_attribute("href")
    assert "tz=Europe%2FBerlin" in href and "range=1h" in href
    response = context.request.get(href)
    assert response.status == 200 and response.headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(response.text())))
    assert lines[0] == ["gateway", "window_start", "window_end", "operator", "room", "average", "readings"]
    events = sorted(instances["gw-ok"] + instances["gw-lag"], key=lambda e: (-e["windowEnd"], e["gateway"]))
    expected = [[e["gateway"], iso(e["windowStart"]), iso(e["windowEnd"]), "RSTREAM", row["room"],
                 row.get("average", ""), row["readings"]] for e in events for row in rows_dicts(e)]
    assert lines[1][6].endswith(f'"^^<{XSD}integer>')     # the terms as the gateway sent them
    assert lines[1:] == expected
    # One gateway, and the hostile query: every value an N-Triples term, so none reads as a formula.
    one = context.request.get("/export/queries/co2-per-room.csv?gateway=gw-lag&tz=UTC")
    assert {line.split(",")[0] for line in one.text().splitlines()[1:]} == {"gw-lag"}
    evil = context.request.get(f"/export/queries/{quote(EVIL_QUERY, safe='')}.csv?tz=UTC")
    disposition = evil.headers["content-disposition"]
    assert evil.status == 200 and disposition.startswith('attachment; filename="edgewave-co2_')
    assert not set("<>'/") & set(disposition.split("filename=")[1].strip('"'))
    header, first, second = list(csv.reader(io.StringIO(evil.text())))
    assert header[4:] == ["who", "v", "f"]
    assert first[0] == EVIL_GATEWAY and first[4:] == ['"<img src=x onerror=alert(1)>"', f'"-5"^^<{XSD}integer>',
                                                      '"=HYPERLINK(\\"http://x\\")"']
    assert second[5:] == [f'"7.25"^^<{XSD}double>', '"+1"']
    # Without a session: 401, nothing of the rows.
    anonymous = context.browser.new_context(base_url=dashboard.url)
    try:
        for path in ("/export/queries/co2-per-room.csv", "/api/queries/co2-per-room"):
            refused = anonymous.request.get(path, max_redirects=0)
            assert refused.status == 401 and "room" not in refused.text(), path
        for path in ("/queries", "/queries/co2-per-room"):
            refused = anonymous.request.get(path, max_redirects=0)
            assert refused.status == 303 and refused.headers["location"].startswith("/login"), path
    finally:
        anonymous.close()


def iso(ms: int) -> str:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(ms / 1000, ZoneInfo("Europe/Berlin")).isoformat(timespec="seconds")


def test_what_a_gateway_names_and_sends_is_text_on_the_page(context, instances):
    page = log_in(context, "victor")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto("/queries")
    row = page.locator("#queries-table tbody tr", has_text="gw-<b>evil</b>")
    assert EVIL_QUERY in row.inner_text()
    row.locator("a").first.click()
    page.wait_for_selector("#instance-charts[data-drawn=chart] canvas")
    assert page.locator("#query-name").inner_text() == EVIL_QUERY
    assert page.evaluate("document.title").startswith(EVIL_QUERY)
    cells = table_rows(page)
    assert [c[4:] for c in cells] == [['"<img src=x onerror=alert(1)>"', "-5", '"=HYPERLINK(\\"http://x\\")"'],
                                      ["<http://example.org/a?b=<script>alert(2)</script>>", "7.25", '"+1"']]
    assert page.locator("main img, main script, main b").count() == 0
    legend = page.locator("#instance-charts .u-legend").first.inner_text()
    assert "<img src=x onerror=alert(1)>" in legend
    assert page.locator("#instance-charts img, #instance-charts script").count() == 0
    assert dialogs == []
    # A query or gateway nobody reported: 404, the name as text.
    missing = page.goto("/queries/%3Cscript%3Enope")
    assert missing.status == 404 and page.locator("main script").count() == 0
    assert page.goto("/queries/co2-per-room?gateway=gw-zeta").status == 404


def test_failed_logins_are_rate_limited_per_user_and_per_address(browser, dashboard):
    """Last in the module: it uses up 127.0.0.1's failures (limits in the fixture: 3 per user, 6 per address)."""
    ctx = browser.new_context(base_url=dashboard.url)
    try:
        page = ctx.new_page()

        def attempt(name: str, password: str) -> int:
            page.goto("/login")
            page.fill("input[name=username]", name)
            page.fill("input[name=password]", password)
            with page.expect_response(lambda r: r.url.endswith("/login") and r.request.method == "POST") as info:
                page.click("button[type=submit]")
            return info.value.status

        assert [attempt("alice", "wrong password") for _ in range(3)] == [401, 401, 401]
        # The right password does not help now: the user name is locked for the window.
        assert attempt("alice", PASSWORDS["alice"]) == 429
        assert "Too many failed logins" in page.locator(".error").inner_text()
        # Other names from the same address: three more failures reach the address's limit.
        assert [attempt(f"guess{i}", "wrong") for i in range(3)] == [401, 401, 401]
        assert attempt("victor", PASSWORDS["victor"]) == 429
    finally:
        ctx.close()
    assert "dashboard login refused reason=rate_limited user=alice" in dashboard.proc.log()
