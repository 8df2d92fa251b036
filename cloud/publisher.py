"""push-config: validate, sign, version, publish (retained) and wait for the gateway's ack.

A document is checked before anything leaves the cloud, by the check the
agent runs before it applies one (``edgewave.agent.engine.config_check``): it
must parse as TriG/Turtle config and every pattern in it must compile in a
trial engine with the document's schema and static data. A bad document is
refused with the reason the agent would give and never published. A good one
gets the gateway's next version (recorded as a pending push in SQLite), is
signed with the gateway's key and published retained at QoS 1 on
``ew/<gw>/config``, so a gateway that is offline gets it when it reconnects.
push-config then waits for the ack with that version on ``ew/<gw>/config/ack``.
A push that times out stays retained and pending; ingest resolves it when the
ack arrives later.

Each gateway's push is its own: whatever goes wrong for one (no version left to
give it, no signing key, a document whose own ``ew:version`` is not the version
it gets, the broker not taking its publish) is recorded for that gateway with
the reason (``push_failures``; its pending push, if it had one, marked failed),
printed (``gw1: not pushed: <reason>``), and the others are pushed all the same.
"""
from __future__ import annotations

import logging
import queue
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from edgewave.agent.engine.config_check import (CheckedDocument, check_config_document, check_version,
                                                 unprocessable)
from edgewave.shared import clock, topics
from edgewave.shared.configdoc import ConfigRejected, sign_envelope
from edgewave.shared.mqtt_client import new_client

from .database import open_database, transaction
from .registry import (PUSH_TIMEOUT, AckError, PushError, ensure_registry_schema, parse_ack, record_ack,
                       record_push_failure, reserve_version, resolve_push)
from .settings import CloudSettings, SettingsError

log = logging.getLogger(__name__)

EXIT_APPLIED = 0
EXIT_REJECTED = 1
EXIT_INVALID = 2
EXIT_TIMEOUT = 3
EXIT_FAILED = 4      # not pushed to some gateway (its failure recorded; the others were pushed)


class InvalidDocument(ValueError):
    """A config document that must not be published; the message is what the operator needs."""


@dataclass
class PushOutcome:
    gateway: str
    version: int | None
    status: str  # applied | rejected | timeout | invalid | failed
    reason: str = ""

    @property
    def exit_code(self) -> int:
        return {"applied": EXIT_APPLIED, "rejected": EXIT_REJECTED, "timeout": EXIT_TIMEOUT,
                "failed": EXIT_FAILED}.get(self.status, EXIT_INVALID)

    def describe(self) -> str:
        if self.status == "applied":
            return f"{self.gateway}: applied version {self.version}"
        if self.status == "rejected":
            return f"{self.gateway}: rejected version {self.version}: {self.reason}"
        if self.status == "timeout":
            return (f"{self.gateway}: no ack for version {self.version}: {self.reason}")
        if self.status == "failed" and self.version is not None:
            return f"{self.gateway}: not pushed (version {self.version}): {self.reason}"
        return f"{self.gateway}: not pushed: {self.reason}"


def document_format(path: Path, explicit: str | None = None) -> str:
    """trig or turtle, from --format or the file's extension."""
    if explicit:
        return explicit
    suffix = path.suffix.lower()
    if suffix == ".trig":
        return "trig"
    if suffix in (".ttl", ".turtle"):
        return "turtle"
    raise InvalidDocument(f"cannot tell the format of {path.name} (use .trig or .ttl, or --format)")


def validate_document(text: str, fmt: str) -> CheckedDocument:
    """Refuse (InvalidDocument, with the gateway's own reason) what a gateway would refuse to compile.

    The checks are the engine's ``check_config_document``, the ones the agent runs before it
    applies a document, within the agent's default document limits. Only what a gateway alone
    knows is left to it: the streams its sensor input reaches, and its own limits when changed."""
    try:
        return check_config_document(text, fmt)
    except ConfigRejected as exc:
        raise InvalidDocument(exc.reason) from exc
    except Exception as exc:     # what a gateway would ack as unprocessable
        raise InvalidDocument(unprocessable(exc)) from exc


class AckWaiter:
    """An MQTT connection subscribed to a set of gateways' ack topics."""

    def __init__(self, settings: CloudSettings) -> None:
        self.acks: queue.Queue[tuple[str, dict[str, Any] | None, str]] = queue.Queue()
        self.subscribed: queue.Queue[int] = queue.Queue()
        self.connected: queue.Queue[Any] = queue.Queue()
        self.client = new_client(settings.broker, f"edgewave-cloud-push-{uuid.uuid4().hex[:12]}")
        self.client.on_connect = lambda c, u, f, rc, p: self.connected.put(rc)
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self.subscribed.put(mid)
        self.client.on_message = self._on_message
        broker = settings.broker
        self.client.connect(broker.host, broker.port, keepalive=broker.keepalive_s)
        self.client.loop_start()
        rc = self.connected.get(timeout=30)
        if rc.is_failure:
            raise ConnectionError(f"broker {broker.host}:{broker.port} refused the connection: {rc}")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        try:
            self.acks.put((topics.gateway_from_topic(msg.topic), parse_ack(msg.payload), ""))
        except (AckError, topics.TopicError) as exc:
            self.acks.put(("", None, str(exc)))

    def subscribe(self, gateways: list[str], timeout: float = 30.0) -> None:
        result, mid = self.client.subscribe([(topics.config_ack_topic(gw), 1) for gw in gateways])
        deadline = time.monotonic() + timeout
        while True:
            got = self.subscribed.get(timeout=max(0.01, deadline - time.monotonic()))
            if got == mid:
                return

    def publish_retained(self, topic: str, payload: bytes, timeout: float = 30.0) -> None:
        info = self.client.publish(topic, payload, qos=1, retain=True)
        info.wait_for_publish(timeout=timeout)
        if not info.is_published():
            raise ConnectionError(f"broker did not acknowledge the publish on {topic} within {timeout}s")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def push_config(settings: CloudSettings, gateways: list[str], path: Path, *, fmt: str | None = None,
                timeout: float | None = None, out: Callable[[str], None] = print,
                published: Callable[[list[str], list[PushOutcome]], None] | None = None) -> list[PushOutcome]:
    """Push one document to each gateway and wait for all their acks.

    Each gateway on its own: one that cannot be pushed to (no key, no version left, the publish
    refused) gets a ``failed`` outcome, recorded and printed, and the others go on. ``published``
    is told, once every publish is done, which gateways were published to and which failed.
    """
    timeout = settings.push.ack_timeout_s if timeout is None else timeout
    try:
        text = path.read_text(encoding="utf-8-sig")   # a leading byte-order mark is dropped
        fmt = document_format(path, fmt)
        checked = validate_document(text, fmt)
    except (InvalidDocument, OSError, UnicodeDecodeError) as exc:
        reason = f"{path}: {exc}"
        log.error("push refused %s", reason)
        return [PushOutcome(gw, None, "invalid", reason) for gw in gateways]
    keys: dict[str, str] = {}
    outcomes: dict[str, PushOutcome] = {}
    for gw in gateways:
        try:
            keys[gw] = settings.gateway_key(gw)
        except (SettingsError, OSError, UnicodeDecodeError) as exc:
            outcomes[gw] = PushOutcome(gw, None, "failed", str(exc))
    if not keys:       # no gateway can be signed for: nothing is published or recorded (a configuration error)
        log.error("push refused %s", "; ".join(o.reason for o in outcomes.values()))
        return [PushOutcome(gw, None, "invalid", f"{path}: {outcomes[gw].reason}") for gw in gateways]
    log.info("push validated file=%s format=%s patterns=%d gateways=%s", path, fmt, len(checked.patterns),
             ",".join(gateways))

    db = open_database(settings.database)
    try:
        ensure_registry_schema(db)
        waiter = AckWaiter(settings)
    except BaseException:
        db.conn.close()
        raise
    try:
        for outcome in list(outcomes.values()):
            _failed(db, outcome, out)
        waiter.subscribe([gw for gw in gateways if gw in keys])
        pending: dict[str, int] = {}
        for gw in gateways:
            if gw not in keys:
                continue
            version: int | None = None
            try:
                version = reserve_version(db, gw, fmt, text, clock.now_ms())
                check_version(checked.document.version, version)   # the gateway would refuse another
                waiter.publish_retained(topics.config_topic(gw), sign_envelope(gw, version, text, fmt, keys[gw]))
            except Exception as exc:   # this gateway's push alone fails; the others go on
                reason = str(exc) if isinstance(exc, (PushError, ConnectionError, ConfigRejected)) else \
                    f"{type(exc).__name__}: {exc}"
                outcomes[gw] = PushOutcome(gw, version, "failed", reason)
                _failed(db, outcomes[gw], out)
                continue
            pending[gw] = version
            log.info("push published gateway=%s version=%d topic=%s", gw, version, topics.config_topic(gw))
        if published is not None:
            published(list(pending), [o for o in outcomes.values() if o.status == "failed"])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            try:
                gw, ack, problem = waiter.acks.get(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if ack is None:
                log.warning("push ignored malformed ack: %s", problem)
                continue
            now_ms = clock.now_ms()
            with transaction(db) as conn:
                record_ack(conn, gw, ack, now_ms)
            if pending.get(gw) != ack["version"]:
                log.info("push ignored ack for another version gateway=%s version=%s", gw, ack["version"])
                continue
            outcomes[gw] = PushOutcome(gw, pending.pop(gw), ack["status"], ack["reason"])
            out(outcomes[gw].describe())
        for gw, version in pending.items():
            reason = (f"timed out after {timeout:g}s; the config stays retained on {topics.config_topic(gw)} "
                      f"and the gateway applies it when it next connects")
            resolve_push(db, gw, version, PUSH_TIMEOUT, reason, clock.now_ms())
            outcomes[gw] = PushOutcome(gw, version, "timeout", reason)
            out(outcomes[gw].describe())
        return [outcomes[gw] for gw in gateways]
    finally:
        waiter.close()
        db.conn.close()


def _failed(db: Any, outcome: PushOutcome, out: Callable[[str], None]) -> None:
    """Record, log and print one gateway's failed push."""
    log.error("push failed gateway=%s version=%s reason=%r", outcome.gateway, outcome.version, outcome.reason)
    try:
        record_push_failure(db, outcome.gateway, outcome.reason, clock.now_ms(), outcome.version)
    except Exception as exc:     # the database refusing too: the line printed still names it
        log.error("push failure not recorded gateway=%s error=%r", outcome.gateway, str(exc))
    out(outcome.describe())



def exit_code(outcomes: list[PushOutcome]) -> int:
    """0 if every gateway applied; otherwise the worst outcome's code."""
    return max((o.exit_code for o in outcomes), default=EXIT_INVALID)

