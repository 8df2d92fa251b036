"""The gateway page shows the device payloads its mappings refused, per mapping and reason, as its status said.

A cloud database filled through the cloud's own code (dashboard_data.fill_known_database) and a status of a
gateway whose agent refused device payloads (``payload_rejected.<mapping>.<reason>`` counters, as
agent/intake.py counts them), recorded as ingest records it; `edgewave-cloud dashboard` serves it, and the
page is read in Debian's chromium."""
from __future__ import annotations

import time
from typing import Iterator

import pytest

from cloud_harness import CloudProcess
from dashboard_data import PASSWORDS, chromium, fill_known_database, free_port, status, wait_until_serving, \
    write_dashboard_config
from edgewave.cloud import registry
from edgewave.cloud.database import open_database, transaction

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REFUSED = {"payload_rejected.zigbee2mqtt.wrong_type": 7, "payload_rejected.zigbee2mqtt.missing_key": 2,
           "payload_rejected.senml.not_finite": 1}


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("device-payloads-page")
    fill_known_database(tmp / "cloud.db")
    now = int(time.time() * 1000)
    with_refusals = status("gw-devices", "online", time_ms=now - 1000, messages_in=500)
    with_refusals["counters"].update({**REFUSED, "payload_rejected": sum(REFUSED.values()), "unmapped_topic": 0})
    db = open_database(tmp / "cloud.db")
    try:
        with transaction(db) as conn:
            registry.record_status(conn, "gw-devices", with_refusals, now - 500)
            registry.record_status(conn, "gw-plain", status("gw-plain", "online", time_ms=now - 1000), now - 500)
    finally:
        db.conn.close()
    port = free_port()
    proc = CloudProcess(["dashboard", "--config", str(write_dashboard_config(tmp, port))], tmp / "dashboard.log")
    try:
        wait_until_serving(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        assert proc.stop(timeout=20) == 0, proc.log()[-3000:]


def test_the_gateway_page_lists_refused_payloads_by_mapping_and_reason(url):
    with chromium() as browser:
        page = browser.new_context(base_url=url).new_page()
        page.goto("/login")
        page.fill("input[name=username]", "victor")
        page.fill("input[name=password]", PASSWORDS["victor"])
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto("/gateways/gw-devices")
        rows = [[cell.strip() for cell in row.locator("td").all_inner_texts()]
                for row in page.locator("#payload-rejections tbody tr").all()]
        assert rows == [["zigbee2mqtt", "wrong type", "7"], ["zigbee2mqtt", "missing key", "2"],
                        ["senml", "not finite", "1"]]
        assert "10" in page.locator("h2", has_text="Device payloads rejected").inner_text()
        page.goto("/gateways/gw-plain")          # a gateway whose status counts none: no such section
        assert page.locator("#payload-rejections").count() == 0
