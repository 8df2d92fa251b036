"""Notifications: alarms sent to people who are not looking at the dashboard (e-mail, webhook, MQTT).

An alarm that only shows on a page waits for someone to open it. The rules in
``notifications`` (cloud.yaml) pick alarms by gateway, pattern and severity and
name the targets to tell when one opens, and again once (``remind_after_s``) if
nobody has acknowledged it by then.

Nothing here may hold up the follower, the pages or ingest, whatever a target
does: the follower only *enqueues*, in the same transaction that opens the alarm
(so a crash between the two cannot open an alarm without its notifications, nor
notify about an alarm that was never stored), into tables of the dashboard's own
state file. Each target has its own delivery thread that takes its oldest due
message, sends it outside any lock, and records the attempt; a dead or hanging
target (each attempt bounded by ``timeout_s``) delays only its own messages.
A failed attempt on a network error, a 5xx answer or a temporary SMTP refusal is
retried with exponential back-off (``retry_initial_s`` doubled per attempt, at
most ``retry_max_s``) up to ``max_attempts``; an answer that says the message
itself is wrong (a 4xx, a permanent SMTP refusal) is not. What is queued survives
a restart, so a message is delivered at least once: a dashboard stopped during an
attempt sends it again.

A pattern that flaps (cleared, matching again, cleared...) opens alarm after
alarm for the same key. Each target gets at most ``max_per_key`` messages per key
(gateway, pattern, binding key) within ``per_key_window_s``; the rest are stored
as *suppressed*, shown on the alarm's page and counted, never sent.

The body is made when the message is queued and kept as bytes, so each attempt
sends the same bytes and a webhook's signature (``X-Edgewave-Signature:
sha256=<hex>``, HMAC-SHA256 over those bytes with the target's secret) stays
valid however often it is retried.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import smtplib
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

from edgewave.cloud.settings import CloudSettings, NotificationTarget, SettingsError
from edgewave.shared import clock
from edgewave.shared.secret_files import read_secret
from edgewave.shared.sqlite_files import open_read_write

from .alarms import ACTIVE, COLUMNS, Alarm
from .gateway_terms import GatewayTerms

log = logging.getLogger("edgewave.cloud.dashboard.notify")

PENDING, SENT, FAILED, SUPPRESSED = "pending", "sent", "failed", "suppressed"
NOTIFICATION_STATES = (PENDING, SENT, FAILED, SUPPRESSED)
OPENED, REMINDER = "opened", "reminder"
POLL_S = 0.25             # a worker's look at the queue when nothing woke it
SCHEDULE_S = 1.0          # reminders fall due to within this
PRUNE_EVERY_S = 3600.0
STOP_WAIT_S = 3.0         # how long stop() waits for attempts under way, all targets together
SIGNATURE_HEADER = "X-Edgewave-Signature"

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    alarm_id INTEGER NOT NULL,
    gateway TEXT NOT NULL,
    pattern TEXT NOT NULL,
    binding_key TEXT NOT NULL,
    reason TEXT NOT NULL,
    rule TEXT NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    body BLOB NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL,
    next_attempt_ms INTEGER NOT NULL,
    done_ms INTEGER,
    last_error TEXT
);
CREATE INDEX IF NOT EXISTS notifications_due ON notifications (target, state, next_attempt_ms);
CREATE INDEX IF NOT EXISTS notifications_by_alarm ON notifications (alarm_id);
CREATE INDEX IF NOT EXISTS notifications_by_key ON notifications (gateway, pattern, binding_key, target, created_ms);
CREATE TABLE IF NOT EXISTS notification_attempts (
    notification_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT,
    PRIMARY KEY (notification_id, attempt)
);
CREATE TABLE IF NOT EXISTS notification_reminders (
    alarm_id INTEGER NOT NULL,
    rule TEXT NOT NULL,
    due_ms INTEGER NOT NULL,
    PRIMARY KEY (alarm_id, rule)
);
CREATE INDEX IF NOT EXISTS notification_reminders_due ON notification_reminders (due_ms);
"""


class DeliveryError(Exception):
    """A failed attempt; ``retry`` says whether another attempt may succeed (network, 5xx, SMTP 4xx)."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass
class Attempt:
    attempt: int
    at_ms: int
    ok: bool
    error: str | None


@dataclass
class Notification:
    """One message to one target about one alarm, as the alarm's page shows it."""

    id: int
    reason: str
    rule: str
    target: str
    kind: str
    state: str
    attempts: int
    created_ms: int
    next_attempt_ms: int
    done_ms: int | None
    last_error: str | None
    history: list[Attempt]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def message(alarm: Alarm, reason: str, rule: str, severity: str, base_url: str,
            said: str | None = None, written: bool = False) -> dict[str, Any]:
    """What every kind of target is told: the alarm, what its pattern says of its newest match
    (``said``: the alert text, terms.py; ``written``: from the pattern's own message template,
    which then heads the message too), why now, and where to acknowledge it."""
    url = f"{base_url}/alarms/{alarm.id}"
    key = ", ".join(f"?{v} = {value if value is not None else '-'}" for v, value in alarm.key) or "(none)"
    headline = (f"{'Still unacknowledged: ' if reason == REMINDER else ''}{severity} "
                f"{' '.join(said.split()) if said and written else alarm.pattern} on {alarm.gateway}")
    text = "\n".join([
        headline,
        "",
        *([said, ""] if said else []),
        f"Gateway:    {alarm.gateway}",
        f"Pattern:    {alarm.pattern}",
        f"Severity:   {severity}",
        f"Key:        {key}",
        f"First seen: {_iso(alarm.first_seen_ms)}",
        f"Last seen:  {_iso(alarm.last_seen_ms)}",
        f"Matches:    {alarm.count}",
        f"State:      {alarm.state}",
        "",
        f"Acknowledge it on the dashboard: {url}",
        "",
    ])
    return {"event": f"alarm.{reason}", "rule": rule, "subject": f"[edgewave] {headline}", "text": text, "url": url,
            "message": said,
            "alarm": {"id": alarm.id, "gateway": alarm.gateway, "pattern": alarm.pattern, "severity": severity,
                      "state": alarm.state, "key": [{"variable": v, "value": value} for v, value in alarm.key],
                      "count": alarm.count, "first_seen_ms": alarm.first_seen_ms, "last_seen_ms": alarm.last_seen_ms,
                      "first_seen": _iso(alarm.first_seen_ms), "last_seen": _iso(alarm.last_seen_ms)}}


def signature(secret: str, body: bytes) -> str:
    """The value of ``X-Edgewave-Signature``: a receiver recomputes it over the body bytes it got."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff_s(target: NotificationTarget, attempt: int) -> float:
    """How long after failed attempt number ``attempt`` (1-based) the next one is made."""
    return min(target.retry_max_s, target.retry_initial_s * 2 ** (attempt - 1))


# -- delivery, one function per kind ------------------------------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is misconfigured: following it would re-send (or drop) the signed body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def send_webhook(target: NotificationTarget, secret: str, body: bytes, delivery_id: int) -> None:
    """POST the body as it is stored; ``X-Edgewave-Delivery`` stays the same across retries, so a receiver
    that got an attempt whose answer was lost can drop the repeat."""
    request = urllib.request.Request(target.url or "", data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "edgewave-dashboard",
        SIGNATURE_HEADER: signature(secret, body), "X-Edgewave-Delivery": str(delivery_id)})
    opener = urllib.request.build_opener(_NoRedirect(), urllib.request.HTTPSHandler(context=_tls_context(target)))
    try:
        with opener.open(request, timeout=target.timeout_s) as response:
            response.read(65536)
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"HTTP {exc.code}", retry=exc.code >= 500 or exc.code in (408, 429)) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryError(f"{type(reason).__name__}: {reason}",
                            retry=not isinstance(reason, ssl.SSLCertVerificationError)) from None


def _tls_context(target: NotificationTarget) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=target.ca_file)


def send_email(target: NotificationTarget, password: str | None, body: bytes) -> None:
    """One SMTP session per message. With ``tls: starttls`` a server that does not offer STARTTLS is an
    error, never a reason to go on in plain text (that would hand the login and the alarm to anyone on
    the path)."""
    content = json.loads(body)
    mail = EmailMessage()
    mail["Subject"] = " ".join(content["subject"].split())     # a line break in a header would be refused
    mail["From"] = target.sender
    mail["To"] = ", ".join(target.to)
    mail["Date"] = formatdate(localtime=False)
    mail["Message-ID"] = make_msgid(domain="edgewave")
    mail.set_content(content["text"])
    host, port, timeout = target.host or "", target.smtp_port, target.timeout_s
    try:
        if target.tls == "implicit":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=timeout, context=_tls_context(target))
        else:
            smtp = smtplib.SMTP(host, port, timeout=timeout)
        with smtp:
            smtp.ehlo()
            if target.tls == "starttls":
                smtp.starttls(context=_tls_context(target))   # raises SMTPNotSupportedError: no plaintext fallback
                smtp.ehlo()
            if target.user:
                smtp.login(target.user, password or "")
            smtp.send_message(mail)
    except ssl.SSLCertVerificationError as exc:
        raise DeliveryError(f"the SMTP server's certificate: {exc.verify_message}", retry=False) from None
    except smtplib.SMTPNotSupportedError as exc:
        raise DeliveryError(f"the SMTP server offers no STARTTLS: {exc}", retry=False) from None
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        raise DeliveryError(f"recipients refused: {exc.recipients}", retry=all(400 <= c < 500 for c in codes)) \
            from None
    except smtplib.SMTPResponseException as exc:
        text = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        raise DeliveryError(f"SMTP {exc.smtp_code} {text}", retry=400 <= exc.smtp_code < 500) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}", retry=True) from None


def send_mqtt(target: NotificationTarget, settings: CloudSettings, body: bytes) -> None:
    """A connection per message, with the cloud's broker settings: alarms are rare, and a connection kept
    open would need its own reconnect logic for what a fresh one per attempt gets for free."""
    from edgewave.shared.mqtt_client import new_client

    connected = threading.Event()
    result: list[Any] = []
    acked: list[Any] = []

    def on_connect(client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any) -> None:
        result.append(reason_code)
        connected.set()

    client = new_client(settings.broker, f"edgewave-cloud-notify-{uuid.uuid4().hex[:12]}")
    client.on_connect = on_connect
    client.on_publish = lambda c, u, mid, reason_code, properties: acked.append(reason_code)
    client.connect_timeout = target.timeout_s
    try:
        client.connect(settings.broker.host, settings.broker.port, keepalive=settings.broker.keepalive_s)
    except OSError as exc:
        raise DeliveryError(f"broker {settings.broker.host}:{settings.broker.port}: {exc}", retry=True) from None
    client.loop_start()
    try:
        if not connected.wait(target.timeout_s):
            raise DeliveryError("the broker did not answer the connection", retry=True)
        if result[0].is_failure:
            raise DeliveryError(f"the broker refused the connection: {result[0]}", retry=True)
        info = client.publish(target.topic, body, qos=target.qos)
        info.wait_for_publish(target.timeout_s)
        if not info.is_published():
            raise DeliveryError("the broker did not acknowledge the message", retry=True)
        if acked and getattr(acked[0], "is_failure", False):      # MQTT 5: e.g. 0x87, not authorised
            raise DeliveryError(f"the broker refused the message on {target.topic}: {acked[0]}", retry=False)
    except (OSError, RuntimeError, ValueError) as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}", retry=True) from None
    finally:
        client.disconnect()
        client.loop_stop()


# -- the queue and its workers ------------------------------------------------------------------

class Notifier:
    """The rules, the queue in the state file, and one delivery thread per target."""

    def __init__(self, settings: CloudSettings, path: str | Path, terms: GatewayTerms | None = None) -> None:
        self.settings = settings
        self.config = settings.notifications
        self.base_url = settings.dashboard.base_url
        self.terms = terms
        self.path = Path(path)
        self._secrets = self._read_secrets()
        self._lock = threading.Lock()
        self.conn = open_read_write(self.path, synchronous="NORMAL", busy_timeout_s=10.0)
        self.conn.executescript(SCHEMA)
        self._stop = threading.Event()
        self._wake = {name: threading.Event() for name in self.config.targets}
        self._threads: list[threading.Thread] = []
        self._orphans()

    def _orphans(self) -> None:
        """Messages queued for a target since removed from cloud.yaml would wait for ever: fail them, visibly."""
        known = list(self.config.targets)
        with self._lock:
            gone = self.conn.execute(
                f"UPDATE notifications SET state = ?, done_ms = ?, last_error = ? WHERE state = ? "
                f"AND target NOT IN ({', '.join('?' * len(known))})",
                (FAILED, clock.now_ms(), "the target is no longer in notifications.targets", PENDING, *known)).rowcount
        if gone:
            log.warning("notification failed messages=%d reason='their target is no longer configured'", gone)

    def _read_secrets(self) -> dict[str, str | None]:
        """Every target's secret, at start: a missing file stops the dashboard, not the first alarm."""
        out: dict[str, str | None] = {}
        for name, target in self.config.targets.items():
            source = target.secret_file if target.kind == "webhook" else target.password_file
            key = "secret_file" if target.kind == "webhook" else "password_file"
            if not source:
                out[name] = None
                continue
            try:
                out[name] = read_secret(source)
            except (OSError, ValueError) as exc:
                raise SettingsError(f"cannot read {source}: {exc}", key=f"notifications.targets.{name}.{key}") \
                    from exc
        return out

    def start(self) -> "Notifier":
        for name in self.config.targets:
            thread = threading.Thread(target=self._deliver_loop, args=(name,), name=f"notify-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.config.rules or self.config.targets:
            thread = threading.Thread(target=self._schedule_loop, name="notify-schedule", daemon=True)
            thread.start()
            self._threads.append(thread)
            log.info("notifications starting targets=%s rules=%d", ",".join(self.config.targets) or "-",
                     len(self.config.rules))
        return self

    def stop(self) -> None:
        """Stop the threads; one stuck in an attempt is left (a daemon): its message stays queued for next time."""
        self._stop.set()
        for event in self._wake.values():
            event.set()
        deadline = time.monotonic() + STOP_WAIT_S
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    # -- enqueueing: inside the follower's transaction --------------------------------------------

    def on_open(self, conn: Any, alarm_id: int) -> None:
        """The alarm ``alarm_id`` was just opened on ``conn`` (its transaction still open): queue its messages."""
        if not self.config.rules:
            return
        alarm = _alarm_on(conn, alarm_id)
        said, written, severity = self._said(conn, alarm)
        now = clock.now_ms()
        told: set[str] = set()
        for rule in self.config.rules:
            if not self._selects(rule, alarm, severity):
                continue
            for target in rule.targets:
                if target not in told:
                    told.add(target)
                    self._enqueue(conn, alarm, OPENED, rule.name, target, severity, now, said, written)
            if rule.remind_after_s is not None:
                conn.execute("INSERT OR IGNORE INTO notification_reminders (alarm_id, rule, due_ms) VALUES (?, ?, ?)",
                             (alarm.id, rule.name, now + int(rule.remind_after_s * 1000)))

    def _said(self, conn: Any, alarm: Alarm) -> tuple[str | None, bool, str]:
        """The alert text of the alarm's newest match, whether the pattern's author wrote it (a
        message template) or it is made of the match's values, and the alarm's severity:
        cloud.yaml's for the pattern (``notifications.severity``), else the pattern's own
        (``ew:severity`` in the gateway's config document), else "alarm"."""
        naming = self.terms.of(alarm.gateway) if self.terms is not None else None
        severity = (self.config.severity.get(alarm.pattern) or (naming.severity(alarm.pattern) if naming else None)
                    or "alarm")
        row = conn.execute("SELECT item FROM alarm_matches WHERE alarm_id = ? ORDER BY seq DESC LIMIT 1",
                           (alarm.id,)).fetchone()
        if naming is None or row is None:
            return None, False, severity
        item = json.loads(row[0])
        alert = naming.alerts.get(alarm.pattern)
        said = naming.message(alarm.pattern, item.get("bindings") or [], item.get("triples") or [])
        return said, alert is not None and alert.message is not None, severity

    @staticmethod
    def _selects(rule: Any, alarm: Alarm, severity: str) -> bool:
        return ((not rule.gateways or alarm.gateway in rule.gateways)
                and (not rule.patterns or alarm.pattern in rule.patterns)
                and (not rule.severities or severity in rule.severities))

    def _enqueue(self, conn: Any, alarm: Alarm, reason: str, rule: str, target: str, severity: str,
                 now: int, said: str | None = None, written: bool = False) -> None:
        kind = self.config.targets[target].kind
        body = json.dumps(message(alarm, reason, rule, severity, self.base_url, said, written), ensure_ascii=False,
                          separators=(",", ":")).encode()
        recent = conn.execute(
            "SELECT COUNT(*) FROM notifications WHERE gateway = ? AND pattern = ? AND binding_key = ? AND target = ? "
            "AND state != ? AND created_ms > ?", (alarm.gateway, alarm.pattern, alarm.binding_key, target, SUPPRESSED,
                                                 now - int(self.config.per_key_window_s * 1000))).fetchone()[0]
        state = SUPPRESSED if recent >= self.config.max_per_key else PENDING
        conn.execute(
            "INSERT INTO notifications (alarm_id, gateway, pattern, binding_key, reason, rule, target, kind, body, "
            "state, created_ms, next_attempt_ms, done_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (alarm.id, alarm.gateway, alarm.pattern, alarm.binding_key, reason, rule, target, kind, body, state, now,
             now, now if state == SUPPRESSED else None))
        if state == SUPPRESSED:
            log.info("notification suppressed alarm=%d target=%s reason=%s gateway=%s pattern=%s key=%s "
                     "sent_in_window=%d max_per_key=%d", alarm.id, target, reason, alarm.gateway, alarm.pattern,
                     alarm.binding_key, recent, self.config.max_per_key)
        else:
            self._wake[target].set()

    # -- reminders and pruning ----------------------------------------------------------------------

    def _schedule_loop(self) -> None:
        last_prune = 0.0
        while not self._stop.wait(SCHEDULE_S):
            try:
                self.remind_due()
                now = clock.now_ms() / 1000
                if now - last_prune > PRUNE_EVERY_S:
                    last_prune = now
                    self.prune()
            except Exception as exc:    # a locked file: tried again on the next round
                log.error("notification schedule error=%r", str(exc))

    def remind_due(self) -> int:
        """Queue the reminders that fell due for alarms still active; returns how many alarms were reminded of."""
        rules = {rule.name: rule for rule in self.config.rules}
        now = clock.now_ms()
        reminded = 0
        with self._lock:
            conn = self.conn
            due = conn.execute("SELECT alarm_id, rule FROM notification_reminders WHERE due_ms <= ?", (now,)).fetchall()
            if not due:
                return 0
            conn.execute("BEGIN IMMEDIATE")
            try:
                for alarm_id, rule_name in due:
                    conn.execute("DELETE FROM notification_reminders WHERE alarm_id = ? AND rule = ?",
                                 (alarm_id, rule_name))
                    rule = rules.get(rule_name)
                    alarm = _alarm_on(conn, alarm_id)
                    if rule is None or alarm is None or alarm.state != ACTIVE:
                        continue
                    said, written, severity = self._said(conn, alarm)
                    for target in rule.targets:
                        if target in self.config.targets:
                            self._enqueue(conn, alarm, REMINDER, rule.name, target, severity, now, said, written)
                    reminded += 1
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return reminded

    def prune(self) -> int:
        """Forget delivered, failed and suppressed messages older than ``keep_days``."""
        horizon = clock.now_ms() - int(self.config.keep_days * 86_400_000)
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM notification_attempts WHERE notification_id IN (SELECT id FROM notifications "
                             "WHERE state != ? AND done_ms < ?)", (PENDING, horizon))
                gone = conn.execute("DELETE FROM notifications WHERE state != ? AND done_ms < ?",
                                    (PENDING, horizon)).rowcount
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return gone

    # -- delivery -------------------------------------------------------------------------------

    def _deliver_loop(self, name: str) -> None:
        wake = self._wake[name]
        errors = 0
        while not self._stop.is_set():
            try:
                worked = self.deliver_one(name)
            except Exception as exc:    # the state file locked or damaged: logged, tried again
                if self._stop.is_set():  # closed under an attempt that outlived stop(): it is sent again next start
                    return
                errors += 1
                if errors == 1 or errors % 100 == 0:
                    log.error("notification queue error=%r target=%s errors=%d", str(exc), name, errors)
                worked = False
            if not worked:
                wake.wait(POLL_S)
                wake.clear()

    def deliver_one(self, name: str) -> bool:
        """Send the oldest due message for target ``name``; False when none is due."""
        target = self.config.targets[name]
        with self._lock:
            row = self.conn.execute(
                "SELECT id, alarm_id, reason, body, attempts FROM notifications WHERE target = ? AND state = ? "
                "AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT 1",
                (name, PENDING, clock.now_ms())).fetchone()
        if row is None:
            return False
        notification_id, alarm_id, reason, body, attempts = row
        attempt = int(attempts) + 1
        error: DeliveryError | None = None
        try:
            self._send(name, target, bytes(body), int(notification_id))
        except DeliveryError as exc:
            error = exc
        except Exception as exc:        # a bug or an odd library error: a failed attempt, never a dead thread
            error = DeliveryError(f"{type(exc).__name__}: {exc}", retry=True)
        now = clock.now_ms()
        if error is None:
            state, next_ms, done = SENT, now, now
            log.info("notification sent alarm=%d target=%s kind=%s reason=%s attempt=%d id=%d", alarm_id, name,
                     target.kind, reason, attempt, notification_id)
        elif error.retry and attempt < target.max_attempts:
            delay = backoff_s(target, attempt)
            state, next_ms, done = PENDING, now + int(delay * 1000), None
            log.warning("notification failed alarm=%d target=%s kind=%s attempt=%d of=%d retry_in_s=%.1f error=%r",
                        alarm_id, name, target.kind, attempt, target.max_attempts, delay, str(error))
        else:
            state, next_ms, done = FAILED, now, now
            log.error("notification failed alarm=%d target=%s kind=%s attempt=%d of=%d retry_in_s=none error=%r",
                      alarm_id, name, target.kind, attempt, target.max_attempts, str(error))
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("UPDATE notifications SET state = ?, attempts = ?, next_attempt_ms = ?, done_ms = ?, "
                             "last_error = ? WHERE id = ?",
                             (state, attempt, next_ms, done, None if error is None else str(error), notification_id))
                conn.execute("INSERT OR REPLACE INTO notification_attempts (notification_id, attempt, at_ms, ok, "
                             "error) VALUES (?, ?, ?, ?, ?)",
                             (notification_id, attempt, now, int(error is None), None if error is None else str(error)))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return True

    def _send(self, name: str, target: NotificationTarget, body: bytes, notification_id: int) -> None:
        if target.kind == "webhook":
            send_webhook(target, self._secrets[name] or "", body, notification_id)
        elif target.kind == "email":
            send_email(target, self._secrets[name], body)
        else:
            send_mqtt(target, self.settings, body)

    # -- reads ----------------------------------------------------------------------------------

    def for_alarm(self, alarm_id: int) -> list[Notification]:
        """An alarm's notifications, oldest first, each with its attempts."""
        with self._lock:
            rows = self.conn.execute(
                "SELECT id, reason, rule, target, kind, state, attempts, created_ms, next_attempt_ms, done_ms, "
                "last_error FROM notifications WHERE alarm_id = ? ORDER BY id", (alarm_id,)).fetchall()
            tries = self.conn.execute(
                "SELECT a.notification_id, a.attempt, a.at_ms, a.ok, a.error FROM notification_attempts a "
                "JOIN notifications n ON n.id = a.notification_id WHERE n.alarm_id = ? ORDER BY a.notification_id, "
                "a.attempt", (alarm_id,)).fetchall()
        history: dict[int, list[Attempt]] = {}
        for nid, attempt, at_ms, ok, error in tries:
            history.setdefault(int(nid), []).append(Attempt(int(attempt), int(at_ms), bool(ok), error))
        return [Notification(*row, history=history.get(int(row[0]), [])) for row in rows]

    def counts(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """(messages by target and state, attempts by target and outcome), for /metrics."""
        with self._lock:
            states = {(t, s): int(n) for t, s, n in self.conn.execute(
                "SELECT target, state, COUNT(*) FROM notifications GROUP BY 1, 2")}
            attempts = {(t, "ok" if ok else "failed"): int(n) for t, ok, n in self.conn.execute(
                "SELECT n.target, a.ok, COUNT(*) FROM notification_attempts a JOIN notifications n "
                "ON n.id = a.notification_id GROUP BY 1, 2")}
        return states, attempts


def _alarm_on(conn: Any, alarm_id: int) -> Alarm | None:
    row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM alarms WHERE id = ?", (alarm_id,)).fetchone()
    return None if row is None else Alarm(*row)

