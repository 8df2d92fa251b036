"""`make demo` (scripts/demo.py): the whole secured topology on this machine sees exactly the
simulator's ground truth (the fires, the intrusion and the silent sensor in alarm), prints what
README.md shows, the intrusion and silent-sensor alerts among it as they land, and its agent,
with the shipped settings, sends the cloud at most a tenth of the bytes its sensors sent it.
While the demo serves its dashboard, an operator logged in with the printed password reads
the fire in a real browser as its alert text, with the room and the temperature as people
say them (the screenshots in docs/images are taken here, with EDGEWAVE_UPDATE_SCREENSHOTS=1)."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dashboard_data import CHROMIUM, save_screenshot

import playwright.sync_api as playwright_sync  # noqa: E402  (a dev dependency)

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_demo_sees_exactly_the_ground_truth(tmp_path: Path) -> None:
    demo = subprocess.Popen([sys.executable, str(REPO / "scripts" / "demo.py"), "--work", str(tmp_path / "demo"),
                             "--dashboard-port", str(_free_port())], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True)   # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 780
        while not any("serving the dashboard" in line for line in lines):
            assert demo.poll() is None and time.monotonic() < deadline, "".join(lines)[-6000:]
            time.sleep(1)
        url = re.search(r"^dashboard: (http://127\.0\.0\.1:\d+/)", "".join(lines), re.M)
        assert url, "".join(lines)
        the_operator_reads_the_fire(url[1], (tmp_path / "demo" / "dashboard.password").read_text().strip())
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=120)
        reader.join(timeout=10)
    out = "".join(lines)
    assert code == 0, out[-6000:]
    assert "the cloud saw exactly the ground truth" in out
    assert re.search(r"^\s+fire\s+cloud=\s*5\s+truth=\s*5$", out, re.M), out
    # the ordered intrusion (door, then motion) and the silent sensor in alarm, in the config document
    assert re.search(r"^\s+intrusion\s+cloud=\s*1\s+truth=\s*1$", out, re.M), out
    assert re.search(r"^\s+silent-sensor-in-alarm\s+cloud=\s*1\s+truth=\s*1$", out, re.M), out
    # ... printed in words as they land, each once
    intrusion = re.findall(r"^\[demo [\d:]+\] ALERT intrusion at gw1 \(armed\): door room1-door opened at "
                           r"(\d\d:\d\d:\d\d), then motion sensor room6-motion saw movement at (\d\d:\d\d:\d\d)$",
                           out, re.M)
    assert len(intrusion) == 1, out
    door, motion = (sum(int(part) * unit for part, unit in zip(hms.split(":"), (3600, 60, 1))) for hms in intrusion[0])
    assert 0 < (motion - door) % 86400 < 60, out          # the door first, then the motion, within the window
    silent = re.findall(r"^\[demo [\d:]+\] ALERT silent sensor at gw1: CO2 sensor room5-co2 \(room5\) reported "
                        r"2480 ppm, above the 2000 ppm alarm level, at \d\d:\d\d:\d\d and has sent nothing in "
                        r"the 10 s since", out, re.M)
    assert len(silent) == 1, out
    rooms = dict(re.findall(r"^\s+(<http://example\.org/gw1/room\d>)\s+(\d+)$", out, re.M))
    assert rooms == {"<http://example.org/gw1/room3>": "4", "<http://example.org/gw1/room2>": "1"}, out
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/", out, re.M), out
    # the per-instance query: the CO2 of the rooms whose sensors reported in a minute that ended (the
    # first may be cut by the scenario's start; the minute of its end is reported after the demo's end)
    co2 = re.findall(r"^\s+\d\d:\d\d-\d\d:\d\d\s+(room\d)\s+average ([\d.]+) ppm \(lowest ([\d.]+), "
                     r"highest ([\d.]+), (\d) readings\)$", out, re.M)
    assert co2 and {room for room, *_ in co2} <= {f"room{n}" for n in range(1, 8)}, out
    assert all(float(low) <= float(average) <= float(high) for _, average, low, high, _ in co2), out
    # with the shipped agent settings, the uplink carries at most a tenth of the sensor bytes
    sent = re.search(r"^uplink: (\d+) bytes sent for (\d+) sensor bytes", out, re.M)
    assert sent and 0 < int(sent[1]) <= 0.10 * int(sent[2]), out


def the_operator_reads_the_fire(url: str, password: str) -> None:
    """The live page's range view and the match's evidence, as an operator reads them after the demo."""
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_context(base_url=url, viewport={"width": 1280, "height": 900}).new_page()
            page.goto("/login")
            page.fill("input[name=username]", "demo")
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/$"))
            page.goto("/live?range=1h&pattern=fire")
            messages = page.locator("#range-table tbody td.event .message").all_inner_texts()
            # the room by its name, the temperature as a number with its unit, the threshold from the static data
            assert "Fire in room3: 63.5 °C, threshold 57 °C" in messages, messages
            row = page.locator("#range-table tbody tr", has_text="Fire in room3: 63.5 °C")
            text = row.first.inner_text()
            assert "http://" not in text and "XMLSchema" not in text and "^^" not in text, text
            save_screenshot(page, "dashboard-live.png")
            # on a phone the message is read without scrolling sideways (the gateway column folds away)
            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            box = page.locator("#range-table tbody td.event .message").first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
            page.set_viewport_size({"width": 1280, "height": 900})
            # its evidence: the triples as read, and exactly as the gateway sent them one click away
            row.first.locator("a", has_text="evidence").click()
            page.wait_for_url(re.compile(r"/matches/"))
            assert "Fire in room3: 63.5 °C" in page.locator("#match-message").inner_text()
            shown = page.locator(".evidence-page ol.triples li .shown-statement").all_inner_texts()
            assert any("63.5 °C" in t or "63.5" in t for t in shown), shown
            page.locator(".evidence-page .raw-toggle").click()
            exact = page.locator(".evidence-page ol.triples li code.raw-statement").all_inner_texts()
            assert any(t.endswith('"63.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .') for t in exact), exact
            page.goto("/alarms")
            fire = page.locator("#alarms-table tbody tr", has_text="Fire in room3: 71 °C, threshold 57 °C")
            fire.wait_for(timeout=15_000)                  # its newest match: the second hot reading
            assert fire.get_attribute("data-count") == "4"
            save_screenshot(page, "dashboard-alarms.png")
            # on a phone too: the alarm's message and key without scrolling sideways
            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            fire.wait_for(timeout=15_000)
            for part in (".message", "td.value"):
                box = fire.locator(part).first.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (part, box)
            assert page.evaluate("""() => { const t = document.querySelector('#alarms-table');
                                            return t.scrollWidth <= t.parentElement.clientWidth + 1; }""")
        finally:
            browser.close()
