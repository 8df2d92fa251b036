"""Notifications: rules select alarms, the per-key limit holds, reminders, back-off, signed webhooks, settings."""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from edgewave.cloud.dashboard.alarms import AlarmStore
from edgewave.cloud.dashboard.follower import FeedFollower
from edgewave.cloud.dashboard.notify import (FAILED, PENDING, SENT, SUPPRESSED, Notifier, backoff_s, signature)
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.cloud.settings import CloudSettings, NotificationTarget, SettingsError
from edgewave.shared.settings import bind

from dashboard_data import free_port
from notify_servers import self_signed, start_smtp, tls_server_context
from test_dashboard_alarms import fire, write


def settings_for(tmp_path, notifications: dict, **dashboard) -> CloudSettings:
    return bind(CloudSettings, {"database": str(tmp_path / "cloud.db"), "notifications": notifications,
                                "dashboard": {"public_url": "https://dash.example.org/", **dashboard}})


class Hook(BaseHTTPRequestHandler):
    """Answers each POST with the next status of ``server.statuses`` (then 200), keeping what it got."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.got.append((dict(self.headers), body))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hook():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    server.got, server.statuses = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def feed(tmp_path):
    writer = LiveFeedWriter(tmp_path / "live.db", max_rows=1000)
    yield writer
    writer.close()


def rig(tmp_path, notifications: dict):
    secret = tmp_path / "hook.secret"
    secret.write_text("s3cret-hook-key\n")
    secret.chmod(0o600)
    for target in notifications.get("targets", {}).values():
        if target.get("kind") == "webhook":
            target.setdefault("secret_file", str(secret))
    settings = settings_for(tmp_path, notifications)
    notifier = Notifier(settings, tmp_path / "dashboard.db")
    store = AlarmStore(tmp_path / "dashboard.db", on_open=notifier.on_open)
    return notifier, store, FeedFollower(tmp_path / "live.db", store)


def test_a_signed_webhook_is_retried_after_a_500_and_carries_the_alarm_and_its_link(tmp_path, feed, hook):
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    notifier, store, follower = rig(tmp_path, {
        "targets": {"ops": {"kind": "webhook", "url": url, "retry_initial_s": 0.01}},
        "rules": [{"name": "everything", "targets": ["ops"]}]})
    hook.statuses = [500]
    write(feed, fire("room3", 1))
    follower.step()
    alarm = store.list()[0]
    assert notifier.deliver_one("ops")            # 500: queued again
    [n] = notifier.for_alarm(alarm.id)
    assert (n.state, n.attempts, n.last_error) == (PENDING, 1, "HTTP 500")
    time.sleep(0.05)
    assert notifier.deliver_one("ops")
    [n] = notifier.for_alarm(alarm.id)
    assert (n.state, n.attempts) == (SENT, 2) and [a.ok for a in n.history] == [False, True]
    (headers1, body1), (headers2, body2) = hook.got
    assert body1 == body2
    expected = "sha256=" + hmac.new(b"s3cret-hook-key", body2, hashlib.sha256).hexdigest()
    assert headers2["X-Edgewave-Signature"] == expected == signature("s3cret-hook-key", body2)
    got = json.loads(body2)
    assert got["event"] == "alarm.opened" and got["url"] == f"https://dash.example.org/alarms/{alarm.id}"
    assert got["alarm"]["gateway"] == "gw1" and got["alarm"]["pattern"] == "fire"
    assert got["alarm"]["key"] == [{"variable": "room", "value": "<http://example.org/room3>"}]
    assert "First seen: 2023-11-14T22:13:21Z" in got["text"] and got["url"] in got["text"]
    assert not notifier.deliver_one("ops")


def test_a_4xx_is_not_retried_and_attempts_are_bounded(tmp_path, feed, hook):
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    notifier, store, follower = rig(tmp_path, {
        "targets": {"bad": {"kind": "webhook", "url": url},
                    "flaky": {"kind": "webhook", "url": url, "max_attempts": 2, "retry_initial_s": 0.01}},
        "rules": [{"name": "r1", "targets": ["bad"]}, {"name": "r2", "targets": ["flaky"]}]})
    hook.statuses = [400]
    write(feed, fire("room1", 1))
    follower.step()
    assert notifier.deliver_one("bad") and not notifier.deliver_one("bad")
    hook.statuses = [503, 503]
    assert notifier.deliver_one("flaky")
    time.sleep(0.05)
    assert notifier.deliver_one("flaky")
    states = {n.target: (n.state, n.attempts, n.last_error) for n in notifier.for_alarm(store.list()[0].id)}
    assert states == {"bad": (FAILED, 1, "HTTP 400"), "flaky": (FAILED, 2, "HTTP 503")}


def test_a_dead_port_is_retried_with_exponential_back_off(tmp_path, feed):
    notifier, store, follower = rig(tmp_path, {
        "targets": {"dead": {"kind": "webhook", "url": f"http://127.0.0.1:{free_port()}/", "timeout_s": 2}},
        "rules": [{"name": "r", "targets": ["dead"]}]})
    write(feed, fire("room1", 1))
    follower.step()
    assert notifier.deliver_one("dead")
    [n] = notifier.for_alarm(store.list()[0].id)
    assert n.state == PENDING and "Connection refused" in n.last_error
    assert 1500 <= n.next_attempt_ms - n.history[0].at_ms <= 2500      # retry_initial_s: 2
    assert not notifier.deliver_one("dead")                             # not due yet
    target = NotificationTarget(kind="webhook", retry_initial_s=2, retry_max_s=30)
    assert [backoff_s(target, k) for k in (1, 2, 3, 4, 5, 6)] == [2, 4, 8, 16, 30, 30]


def test_rules_select_by_gateway_pattern_and_severity_and_a_target_hears_once(tmp_path, feed):
    notifier, store, follower = rig(tmp_path, {
        "targets": {"a": {"kind": "webhook", "url": "http://127.0.0.1:9/"},
                    "b": {"kind": "webhook", "url": "http://127.0.0.1:9/"}},
        "severity": {"fire": "critical"},
        "rules": [{"name": "critical", "severities": ["critical"], "targets": ["a", "b"]},
                  {"name": "gw2-smoke", "gateways": ["gw2"], "patterns": ["smoke"], "targets": ["a"]},
                  {"name": "gw1-any", "gateways": ["gw1"], "targets": ["a"]}]})
    write(feed, fire("r1", 1), fire("r1", 2, gateway="gw2", pattern="smoke"), fire("r1", 3, gateway="gw3",
                                                                               pattern="smoke"))
    follower.step()
    by_alarm = {(a.gateway, a.pattern): sorted((n.target, n.rule) for n in notifier.for_alarm(a.id))
                for a in store.list()}
    assert by_alarm == {("gw1", "fire"): [("a", "critical"), ("b", "critical")],
                        ("gw2", "smoke"): [("a", "gw2-smoke")], ("gw3", "smoke"): []}


def test_a_flapping_key_is_limited_per_window_and_the_rest_counted(tmp_path, feed):
    notifier, store, follower = rig(tmp_path, {
        "targets": {"ops": {"kind": "webhook", "url": "http://127.0.0.1:9/"}},
        "max_per_key": 2, "rules": [{"name": "r", "targets": ["ops"]}]})
    for n in range(5):
        write(feed, fire("room3", n))
        follower.step()
        store.clear(store.list(states=("active",))[0].id, "alice")
    write(feed, fire("room4", 10))
    follower.step()
    states, _ = notifier.counts()
    assert states == {("ops", PENDING): 3, ("ops", SUPPRESSED): 3}
    room3 = [a for a in store.list() if "room3" in a.binding_key]
    assert sorted(n.state for a in room3 for n in notifier.for_alarm(a.id)) == [PENDING] * 2 + [SUPPRESSED] * 3


def test_a_reminder_goes_once_and_only_for_an_alarm_nobody_acknowledged(tmp_path, feed, monkeypatch):
    from edgewave.shared import clock

    notifier, store, follower = rig(tmp_path, {
        "targets": {"ops": {"kind": "webhook", "url": "http://127.0.0.1:9/"}},
        "rules": [{"name": "r", "targets": ["ops"], "remind_after_s": 60}]})
    write(feed, fire("room1", 1), fire("room2", 2))
    follower.step()
    room1, room2 = sorted(store.list(), key=lambda a: a.binding_key)
    store.acknowledge(room2.id, "alice", "on it")
    assert notifier.remind_due() == 0
    now = clock.now_ms()
    monkeypatch.setattr(clock, "now_ms", lambda: now + 61_000)
    assert notifier.remind_due() == 1 and notifier.remind_due() == 0
    assert [n.reason for n in notifier.for_alarm(room1.id)] == ["opened", "reminder"]
    assert [n.reason for n in notifier.for_alarm(room2.id)] == ["opened"]


def test_a_notifier_that_fails_does_not_keep_the_alarm_from_opening(tmp_path, feed):
    def broken(conn, alarm_id):
        conn.execute("INSERT INTO meta (key, value) VALUES ('x', 1)")
        raise RuntimeError("boom")

    store = AlarmStore(tmp_path / "dashboard.db", on_open=broken)
    follower = FeedFollower(tmp_path / "live.db", store)
    write(feed, fire("room1", 1))
    follower.step()
    assert len(store.list()) == 1
    assert store.conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'x'").fetchone()[0] == 0


@pytest.mark.parametrize("target, error", [
    ({"kind": "email", "host": "smtp", "sender": "a@x", "to": ["b@x"], "tls": "none", "user": "u",
      "password_file": "p"}, "plain text"),
    ({"kind": "email", "host": "smtp", "sender": "a@x", "to": ["b@x"], "tls": "plain"}, "expected one of"),
    ({"kind": "email", "host": "smtp", "to": ["b@x"]}, "needs sender"),
    ({"kind": "webhook", "url": "ftp://x/", "secret_file": "s"}, "http:// or https://"),
    ({"kind": "webhook", "url": "https://x/"}, "needs secret_file"),
    ({"kind": "mqtt", "topic": "alerts/#"}, "wildcards"),
    ({"kind": "mqtt", "topic": "ew/alarms/events"}, "gateways' topics"),
    ({"kind": "pager"}, "expected one of"),
])
def test_targets_that_cannot_work_are_refused_at_start(tmp_path, target, error):
    with pytest.raises(SettingsError, match=error):
        settings_for(tmp_path, {"targets": {"t": target}})


def test_rules_must_name_known_targets_and_the_defaults_send_nothing(tmp_path):
    with pytest.raises(SettingsError, match="no target 'nope'"):
        settings_for(tmp_path, {"rules": [{"name": "r", "targets": ["nope"]}]})
    defaults = CloudSettings().notifications
    assert defaults.targets == {} and defaults.rules == []
    assert CloudSettings().dashboard.base_url == "http://127.0.0.1:8090"
    with pytest.raises(SettingsError, match="public_url"):
        settings_for(tmp_path, {}, public_url="dash.example.org")


def test_an_mqtt_target_publishes_the_json_on_the_cloud_broker(tmp_path, feed, mqtt_broker):
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    got, subscribed = [], threading.Event()
    listener = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    listener.on_connect = lambda c, u, f, rc, p: c.subscribe("edgewave/alarms", qos=1)
    listener.on_subscribe = lambda *a: subscribed.set()
    listener.on_message = lambda c, u, m: got.append(m.payload)
    listener.connect(mqtt_broker.host, mqtt_broker.port)
    listener.loop_start()
    try:
        assert subscribed.wait(10)
        settings = bind(CloudSettings, {
            "database": str(tmp_path / "cloud.db"), "broker": {"host": mqtt_broker.host, "port": mqtt_broker.port},
            "notifications": {"targets": {"room": {"kind": "mqtt"}},
                              "rules": [{"name": "r", "targets": ["room"]}]}})
        notifier = Notifier(settings, tmp_path / "dashboard.db")
        store = AlarmStore(tmp_path / "dashboard.db", on_open=notifier.on_open)
        write(feed, fire("room7", 1))
        FeedFollower(tmp_path / "live.db", store).step()
        assert notifier.deliver_one("room")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        [payload] = got
        body = json.loads(payload)
        assert body["alarm"]["key"] == [{"variable": "room", "value": "<http://example.org/room7>"}]
        assert body["url"] == f"http://127.0.0.1:8090/alarms/{store.list()[0].id}"
        assert [n.state for n in notifier.for_alarm(store.list()[0].id)] == [SENT]
    finally:
        listener.loop_stop()
        listener.disconnect()


def _mail_rig(tmp_path, feed, port: int, **target):
    notifier, store, follower = rig(tmp_path, {
        "targets": {"mail": {"kind": "email", "host": "127.0.0.1", "port": port, "sender": "ew@example.org",
                             "to": ["ops@example.org"], **target}},
        "rules": [{"name": "r", "targets": ["mail"]}]})
    write(feed, fire("room1", 1))
    follower.step()
    assert notifier.deliver_one("mail")
    return notifier.for_alarm(store.list()[0].id)


def test_smtp_without_starttls_is_refused_rather_than_sent_in_plain_text(tmp_path, feed):
    port = free_port()
    server = start_smtp(port)
    try:
        [n] = _mail_rig(tmp_path, feed, port, tls="starttls")
        assert n.state == FAILED and "STARTTLS" in n.last_error and server.handler.messages == []
    finally:
        server.stop()


def test_smtp_with_implicit_tls_verifies_the_server_and_delivers(tmp_path, feed):
    cert, key = self_signed(tmp_path)
    port = free_port()
    server = start_smtp(port, ssl_context=tls_server_context(cert, key))
    try:
        [n] = _mail_rig(tmp_path, feed, port, tls="implicit", ca_file=str(cert))
        assert n.state == SENT and len(server.handler.messages) == 1
        assert "Acknowledge it on the dashboard: https://dash.example.org/alarms/1" in \
            server.handler.messages[0].get_content()
    finally:
        server.stop()


def test_an_smtp_certificate_nobody_trusts_fails_the_message_at_once(tmp_path, feed):
    cert, key = self_signed(tmp_path)
    port = free_port()
    server = start_smtp(port, tls_context=tls_server_context(cert, key), require_starttls=True)
    try:
        [n] = _mail_rig(tmp_path, feed, port, tls="starttls")      # no ca_file: the system's CAs
        assert n.state == FAILED and "certificate" in n.last_error and server.handler.messages == []
    finally:
        server.stop()


def test_an_https_webhook_is_verified_with_ca_file(tmp_path, feed, hook):
    import ssl

    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    hook.socket = context.wrap_socket(hook.socket, server_side=True)
    url = f"https://127.0.0.1:{hook.server_address[1]}/hook"
    notifier, store, follower = rig(tmp_path, {
        "targets": {"trusting": {"kind": "webhook", "url": url, "ca_file": str(cert)},
                    "default": {"kind": "webhook", "url": url}},
        "rules": [{"name": "r", "targets": ["trusting", "default"]}]})
    write(feed, fire("room1", 1))
    follower.step()
    assert notifier.deliver_one("trusting") and notifier.deliver_one("default")
    states = {n.target: (n.state, n.last_error or "") for n in notifier.for_alarm(store.list()[0].id)}
    assert states["trusting"] == (SENT, "") and len(hook.got) == 1
    assert states["default"][0] == FAILED and "CERTIFICATE_VERIFY_FAILED" in states["default"][1]   # not retried


def test_messages_for_a_target_removed_from_the_settings_fail_visibly(tmp_path, feed):
    notifier, store, follower = rig(tmp_path, {
        "targets": {"old": {"kind": "webhook", "url": "http://127.0.0.1:9/"}},
        "rules": [{"name": "r", "targets": ["old"]}]})
    write(feed, fire("room1", 1))
    follower.step()
    notifier.close()
    again = Notifier(settings_for(tmp_path, {}), tmp_path / "dashboard.db")
    [n] = again.for_alarm(store.list()[0].id)
    assert n.state == FAILED and "no longer" in n.last_error


ALERT_DOC = """@prefix ew: <https://edgewave.dev/ns#> .
ew:config {
<urn:edgewave:config> a ew:GatewayConfig ;
    ew:pattern [ a ew:Pattern ; ew:name "fire" ; ew:severity "critical" ; ew:message "Fire in {room}" ; ew:query \"\"\"
REGISTER RSTREAM <fire> AS SELECT ?room ?obs
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT1M STEP PT1S]
WHERE { WINDOW <w> { ?obs <http://example.org/in> ?room } }\"\"\" ] .
}
"""


def test_a_notification_carries_the_patterns_alert_text_and_is_selected_by_its_severity(tmp_path, feed, hook):
    """The pattern's ew:message, filled in with the newest match (terms as people read them),
    heads the message; its ew:severity is the alarm's when cloud.yaml names none, and a rule
    for critical alarms only selects it."""
    import sqlite_utils

    from edgewave.cloud.dashboard.gateway_terms import GatewayTerms
    from edgewave.cloud.dashboard.queries import Reader
    from edgewave.cloud.registry import ensure_registry_schema, reserve_version, resolve_push

    db = sqlite_utils.Database(tmp_path / "cloud.db")
    ensure_registry_schema(db)
    resolve_push(db, "gw1", reserve_version(db, "gw1", "trig", ALERT_DOC, 1_000), "applied", "", 2_000)
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    secret = tmp_path / "hook.secret"
    secret.write_text("s3cret-hook-key\n")
    secret.chmod(0o600)
    settings = settings_for(tmp_path, {
        "targets": {"ops": {"kind": "webhook", "url": url, "secret_file": str(secret)}},
        "rules": [{"name": "critical", "targets": ["ops"], "severities": ["critical"]}]})
    notifier = Notifier(settings, tmp_path / "dashboard.db", GatewayTerms(Reader(tmp_path / "cloud.db")))
    store = AlarmStore(tmp_path / "dashboard.db", on_open=notifier.on_open)
    write(feed, fire("room3", 1))
    FeedFollower(tmp_path / "live.db", store).step()
    assert notifier.deliver_one("ops")
    got = json.loads(hook.got[0][1])
    assert got["message"] == "Fire in room3" and got["alarm"]["severity"] == "critical"
    assert got["subject"] == "[edgewave] critical Fire in room3 on gw1"
    assert got["text"].splitlines()[2] == "Fire in room3"
