"""The dashboard as a process: on a machine where the cloud never ran, and under `edgewave-cloud run`."""
from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from cloud_harness import CloudProcess, wait_for, write_config
from dashboard_data import CHROMIUM, PASSWORDS, free_port, wait_until_serving, write_dashboard_config


pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_on_a_machine_where_the_cloud_never_ran_the_pages_are_empty(tmp_path):
    from playwright.sync_api import sync_playwright

    fresh = tmp_path / "var" / "cloud"          # nothing here: no database, no landing zone
    port = free_port()
    config = write_dashboard_config(tmp_path, port, database=fresh / "cloud.db")
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = browser.new_page(base_url=f"http://127.0.0.1:{port}")
            page.goto("/")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            page.wait_for_selector("#matches-chart[data-drawn=empty]")
            assert page.locator("#matches-chart").inner_text() == "No matches in this period."
            assert page.locator("#total-matches").inner_text() == "0"
            for table in ("#patterns-table", "#bindings-table", "#significant-table", "#delays-table",
                          "#uplink-table"):
                assert page.locator(f"{table} tbody tr.empty").count() == 1, table
            page.goto("/gateways")
            assert page.locator("#gateways-table tbody tr").inner_text() == "No gateway has reported yet."
            api = page.request.get("/api/overview?range=7d").json()
            assert api["total"] == 0 and api["patterns"] == [] and api["chart"]["series"] == {}
            assert page.request.get("/export/gateways.csv").text().splitlines()[0].startswith("gateway,health")
            assert page.request.get("/gateways/gw1").status == 404
            page.goto("/queries")
            assert page.locator("#queries-table tbody tr").inner_text() == "No per-instance query results stored yet."
            assert page.request.get("/queries/co2-per-room").status == 404
            browser.close()
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
    # It read nothing into existence: the cloud's files are still the cloud's to create.
    assert not (fresh / "cloud.db").exists() and not (tmp_path / "landing").exists()
    assert "level=ERROR" not in dashboard.log() and "Traceback" not in dashboard.log()


def test_add_user_prints_an_entry_the_dashboard_accepts(tmp_path):
    bindir = Path(sys.executable).parent
    out = subprocess.run([str(bindir / "edgewave-cloud"), "add-user", "olga", "--role", "operator",
                          "--password-stdin", "--print"], input="a long enough password\n", capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    entry = yaml.safe_load(out.stdout)
    user = entry["dashboard"]["users"]["olga"]
    assert user["role"] == "operator" and user["password_hash"].startswith("$argon2id$")
    assert "a long enough password" not in out.stdout + out.stderr
    from argon2 import PasswordHasher

    assert PasswordHasher().verify(user["password_hash"], "a long enough password")
    short = subprocess.run([str(bindir / "edgewave-cloud"), "add-user", "olga", "--role", "viewer",
                            "--password-stdin", "--print"], input="short\n", capture_output=True, text=True, timeout=60)
    assert short.returncode == 2 and "at least 10 characters" in short.stderr


def _add_user(config: Path, name: str, password: str, *extra: str) -> subprocess.CompletedProcess:
    """The real entry point, as an operator runs it."""
    return subprocess.run([str(Path(sys.executable).parent / "edgewave-cloud"), "add-user", name, "--config",
                           str(config), "--password-stdin", *extra], input=password + "\n", capture_output=True,
                          text=True, timeout=60)


def test_add_user_writes_cloud_yaml_and_the_dashboard_accepts_the_login(tmp_path):
    import urllib.error

    from dashboard_data import HttpSession

    port = free_port()
    config = write_dashboard_config(tmp_path, port)
    commented = ("# the cloud of building 7: ask the facilities team before changing it\n"
                 + config.read_text().replace("dashboard:\n", "dashboard:   # who may look\n", 1)
                 + "# end of file\n")
    config.write_text(commented)
    config.chmod(0o640)
    before = yaml.safe_load(commented)

    added = _add_user(config, "olga", "olga's long password", "--role", "operator")
    assert added.returncode == 0, added.stderr
    assert added.stdout == "" and "olga's long password" not in added.stderr
    text = config.read_text()
    assert text.startswith("# the cloud of building 7") and "dashboard:   # who may look\n" in text
    assert text.endswith("# end of file\n")
    assert config.stat().st_mode & 0o777 == 0o640
    after = yaml.safe_load(text)
    olga = after["dashboard"]["users"].pop("olga")
    assert after == before and olga["role"] == "operator" and olga["password_hash"].startswith("$argon2id$")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cloud.yaml")] == []   # no temporary left

    again = _add_user(config, "olga", "someone else's password", "--role", "viewer")
    assert again.returncode == 2 and "already has 'olga'" in again.stderr and "--replace" in again.stderr
    assert config.read_text() == text

    url = f"http://127.0.0.1:{port}"
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        before_the_change = HttpSession(url, "olga", "olga's long password")
        assert b"olga <small>(operator)</small>" in before_the_change.get("/")
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]

    # A password change (and a restart) ends the sessions opened with the old password.
    replaced = _add_user(config, "olga", "olga's new long password", "--role", "viewer", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert yaml.safe_load(config.read_text())["dashboard"]["users"]["olga"]["role"] == "viewer"
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard2.log")
    try:
        wait_until_serving(port, dashboard)
        with pytest.raises(urllib.error.HTTPError) as ended:
            before_the_change.get("/api/gateways")
        assert ended.value.code == 401
        session = HttpSession(url, "olga", "olga's new long password")
        assert b"olga <small>(viewer)</small>" in session.get("/")
        with pytest.raises(urllib.error.HTTPError) as refused:
            HttpSession(url, "olga", "olga's long password").get("/api/gateways")
        assert refused.value.code == 401
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
    assert "dashboard sessions ended=1" in dashboard.log()


@pytest.mark.timeout(600)
def test_run_supervises_the_dashboard_beside_ingest_and_spark(tmp_path, mqtt_broker):
    port = free_port()
    dashboard_cfg = yaml.safe_load(write_dashboard_config(tmp_path, port).read_text())["dashboard"]
    config = write_config(tmp_path, mqtt_broker, dashboard=dashboard_cfg)
    cloud = CloudProcess(["run", "--config", str(config)], tmp_path / "run.log")
    try:
        wait_until_serving(port, cloud, timeout=120)
        assert "service started child=dashboard" in cloud.log()
        wait_for(lambda: "ingest connected" in cloud.log(), 60, "ingest to connect", alive=cloud)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/gateways")
        try:
            urllib.request.urlopen(request, timeout=5)
            raise AssertionError("the API answered without a login")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401 and json.loads(exc.read()) == {"error": "log in first"}
    finally:
        assert cloud.stop() == 0, cloud.log()[-3000:]
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2)


def test_an_operator_pushes_a_config_from_the_gateway_page(tmp_path, mqtt_broker):
    """The push form goes through push-config's own code: validated, versioned, signed, retained, acked."""
    import json as _json

    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion
    from playwright.sync_api import sync_playwright

    from cloud_harness import query
    from dashboard_data import fill_known_database
    from edgewave.shared import topics
    from edgewave.shared.configdoc import verify_envelope

    fill_known_database(tmp_path / "cloud.db")
    port = free_port()
    config = write_dashboard_config(tmp_path, port)
    cfg = yaml.safe_load(config.read_text())
    cfg["broker"] = {"host": mqtt_broker.host, "port": mqtt_broker.port}
    cfg["push"] = {"ack_timeout_s": 20}
    config.write_text(yaml.safe_dump(cfg))
    # The gateway's side of the contract: verify the signed envelope, ack it applied.
    received: list[int] = []
    gateway = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5, client_id="gw-ok")

    def on_message(client, userdata, msg):  # noqa: ANN001
        envelope = verify_envelope(msg.payload, "key-of-gw-ok", "gw-ok")
        received.append(envelope.version)
        client.publish(topics.config_ack_topic("gw-ok"), _json.dumps(
            {"gateway": "gw-ok", "version": envelope.version, "status": "applied", "reason": ""}), qos=1)

    gateway.on_connect = lambda c, u, f, rc, p: c.subscribe(topics.config_topic("gw-ok"), qos=1)
    gateway.on_message = on_message
    gateway.connect(mqtt_broker.host, mqtt_broker.port)
    gateway.loop_start()
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = browser.new_page(base_url=f"http://127.0.0.1:{port}")
            page.goto("/gateways/gw-ok")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORDS["alice"])
            page.click("button[type=submit]")
            page.wait_for_url("**/gateways/gw-ok")
            page.set_input_files("form.push input[type=file]",
                                 str(Path(__file__).resolve().parents[2] / "configs" / "gateway-config.trig"))
            page.click("form.push button[type=submit]")
            page.wait_for_url("**/gateways/gw-ok?pushed=1")
            wait_for(lambda: query(tmp_path / "cloud.db", "SELECT status FROM config_pushes WHERE gateway='gw-ok'")
                     == [("applied",)], 30, "the push to be applied", alive=dashboard)
            page.reload()
            row = page.locator("#pushes-table tbody tr").first.inner_text()
            assert row.startswith("4") and "applied" in row    # the gateway reported version 3: next is 4
            browser.close()
    finally:
        gateway.loop_stop()
        gateway.disconnect()
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
    assert received == [4]
    assert "dashboard push user=alice gateway=gw-ok version=4 status=applied" in dashboard.log()


def test_concurrent_wrong_passwords_verify_at_most_the_limit_the_rest_get_429(tmp_path):
    """Each attempt takes its place in the limit before the (slow) password hash is checked, so
    fifteen wrong passwords sent at once are not all verified: at most
    ``login_failures_per_user`` (5) are, and the others are refused with 429 unverified."""
    port = free_port()
    config = write_dashboard_config(tmp_path, port)
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        form = opener.open(f"http://127.0.0.1:{port}/login", timeout=10).read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', form)[1]
        body = urllib.parse.urlencode({"username": "alice", "password": "wrong", "csrf_token": token}).encode()
        statuses: list[int] = []
        start = threading.Barrier(15)

        def attempt() -> None:
            start.wait()
            try:
                opener.open(urllib.request.Request(f"http://127.0.0.1:{port}/login", data=body), timeout=60)
                statuses.append(200)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)

        threads = [threading.Thread(target=attempt) for _ in range(15)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
    assert len(statuses) == 15
    assert statuses.count(401) <= 5 and statuses.count(429) >= 10, sorted(statuses)
    assert set(statuses) <= {401, 429}
    assert dashboard.log().count("dashboard login failed user=alice") == statuses.count(401)


@pytest.mark.parametrize("stream", ["/api/live/stream", "/api/alarms/stream"])
def test_a_live_stream_ends_when_its_session_is_logged_out(tmp_path, stream):
    port = free_port()
    config = write_dashboard_config(tmp_path, port)
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(port, dashboard)
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        token = re.search(r'name="csrf_token" value="([^"]+)"', opener.open(f"{base}/login").read().decode())[1]
        opener.open(urllib.request.Request(f"{base}/login", data=urllib.parse.urlencode(
            {"username": "alice", "password": PASSWORDS["alice"], "csrf_token": token}).encode()), timeout=30)
        page = opener.open(f"{base}/gateways", timeout=30).read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]
        response = opener.open(f"{base}{stream}", timeout=60)
        assert response.status == 200
        ended = threading.Event()

        def read_to_end() -> None:
            while response.readline():
                pass
            ended.set()

        threading.Thread(target=read_to_end, daemon=True).start()
        time.sleep(1.0)
        assert not ended.is_set()                              # streaming while the session holds
        opener.open(urllib.request.Request(f"{base}/logout", data=urllib.parse.urlencode(
            {"csrf_token": token}).encode()), timeout=30)
        assert ended.wait(15), "the stream went on after its session was logged out"
        with pytest.raises(urllib.error.HTTPError) as refused:   # the browser's reconnect is refused
            opener.open(f"{base}{stream}", timeout=30)
        assert refused.value.code == 401
    finally:
        assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]
