"""Health: the counters an operator and the cloud look at, and where they are published.

The same snapshot goes to the retained ``ew/<gateway>/status`` message (every
``status.interval_s``, and at once on connect and on config changes) and to a small
JSON state file in the data directory, which ``edgewave-agent status`` prints. The
status lives in memory and travels over MQTT; the file is written only when something in
it changed, at most every ``status.state_file_interval_s`` (a rewrite is a new block on
the gateway's SD card), and at once when the config changes, at start and stop, and when
``edgewave-agent status`` asks for it (SIGUSR1, ``request_state_file``). The Last Will is
the same message with ``state: offline``, so a gateway that vanishes shows as offline.
``StatusReporter`` is the status thread's work: it reads the other parts' figures, never
their locks.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from edgewave.shared import clock, topics
from edgewave.shared.log_limit import LogLimiter

if TYPE_CHECKING:
    from edgewave.agent.config import AgentSettings
    from edgewave.agent.config_apply import ConfigApplier
    from edgewave.agent.mqtt_link import MqttLink
    from edgewave.agent.outbox_writer import OutboxWriter
    from edgewave.agent.pipeline import Pipeline
    from edgewave.agent.uplink import Uplink

log = logging.getLogger("edgewave.agent")

# Every counter, present (at 0) from the start so an operator sees what is counted. Each
# rejection kind has its own: sensor messages by intake reason (agent/intake.py REASONS; a
# mapping's refusals also as payload_rejected.<mapping>.<reason>, made when first counted),
# config documents as config_rejected (all) and config_rejected_<kind>
# (agent/reconfigure.py VERDICT_KINDS), handler_error for a work item that raised
# past every check, and state_* for the window journal.
COUNTER_NAMES = (
    "messages_in", "bytes_in", "malformed", "oversized", "unknown_stream", "quoted_too_deep",
    "too_many_triples", "decoder_error", "unmapped_topic", "payload_rejected", "handler_error", "queue_full",
    "triples", "matches", "significant", "below_deadband", "rate_limited",
    "config_applied", "config_rejected",
    "config_rejected_envelope_oversized", "config_rejected_envelope_malformed", "config_rejected_bad_signature",
    "config_rejected_wrong_gateway", "config_rejected_stale_version", "config_rejected_document_oversized",
    "config_rejected_document_too_deep", "config_rejected_parse_error", "config_rejected_invalid",
    "config_rejected_decoder_error", "config_rejected_no_key", "config_rejected_apply_failed",
    "outbox_write_failed", "outbox_unwritten_dropped",
    # durable windows (window_journal.py)
    "state_restored", "state_replayed_matches", "redelivered_skipped", "state_discarded", "state_clock_unknown",
    "state_truncated", "state_unwritten_dropped",
)


class Counters:
    """Plain integer counters; each one is only ever incremented by one thread."""

    def __init__(self) -> None:
        self.values: dict[str, int] = dict.fromkeys(COUNTER_NAMES, 0)

    def add(self, name: str, n: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + n

    def __getitem__(self, name: str) -> int:
        return self.values.get(name, 0)

    def snapshot(self) -> dict[str, int]:
        return dict(self.values)


class WorkErrors:
    """Work items that raised past every check (an engine bug, say): counted as
    ``handler_error`` and logged with the traceback, once per item kind and exception type
    a minute (the next line says how many were suppressed), so bad input never becomes a
    stream of tracebacks."""

    COUNTER = "handler_error"

    def __init__(self, counters: Counters, limiter: LogLimiter | None = None) -> None:
        self.counters = counters
        self.limiter = limiter or LogLimiter(max_lines=20)

    def count(self, kind: str, exc: BaseException) -> None:
        """Never raises: after a RecursionError little stack may be left, so the count is
        made without a call and a log line that cannot be written is given up."""
        try:
            values = self.counters.values
            values[self.COUNTER] = values.get(self.COUNTER, 0) + 1
            key = f"{kind}:{type(exc).__name__}"
            if self.limiter.allow(key):
                log.error("engine event=error item=%s error=%r suppressed_since_last=%d action=skipped",
                          kind, f"{type(exc).__name__}: {str(exc)[:200]}", self.limiter.suppressed.pop(key, 0),
                          exc_info=exc)
        except Exception:
            pass


def status_document(gateway: str, state: str, *, config_version: int | None = None,
                    counters: dict[str, Any] | None = None, outbox: dict[str, Any] | None = None,
                    started_ms: int | None = None, pid: int | None = None) -> dict[str, Any]:
    """The status message body (JSON)."""
    doc: dict[str, Any] = {"gateway": gateway, "state": state, "configVersion": config_version,
                           "time": clock.now_ms()}
    if started_ms is not None:
        doc["startedAt"] = started_ms
    if pid is not None:
        doc["pid"] = pid
    if counters is not None:
        doc["counters"] = counters
    if outbox is not None:
        doc["outbox"] = outbox
    return doc


def save_offline(settings: AgentSettings, counters: Counters, started_ms: int, config_version: int | None) -> None:
    """The state file of an agent that stops before it connected (no reporter was built):
    ``edgewave-agent status`` shows it offline, not the last run's ``online``."""
    doc = status_document(settings.gateway, "offline", config_version=config_version, counters=counters.snapshot(),
                          started_ms=started_ms, pid=os.getpid())
    path = settings.data_path(settings.status.state_file)
    try:
        write_state_file(path, doc)
    except OSError as exc:
        log.error("status event=state_file_failed path=%s error=%r", path, str(exc))


def encode_status(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def write_state_file(path: Path, doc: dict[str, Any]) -> None:
    """Atomically replace the state file (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    os.replace(tmp, path)


def read_state_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def process_alive(pid: int | None) -> bool:
    """True if ``pid`` runs and (where /proc tells) is an edgewave agent, not a reused pid."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"edgewave" in cmdline.read_bytes()
    except OSError:
        return True   # no /proc (not Linux): trust the pid


def format_status(doc: dict[str, Any], now_ms: int | None = None) -> str:
    """Human-readable lines for ``edgewave-agent status``."""
    now_ms = clock.now_ms() if now_ms is None else now_ms
    alive = process_alive(doc.get("pid"))
    state = doc.get("state", "?")
    if state == "online" and not alive:
        state = "not running (last state file from a process that is gone)"
    age_s = (now_ms - doc.get("time", now_ms)) / 1000
    rows = [("gateway", doc.get("gateway")), ("state", state), ("pid", doc.get("pid")),
            ("config version", doc.get("configVersion")), ("updated", f"{age_s:.1f}s ago")]
    counters = doc.get("counters") or {}
    rows += [(name, counters[name]) for name in sorted(counters)]
    rows += [(f"outbox.{name}", value) for name, value in sorted((doc.get("outbox") or {}).items())]
    lines = [f"{name:<22}{value}" for name, value in rows]
    return "\n".join(lines)


class StatusReporter:
    """Composes the status document from every part's figures, publishes it and writes the state file."""

    def __init__(self, settings: AgentSettings, counters: Counters, *, pipeline: Pipeline, configs: ConfigApplier,
                 writer: OutboxWriter, uplink: Uplink | None = None, cloud: MqttLink | None = None,
                 local: MqttLink | None = None, requested: threading.Event | None = None,
                 started_ms: int | None = None) -> None:
        """``requested`` is set by whoever wants the status out at once (``request``): the
        config applier exists before this reporter and sets it on a config change.
        ``started_ms``: when the process began, not when its storage opened (it may wait)."""
        self.settings = settings
        self.gateway = settings.gateway
        self.counters = counters
        self.started_ms = clock.now_ms() if started_ms is None else started_ms
        self.pipeline = pipeline
        self.configs = configs
        self.writer = writer
        self.uplink = uplink
        self.cloud = cloud
        self.local = local
        self.state_path = settings.data_path(settings.status.state_file)
        self._now = requested if requested is not None else threading.Event()
        self._state_file_failing = False
        self._saved: tuple | None = None        # what the state file holds (``_content``), once written
        self._saved_at = float("-inf")          # when (monotonic)
        self._save_asked = False                # `edgewave-agent status` is waiting for a fresh file

    def request(self) -> None:
        """Publish at the next chance (a connect, a config change, a key rotation)."""
        self._now.set()

    def request_state_file(self) -> None:
        """Write the state file now (``edgewave-agent status`` asks, by SIGUSR1, for a current
        one); safe in a signal handler: it only sets a flag and an event."""
        self._save_asked = True
        self._now.set()

    def document(self, state: str = "online") -> dict[str, Any]:
        """The current status document (counters of every part)."""
        counters = self.counters.snapshot()
        stats = self.pipeline.engine_counters
        counters["entailed"] = int(stats.get("entailed", 0))
        counters["engine_triples_in"] = int(stats.get("triples_in", 0))
        for name in ("instance_queries", "instances_reported", "state_replayed_instances", "late_triples",
                     "absences_fired"):
            counters[name] = int(stats.get(name, 0))
        # sensor messages acknowledged to the local broker once handled (0 without a persistent
        # local session, where the client acknowledges on receipt)
        counters["messages_acknowledged"] = self.local.acknowledged if self.local is not None else 0
        if self.uplink is not None:
            counters["forwarded"] = self.uplink.forwarded
            counters["bytes_forwarded"] = self.uplink.bytes_forwarded
            counters["inflight"] = self.uplink.inflight
            counters["landed"] = self.uplink.landed.landed
            counters["resent"] = self.uplink.landed.resends
            counters["bad_landed_acks"] = self.uplink.bad_landed_acks
        writer = self.writer
        ob = writer.outbox.stats()
        outbox: dict[str, Any] = {"depth": ob.depth, "bytes": ob.bytes, "oldestAgeMs": ob.oldest_age_ms,
                                  "dropped": ob.dropped, "droppedFull": ob.dropped_full,
                                  "droppedExpired": ob.dropped_expired, "refused": ob.refused,
                                  # events the disk refused, waiting in memory, and the sensor messages
                                  # left unacknowledged meanwhile (see outbox_writer.py)
                                  "unwritten": writer.unwritten, "unwrittenBytes": writer.unwritten_bytes,
                                  "acksHeld": writer.acks_held,
                                  # sensor messages waiting for the group's shared commit
                                  "grouped": writer.grouped}
        if self.uplink is not None:
            # sent (the broker's PUBACK came) and not yet landed by ingest; how the uplink
            # deletes: end_to_end, puback (mode off) or older_cloud (auto fell back)
            landed = self.uplink.landed
            age = landed.oldest_age_s()
            outbox.update({"unlanded": landed.events,
                           "oldestUnlandedAgeMs": None if age is None else int(age * 1000),
                           "landedAcks": landed.state()})
        counters["dropped"] = (ob.dropped + counters.get("queue_full", 0)
                               + counters.get("outbox_unwritten_dropped", 0))
        configs = self.configs
        doc = status_document(self.gateway, state, config_version=configs.version,
                              counters=counters, outbox=outbox, started_ms=self.started_ms, pid=os.getpid())
        if self.uplink is not None and self.uplink.landed.state() == "older_cloud":
            doc["warnings"] = ["the cloud does not acknowledge landed events (an older cloud?): events leave "
                               "the outbox on the cloud broker's PUBACK, and a broker crash can lose them"]
        key = configs.key_status()
        if key is not None:
            doc["configKey"] = key
        return doc

    def run(self, stopping: threading.Event, housekeeping: Callable[[], None]) -> None:
        """The status thread: ``housekeeping`` (the disk's) every ``local_interval_s``, the
        state file when due (``save_if_due``); the status message every ``interval_s`` or when
        requested. A disk that refuses writes must not silence the status message: that is
        where the operator sees it (``outbox.unwritten``)."""
        s = self.settings.status
        next_publish = next_local = 0.0
        pending = False          # a status message was asked for and has not gone out yet
        while not stopping.is_set():
            now = time.monotonic()
            requested = self._now.is_set()
            self._now.clear()
            pending = pending or requested
            connected = self.cloud is not None and self.cloud.connected.is_set()
            # Disconnected, a due message waits for the connect (which sets the event) instead
            # of the thread spinning on it: the loop runs every local_interval_s meanwhile.
            publish = connected and (pending or now >= next_publish)
            if publish or requested or now >= next_local:
                next_local = now + s.local_interval_s
                try:
                    housekeeping()
                except Exception:
                    log.exception("status event=error")
                try:
                    doc = self.document()
                    self.save_if_due(doc, now=requested)
                    if publish and self.cloud is not None:
                        pending = False
                        # publish_soon: the network thread may be waiting for a lock held here
                        self.cloud.publish_soon(topics.status_topic(self.gateway), encode_status(doc), qos=1,
                                                retain=True)
                        next_publish = now + s.interval_s
                except Exception:
                    log.exception("status event=error")
            wake = min(next_local, next_publish) if connected else next_local
            self._now.wait(timeout=max(0.05, wake - time.monotonic()))

    def say_offline(self) -> None:
        """At a graceful stop: the final ``offline`` document, published and written."""
        final = self.document(state="offline")
        cloud = self.cloud
        if cloud is not None and cloud.connected.is_set():
            info = cloud.publish(topics.status_topic(self.gateway), encode_status(final), qos=1, retain=True)
            try:
                info.wait_for_publish(timeout=2.0)
            except Exception:
                pass
        self.save(final)

    def save_if_due(self, doc: dict[str, Any], now: bool = False) -> bool:
        """Write the state file if ``now`` (a config change, a connect, a request), or if
        something in it changed and ``state_file_interval_s`` passed since the last write.
        An idle gateway's document changes only in its clock fields, so it is not written
        at all. Returns whether it wrote."""
        content = _content(doc)
        if self._save_asked:
            self._save_asked, now = False, True
        if not now:
            if content == self._saved:
                return False
            if time.monotonic() - self._saved_at < self.settings.status.state_file_interval_s:
                return False
        return self.save(doc, content)

    def save(self, doc: dict[str, Any], content: tuple | None = None) -> bool:
        """The state file for ``edgewave-agent status``, now; a disk that refuses it is logged
        once per episode and holds up nothing else. Returns whether it was written."""
        try:
            write_state_file(self.state_path, doc)
        except OSError as exc:
            if not self._state_file_failing:
                log.error("status event=state_file_failed path=%s error=%r", self.state_path, str(exc))
            self._state_file_failing = True
            return False
        self._state_file_failing = False
        self._saved = _content(doc) if content is None else content
        self._saved_at = time.monotonic()
        return True


# Fields that change with the clock alone: a document that differs only in them is not news.
_CLOCK_FIELDS = frozenset({"time"})
_CLOCK_OUTBOX_FIELDS = frozenset({"oldestAgeMs", "oldestUnlandedAgeMs"})


def _content(doc: dict[str, Any]) -> tuple:
    """What a state file says apart from the clock: compared to skip writing the same again."""
    outbox = doc.get("outbox") or {}
    return (json.dumps({k: v for k, v in doc.items() if k not in _CLOCK_FIELDS and k != "outbox"}, sort_keys=True),
            json.dumps({k: v for k, v in outbox.items() if k not in _CLOCK_OUTBOX_FIELDS}, sort_keys=True))
