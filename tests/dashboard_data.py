"""A cloud database with known aggregates and registry rows, written through the cloud's own code
(aggregates.apply_batch, registry.record_status), and a dashboard config to serve it."""
from __future__ import annotations

import inspect
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml
from argon2 import PasswordHasher
from broker_process import free_port  # noqa: F401  (re-exported: the tests import it from here)

from edgewave.cloud import registry
from edgewave.cloud.aggregates import BatchAggregates, apply_batch, delay_bucket, ensure_aggregate_schema
from edgewave.cloud.database import open_database, transaction

REPO = Path(__file__).resolve().parent.parent
MINUTE = 60_000
PASSWORDS = {"alice": "alice-operator-pw", "victor": "victor-viewer-pw"}
ROLES = {"alice": "operator", "victor": "viewer"}
OFFLINE_AFTER_S = 300
LAGGING_AFTER_S = 600
# The test users' passwords are argon2id hashes as the dashboard reads them (it verifies with
# the parameters written in the hash), made at argon2's lowest cost: with the shipped
# parameters (64 MiB, 3 passes, 4 lanes) every hash and every login costs 0.23 s of CPU, and
# the suite writes dashboard configs and logs in some hundreds of times. `edgewave-cloud
# add-user` and its tests keep the shipped parameters (tests/unit/test_dashboard_auth.py,
# tests/integration/test_dashboard_service.py).
_FIXTURE_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@dataclass
class KnownData:
    """What was written, for tests to compare the dashboard against."""

    now_ms: int
    matches: list[tuple[str, str, int, int]] = field(default_factory=list)   # gateway, pattern, minute_ms, count
    expected_health: dict[str, str] = field(default_factory=dict)


def fixture_password_hash(password: str) -> str:
    """An argon2id hash of a test user's password, at argon2's lowest cost (see _FIXTURE_HASHER)."""
    return _FIXTURE_HASHER.hash(password)


def write_dashboard_config(tmp: Path, port: int, database: Path | None = None, **dashboard: Any) -> Path:
    users = {name: {"role": ROLES[name], "password_hash": fixture_password_hash(pw)} for name, pw in PASSWORDS.items()}
    cfg = {
        "database": str(database or tmp / "cloud.db"),
        "landing_zone": str(tmp / "landing"),
        "gateways": {"gw-ok": {"key": "key-of-gw-ok"}},
        "dashboard": {"host": "127.0.0.1", "port": port, "users": users,
                      "secret_key_file": str(tmp / "dashboard-secret"),
                      "offline_after_s": OFFLINE_AFTER_S, "lagging_after_s": LAGGING_AFTER_S, **dashboard},
    }
    path = tmp / "cloud.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def wait_until_serving(port: int, proc: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.running:
            raise AssertionError(f"the dashboard exited ({proc.proc.returncode}):\n{proc.log()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"the dashboard did not answer within {timeout}s:\n{proc.log()[-3000:]}")


def _record_status(conn: Any, gateway: str, status: dict[str, Any], received_ms: int) -> None:
    """registry.record_status, whether it takes the parsed status or the raw payload."""
    if "payload" in inspect.signature(registry.record_status).parameters:
        registry.record_status(conn, gateway, json.dumps(status).encode(), received_ms)
    else:
        registry.record_status(conn, gateway, status, received_ms)


def status(gateway: str, state: str, *, time_ms: int, version: int = 3, bytes_in: int = 0, bytes_forwarded: int = 0,
           depth: int = 0, oldest_age_ms: int | None = None, dropped: int = 0, messages_in: int = 0,
           matches: int = 0) -> dict[str, Any]:
    """An agent's status document (docs/agent.md, "Status")."""
    return {"gateway": gateway, "state": state, "configVersion": version, "time": time_ms,
            "counters": {"messages_in": messages_in, "bytes_in": bytes_in, "matches": matches,
                         "forwarded": matches, "bytes_forwarded": bytes_forwarded, "dropped": dropped},
            "outbox": {"depth": depth, "bytes": depth * 300, "oldestAgeMs": oldest_age_ms, "dropped": dropped,
                       "unwritten": 0}}


def fill_known_database(db_path: Path, now_ms: int | None = None) -> KnownData:
    """Matches over the last week, bindings, significant observations, delays, and five gateways."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    minute_now = now_ms // MINUTE * MINUTE
    data = KnownData(now_ms)
    # Matches: every 3rd minute of the last 2 hours (fire, gw-ok), every 7th minute of the last 2 days
    # (intrusion, two gateways), a burst 3 days ago (patient) and 9 days ago (outside every preset).
    for i in range(0, 120, 3):
        data.matches.append(("gw-ok", "fire", minute_now - i * MINUTE, 1 + i % 4))
    for i in range(0, 2 * 1440, 7):
        data.matches.append(("gw-ok" if i % 2 else "gw-lag", "intrusion", minute_now - i * MINUTE, 2))
    for i in range(30):
        data.matches.append(("gw-silent", "patient", minute_now - 3 * 1440 * MINUTE - i * MINUTE, 5))
    data.matches.append(("gw-ok", "fire", minute_now - 9 * 1440 * MINUTE, 1000))
    delays = []
    for minute in (minute_now - 5 * MINUTE, minute_now - 65 * MINUTE):
        for delay, count in ((120, 50), (340, 40), (2210, 9), (15_400, 1)):
            b = delay_bucket(delay)
            delays.append((minute, "match", b, count, delay * count, delay, delay))
    batch = BatchAggregates(
        rows=len(data.matches),
        matches=data.matches,
        bindings=[("fire", "room", "ex:room3", 40), ("fire", "room", "ex:room2", 25), ("fire", "room", "ex:room1", 2),
                  ("intrusion", "door", "ex:frontDoor", 300), ("intrusion", "door", "ex:backDoor", 110)],
        delays=delays,
        significant=[("gw-ok", "ex:temp1", "sosa:Temperature", minute_now - 10 * MINUTE, 12),
                     ("gw-ok", "ex:temp2", "sosa:Temperature", minute_now - 20 * MINUTE, 8),
                     ("gw-lag", "ex:smoke1", "ex:SmokeDensity", minute_now - 30 * MINUTE, 4)],
    )
    db = open_database(db_path)
    try:
        ensure_aggregate_schema(db)
        registry.ensure_registry_schema(db)
        assert apply_batch(db, "test-query", 0, batch)
        with transaction(db) as conn:
            # gw-ok: healthy, reports every 30 s; its history has four statuses.
            for k, ago in enumerate((90_000, 60_000, 30_000, 5_000)):
                _record_status(conn, "gw-ok", status("gw-ok", "online", time_ms=now_ms - ago, bytes_in=1_000_000,
                                                     bytes_forwarded=40_000 + k, messages_in=5000 + k * 100,
                                                     matches=120 + k), now_ms - ago)
            # gw-will: its broker connection dropped; the Last Will says offline.
            _record_status(conn, "gw-will", status("gw-will", "online", time_ms=now_ms - 60_000, bytes_in=500),
                           now_ms - 60_000)
            _record_status(conn, "gw-will", {"gateway": "gw-will", "state": "offline"}, now_ms - 50_000)
            # gw-silent: says online, but nothing for 20 minutes (its broker went away with its will).
            _record_status(conn, "gw-silent", status("gw-silent", "online", time_ms=now_ms - 20 * MINUTE,
                                                     bytes_in=800, bytes_forwarded=800), now_ms - 20 * MINUTE)
            # gw-lag: online, but its oldest unsent event is 15 minutes old (uplink stalled).
            _record_status(conn, "gw-lag", status("gw-lag", "online", time_ms=now_ms - 10_000, depth=4200,
                                                  oldest_age_ms=15 * MINUTE, dropped=17, bytes_in=90_000,
                                                  bytes_forwarded=30_000), now_ms - 10_000)
            # gw-zeta: healthy; sorts after gw-ok by name.
            _record_status(conn, "gw-zeta", status("gw-zeta", "online", time_ms=now_ms - 3_000, bytes_in=10_000,
                                                   bytes_forwarded=1_000), now_ms - 3_000)
    finally:
        db.conn.close()
    data.expected_health = {"gw-ok": "online", "gw-will": "offline", "gw-silent": "offline", "gw-lag": "lagging",
                            "gw-zeta": "online"}
    return data


class HttpSession:
    """A logged-in session over plain HTTP (urllib and a cookie jar), for tests and benchmarks without a browser."""

    def __init__(self, base_url: str, user: str = "alice", password: str | None = None) -> None:
        import http.cookiejar
        import re

        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self.get("/login").decode()
        self.csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        self.post("/login", {"username": user, "password": password or PASSWORDS[user], "csrf_token": self.csrf})
        body = self.get("/").decode()
        self.csrf = re.search(r'data-csrf="([^"]+)"', body).group(1)

    def get(self, path: str, timeout: float = 30) -> bytes:
        with self.opener.open(self.base_url + path, timeout=timeout) as response:
            return response.read()

    def post(self, path: str, form: dict[str, Any], timeout: float = 30) -> tuple[int, bytes]:
        import urllib.parse

        data = urllib.parse.urlencode(form, doseq=True).encode()
        try:
            with self.opener.open(urllib.request.Request(self.base_url + path, data=data), timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


def save_screenshot(page: Any, name: str) -> None:
    """A full-page screenshot (checked to be a real PNG); written to docs/images/ with EDGEWAVE_UPDATE_SCREENSHOTS=1."""
    png = page.screenshot(full_page=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    if os.environ.get("EDGEWAVE_UPDATE_SCREENSHOTS") == "1":
        (REPO / "docs" / "images").mkdir(parents=True, exist_ok=True)
        (REPO / "docs" / "images" / name).write_bytes(png)


def chromium_path() -> str:
    """The browser the tests drive: ``EDGEWAVE_CHROMIUM`` if set, else Debian's chromium in
    its headless-shell build where installed (the build Playwright itself runs headless: the
    same Blink without the full browser around it; the browser tests' pages on half the CPU),
    else the full chromium."""
    chosen = os.environ.get("EDGEWAVE_CHROMIUM")
    if chosen:
        return chosen
    for name in ("chromium-headless-shell", "chromium"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium"


CHROMIUM = chromium_path()


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium (``CHROMIUM``) driven by Playwright (Playwright's own browser download cannot run here)."""
    import playwright.sync_api as playwright_sync   # a dev dependency

    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()
