"""Notifications through the real dashboard process: live-feed rows written as ingest writes them open
alarms in its follower, and real servers receive the messages: an SMTP server with STARTTLS (aiosmtpd, a
self-signed certificate trusted through ``ca_file``), a webhook receiver that answers 500 first, a target
that never answers, and a port nobody listens on."""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import time
from pathlib import Path

import pytest
import yaml

from cloud_harness import CloudProcess, landing_record, wait_for
from dashboard_data import HttpSession, free_port, wait_until_serving, write_dashboard_config
from notify_servers import self_signed, start_hook, start_smtp, tls_server_context
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.shared.events import match_event

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.paced]

EX = "http://example.org/"
PUBLIC_URL = "https://dashboard.example.org/edgewave"
HOOK_KEY = "the webhook's shared key"
SMTP_USER, SMTP_PASSWORD = "edgewave", "smtp password of the dashboard"


def fire(room: str, n: int, gateway: str = "gw1") -> dict:
    t = int(time.time() * 1000) + n
    triple = ((f"<{EX}obs{n}>", f"<{EX}in>", f"<{EX}{room}>"), t)
    return match_event(gateway, "fire", {"room": f"<{EX}{room}>", "obs": f"<{EX}obs{n}>"}, t - 500, t, [triple],
                       t + 10)


@pytest.fixture
def smtp_server(tmp_path):
    from aiosmtpd.smtp import AuthResult, LoginPassword

    cert, key = self_signed(tmp_path)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
            SMTP_USER.encode(), SMTP_PASSWORD.encode())
        return AuthResult(success=ok)

    controller = start_smtp(free_port(), tls_context=tls_server_context(cert, key), require_starttls=True,
                            authenticator=authenticator, auth_required=True)
    controller.mailbox, controller.ca = controller.handler, cert
    yield controller
    controller.stop()


@pytest.fixture
def silent_server():
    """Takes connections and never answers: a target that hangs each attempt until its timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


def dashboard_config(tmp: Path, port: int, notifications: dict) -> Path:
    config = write_dashboard_config(tmp, port, public_url=PUBLIC_URL)
    cfg = yaml.safe_load(config.read_text())
    cfg["notifications"] = notifications
    config.write_text(yaml.safe_dump(cfg))
    return config


def secret(tmp: Path, name: str, value: str) -> str:
    path = tmp / name
    path.write_text(value + "\n")
    path.chmod(0o600)
    return str(path)


def alarm_ids(session: HttpSession) -> list[int]:
    return [a["id"] for a in json.loads(session.get("/api/alarms?state=all&since=all"))["alarms"]]


def test_an_alarm_reaches_mail_and_webhook_while_a_dead_target_delays_nothing(tmp_path, smtp_server, silent_server):
    hook = start_hook(statuses=[500])
    port = free_port()
    config = dashboard_config(tmp_path, port, {
        "max_per_key": 2,
        "targets": {
            "oncall": {"kind": "email", "host": "127.0.0.1", "port": smtp_server.port, "tls": "starttls",
                       "ca_file": str(smtp_server.ca), "user": SMTP_USER,
                       "password_file": secret(tmp_path, "smtp.password", SMTP_PASSWORD),
                       "sender": "edgewave@example.org", "to": ["oncall@example.org", "boss@example.org"]},
            "tickets": {"kind": "webhook", "url": f"http://127.0.0.1:{hook.server_address[1]}/in",
                        "secret_file": secret(tmp_path, "hook.secret", HOOK_KEY), "retry_initial_s": 0.3},
            "hanging": {"kind": "webhook", "url": f"http://127.0.0.1:{silent_server}/in",
                        "secret_file": str(tmp_path / "hook.secret"), "timeout_s": 8, "max_attempts": 2,
                        "retry_initial_s": 0.5},
            "nobody": {"kind": "webhook", "url": f"http://127.0.0.1:{free_port()}/in",
                       "secret_file": str(tmp_path / "hook.secret"), "max_attempts": 2, "retry_initial_s": 0.5},
        },
        "rules": [{"name": "fire", "patterns": ["fire"], "targets": ["hanging", "nobody", "oncall", "tickets"]}],
    })
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=1000)
    try:
        wait_until_serving(port, dashboard)
        session = HttpSession(f"http://127.0.0.1:{port}")
        written = time.monotonic()
        feed.append([landing_record(fire("room3", 1), int(time.time() * 1000))])

        # The alarm shows at once, the mail and the webhook arrive while "hanging" is still waiting
        # for its first answer (8 s) and "nobody" refuses.
        [alarm_id] = wait_for(lambda: alarm_ids(session), 5, "the alarm", alive=dashboard)
        assert time.monotonic() - written < 3
        wait_for(lambda: smtp_server.mailbox.messages, 6, "the e-mail", alive=dashboard)
        wait_for(lambda: len(hook.got) >= 2, 6, "the webhook's retry", alive=dashboard)
        assert time.monotonic() - written < 7, "a dead target held the others up"

        [mail] = smtp_server.mailbox.messages
        assert smtp_server.mailbox.tls == [True]
        assert mail["Subject"] == "[edgewave] alarm fire on gw1"
        assert mail["To"] == "oncall@example.org, boss@example.org" and mail["From"] == "edgewave@example.org"
        text = mail.get_content().replace("\r\n", "\n")
        link = f"{PUBLIC_URL}/alarms/{alarm_id}"
        for expected in ("Gateway:    gw1", "Pattern:    fire", f"?room = <{EX}room3>", "First seen: ",
                         "Last seen:  ", link):
            assert expected in text, (expected, text)

        (t1, _, body1), (t2, headers, body2) = hook.got[:2]
        assert body1 == body2 and t2 - t1 >= 0.25                     # the same bytes, after the back-off
        assert headers["X-Edgewave-Signature"] == "sha256=" + hmac.new(HOOK_KEY.encode(), body2,
                                                                         hashlib.sha256).hexdigest()
        sent = json.loads(body2)
        assert sent["url"] == link and sent["alarm"]["key"] == [{"variable": "room", "value": f"<{EX}room3>"}]
        assert sent["alarm"]["first_seen"].endswith("Z") and sent["text"] == text

        # The alarm's page shows every target's attempts; the dead ones fail within their bounds.
        def states() -> dict[str, str]:
            page = session.get(f"/alarms/{alarm_id}").decode()
            rows = re.findall(r'<tr data-id="\d+" data-state="(\w+)">\s*<td>[^<]*</td>\s*<td>opened</td>\s*'
                              r'<td>(\w+) ', page)
            return {target: state for state, target in rows}

        wait_for(lambda: states() == {"oncall": "sent", "tickets": "sent", "hanging": "failed", "nobody": "failed"},
                 40, "the dead targets to give up", interval=1, alive=dashboard)
        page = session.get(f"/alarms/{alarm_id}").decode()
        assert "HTTP 500" in page and "timed out" in page and "Connection refused" in page
        metrics = session.get("/metrics").decode()
        assert 'edgewave_notifications{state="sent",target="oncall"} 1.0' in metrics
        assert 'edgewave_notification_attempts_total{outcome="failed",target="hanging"} 2.0' in metrics
        log = dashboard.log()
        assert re.search(rf"notification sent alarm={alarm_id} target=oncall kind=email reason=opened attempt=1",
                         log)
        assert re.search(rf"notification failed alarm={alarm_id} target=tickets kind=webhook attempt=1 of=5 "
                         r"retry_in_s=0\.3", log)

        # A flapping key: cleared and matching again, three more times. Each target hears twice at most.
        for n in range(2, 5):
            open_id = wait_for(lambda: [a["id"] for a in json.loads(session.get("/api/alarms"))["alarms"]
                                        if a["state"] == "active"], 5, "an open alarm", alive=dashboard)[0]
            status, _ = session.post(f"/alarms/{open_id}/clear", {"csrf_token": session.csrf})
            assert status == 200
            feed.append([landing_record(fire("room3", n), int(time.time() * 1000))])
            wait_for(lambda: len(alarm_ids(session)) == n, 5, f"alarm {n}", alive=dashboard)
        time.sleep(2)
        assert len(smtp_server.mailbox.messages) == 2
        assert len({body for _, _, body in hook.got}) == 2
        newest = max(alarm_ids(session))
        assert 'data-state="suppressed"' in session.get(f"/alarms/{newest}").decode()
        assert 'edgewave_notifications{state="suppressed",target="oncall"} 2.0' in session.get("/metrics").decode()
        assert "notification suppressed alarm=" in dashboard.log()
    finally:
        feed.close()
        hook.shutdown()
        hook.server_close()
        assert dashboard.stop(timeout=30) == 0, dashboard.log()[-3000:]
    assert "Traceback" not in dashboard.log()


def test_a_queued_notification_survives_a_restart_of_the_dashboard_and_a_reminder_follows(tmp_path):
    hook_port, port = free_port(), free_port()
    config = dashboard_config(tmp_path, port, {
        "targets": {"tickets": {"kind": "webhook", "url": f"http://127.0.0.1:{hook_port}/in",
                                "secret_file": secret(tmp_path, "hook.secret", HOOK_KEY), "max_attempts": 50,
                                "retry_initial_s": 0.2, "retry_max_s": 0.5}},
        "rules": [{"name": "all", "targets": ["tickets"], "remind_after_s": 2}],
    })
    feed = LiveFeedWriter(tmp_path / "live.db", max_rows=1000)
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_until_serving(port, dashboard)
        feed.append([landing_record(fire("room1", 1), int(time.time() * 1000))])
        wait_for(lambda: "notification failed" in dashboard.log(), 10, "a failed attempt", alive=dashboard)
        assert dashboard.stop(timeout=30) == 0
        hook = start_hook(hook_port)                  # the receiver comes back while the dashboard is down
        try:
            dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard2.log")
            wait_until_serving(port, dashboard)
            # The message queued before the restart, and the reminder: nobody acknowledged the alarm.
            wait_for(lambda: len(hook.got) >= 2, 15, "the queued message and the reminder", alive=dashboard)
            time.sleep(1)
            sent = [json.loads(body) for _, _, body in hook.got]
            assert sorted(m["event"] for m in sent) == ["alarm.opened", "alarm.reminder"]
            assert all(m["alarm"]["key"] == [{"variable": "room", "value": f"<{EX}room1>"}] for m in sent)
            reminder = next(m for m in sent if m["event"] == "alarm.reminder")
            assert reminder["subject"] == "[edgewave] Still unacknowledged: alarm fire on gw1"
            assert "notification sent alarm=1 target=tickets kind=webhook reason=opened" in dashboard.log()
            assert "notification sent alarm=1 target=tickets kind=webhook reason=reminder" in dashboard.log()
        finally:
            hook.shutdown()
            hook.server_close()
    finally:
        feed.close()
        assert dashboard.stop(timeout=30) == 0, dashboard.log()[-3000:]


def test_the_cloud_role_of_a_provisioned_broker_lets_mqtt_notifications_through_under_edgewave_alarms(tmp_path):
    """broker-init's role for the cloud's user allows edgewave/alarms/...; another topic is refused by the
    broker (MQTT 5 reason code), and the message fails at once instead of being retried."""
    from fleet_rig import running_fleet

    from edgewave.cloud.dashboard.alarms import AlarmStore
    from edgewave.cloud.dashboard.follower import FeedFollower
    from edgewave.cloud.dashboard.notify import FAILED, SENT, Notifier
    from edgewave.cloud.settings import load_settings

    with running_fleet(tmp_path / "cloud", ()) as rig:
        cfg = yaml.safe_load(rig.config.read_text())
        cfg["notifications"] = {
            "targets": {"room": {"kind": "mqtt", "topic": "edgewave/alarms/building7"},
                        "elsewhere": {"kind": "mqtt", "topic": "site/alarms", "max_attempts": 5}},
            "rules": [{"name": "all", "targets": ["room", "elsewhere"]}]}
        rig.config.write_text(yaml.safe_dump(cfg))
        settings = load_settings(rig.config)
        state = tmp_path / "dashboard.db"
        notifier = Notifier(settings, state)
        store = AlarmStore(state, on_open=notifier.on_open)
        feed = LiveFeedWriter(tmp_path / "live.db", max_rows=100)
        feed.append([landing_record(fire("room1", 1), int(time.time() * 1000))])
        FeedFollower(tmp_path / "live.db", store).step()
        assert notifier.deliver_one("room") and notifier.deliver_one("elsewhere")
        got = {n.target: n for n in notifier.for_alarm(store.list()[0].id)}
        assert got["room"].state == SENT
        assert got["elsewhere"].state == FAILED and got["elsewhere"].attempts == 1
        assert "refused" in got["elsewhere"].last_error and "authori" in got["elsewhere"].last_error.lower()
        feed.close()
        store.close()
        notifier.close()


def test_a_secret_file_that_cannot_be_read_stops_the_dashboard_at_start(tmp_path):
    port = free_port()
    config = dashboard_config(tmp_path, port, {
        "targets": {"tickets": {"kind": "webhook", "url": "https://tickets.example.org/in",
                                "secret_file": str(tmp_path / "missing.secret")}},
        "rules": [{"name": "all", "targets": ["tickets"]}],
    })
    dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    assert dashboard.wait(timeout=60) == 2
    assert "notifications.targets.tickets.secret_file" in dashboard.log() and "missing.secret" in dashboard.log()
