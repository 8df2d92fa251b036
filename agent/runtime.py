"""The running agent: wires links, intake, engine, significance, outbox, uplink and status.

Threads and who owns what:

- the engine, the significance filter and the applied config are touched only under
  ``_engine_lock``, one work item (a sensor message, a config document) at a time;
- the *network thread* (``NetworkLoop``) runs the sockets of both brokers. A sensor
  message is handled right there when nothing is queued before it: it is decoded, its
  triples pushed, matches and significant observations turned into events, written to
  the outbox and handed to the uplink, which writes them to the cloud socket from this
  same thread when it is free. No thread hand-over lies on the latency path; with
  CPython's GIL each hand-over can cost milliseconds on a busy gateway (measured: a
  four-thread relay gave p99 37-58 ms at 1,000 completing messages/s, and paho's own
  per-connection threads spent a fifth of the agent's CPU waking each other);
- when work is queued (a burst the engine has not caught up with, a config document from
  the cloud, a rollback), a sensor message queues behind it (``_work``) and the *engine
  thread* (``_work_loop``) handles everything in arrival order; ``_backlog`` counts what
  is queued or being handled, so a message never overtakes an older one. The engine
  thread also lets windows expire while the gateway is idle. It holds the engine lock,
  which the network thread may wait for, so it publishes only with ``publish_soon``;
- the *uplink thread* drains the outbox to the cloud broker whenever the fast path did
  not (backlog, reconnect, acknowledgements; see uplink.py);
- the *status thread* publishes the status message and writes the state file.

Start-up order matters: the outbox and the last applied config are loaded and the
engine built *before* any connection is made, so a restarted gateway matches with the
patterns it had, even while the cloud is unreachable.
"""
from __future__ import annotations

import errno
import gc
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from edgewave.agent.config import AgentSettings, SettingsError
from edgewave.agent.config_store import ConfigStore
from edgewave.agent.engine import Engine, Match
from edgewave.agent.intake import Intake, Rejection
from edgewave.shared.log_limit import LogLimiter
from edgewave.agent.keyring import Keyring
from edgewave.agent.mqtt_link import Ack, MqttLink, Will
from edgewave.agent.network_loop import NetworkLoop
from edgewave.agent.outbox import Outbox
from edgewave.agent.reconfigure import (APPLIED, APPLY_FAILED, NO_KEY, REJECTED, CompiledConfig, Verdict, ack_payload,
                                        apply_difference, build_engine, compile_document, document_limits, judge)
from edgewave.agent.significance import FORWARD, SignificanceFilter, extract_observations
from edgewave.agent.status import (Counters, encode_status, status_document, write_state_file)
from edgewave.agent.uplink import Uplink
from edgewave.shared import topics
from edgewave.shared.configdoc import ConfigRejected, load_config_document
from edgewave.shared.events import encode_event, match_event, significant_event

log = logging.getLogger("edgewave.agent")

_SENSOR, _CONFIG, _RELOAD, _STOP = "sensor", "config", "reload", "stop"
HANDLER_ERROR = "handler_error"   # counter: a work item raised past every check (an engine bug, say)
IDLE_ADVANCE_MS = 500          # with no sensor message for this long, stream time moves on by the clock
DISK_REMINDER_EVERY_S = 60.0   # while the disk refuses events or, at start-up, the files: one reminder a minute
# What a disk that refuses writes reports outside SQLite (which says "disk I/O error" or
# "database or disk is full" for all of these).
DISK_REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS})


def _now_ms() -> int:
    return int(time.time() * 1000)


class Agent:
    """One gateway agent. ``start()`` returns once everything runs; ``stop()`` shuts down gracefully."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.gateway = settings.gateway
        self.counters = Counters()
        self.started_ms = _now_ms()
        self.intake = Intake(settings)
        self.significance = SignificanceFilter(settings.significance)
        self.applied: CompiledConfig | None = None
        self.engine: Engine | None = None          # built in start(), used by the engine thread only
        self._matches: list[Match] = []
        self._engine_stats: dict[str, Any] = {}
        # Work for the engine thread. Sensor messages without an acknowledgement (QoS 0, or
        # no persistent local session) are dropped beyond input.queue_max; the others are
        # bounded by the broker, which sends at most queue_max unacknowledged ones (MQTT 5
        # Receive Maximum), so one is never dropped: dropping it would acknowledge it.
        self._work: queue.Queue[tuple] = queue.Queue()
        self._engine_lock = threading.Lock()
        self._backlog = 0                           # work items queued or being handled
        self._last_arrival_ms = 0
        # Events the disk refused (full, I/O error), oldest first, and the acknowledgements
        # of the sensor messages handled since then (see _store and _write_unwritten).
        self._unwritten: deque[tuple[str, str, bytes]] = deque()
        self._unwritten_bytes = 0
        self._held_acks: list[Ack] = []
        self._unwritten_since = 0.0
        self._unwritten_logged = 0.0
        self._state_file_failing = False
        # One log line per kind a minute (the next one says how many were suppressed):
        # failures of work items, keyed by item and exception type, and config rejections
        # by kind. A stream of bad input must not become a stream of tracebacks.
        self._error_log = LogLimiter(max_lines=20)
        self._config_log = LogLimiter(max_lines=20)
        self._stopping = threading.Event()
        self._status_now = threading.Event()
        self._threads: list[threading.Thread] = []
        self.outbox: Outbox | None = None
        self.store: ConfigStore | None = None
        self.cloud: MqttLink | None = None
        self.local: MqttLink | None = None
        self.uplink: Uplink | None = None
        self._keys: Keyring | None = None           # config-signing keys, on first use

    # -- start-up --------------------------------------------------------------------------
    def start(self) -> None:
        s = self.settings
        self.open_storage()
        gw = self.gateway
        offline = encode_status(status_document(gw, "offline"))
        network = NetworkLoop("network")
        self.cloud = MqttLink(
            "cloud", s.cloud, s.reconnect, client_id=s.cloud.client_id or f"edgewave-{gw}-cloud",
            persistent=True, will=Will(topics.status_topic(gw), offline, qos=1, retain=True),
            subscriptions=[(topics.config_topic(gw), 1)], on_message=self._on_cloud_message,
            on_connected=self._on_cloud_connected, max_inflight=s.outbox.max_inflight, loop=network)
        self.uplink = Uplink(self.outbox, self.cloud, topics.events_topic(gw),
                             max_inflight=s.outbox.max_inflight, max_rate_per_s=s.outbox.max_rate_per_s,
                             resend_after_s=s.outbox.resend_after_s)
        self.cloud.on_published = self.uplink.on_published
        # A persistent local session (local.session_expiry_s > 0): a sensor message is
        # acknowledged only once handled (its events are in the outbox), so one the agent
        # had not handled when it died is delivered again when it comes back.
        keep = s.local.session_expiry_s > 0
        self.local = MqttLink(
            "local", s.local, s.reconnect, client_id=s.local.client_id or f"edgewave-{gw}-local",
            persistent=keep, ack_after_handling=keep, receive_maximum=s.input.queue_max if keep else None,
            subscriptions=[(topics.ALL_SENSOR_INPUT, s.input.qos)], on_message=self._on_sensor_message,
            loop=network)

        self._spawn("engine", self._work_loop)
        self._spawn("status", self._status_loop)
        self.uplink.start()
        self.cloud.start()
        self.local.start()
        log.info("agent event=started gateway=%s config_version=%s patterns=%s data_dir=%s pid=%d",
                 gw, self.applied_version, ",".join(self.applied.patterns) if self.applied else "",
                 s.data_dir, os.getpid())

    def open_storage(self) -> None:
        """The outbox, the config store, and the engine with the last applied config: all
        that comes back before any connection (``start`` runs it first). What is open
        already stays open, so a failed call can be repeated."""
        s = self.settings
        Path(s.data_dir).mkdir(parents=True, exist_ok=True)
        if self.outbox is None:
            self.outbox = Outbox(s.data_path(s.outbox.path), max_bytes=s.outbox.max_bytes,
                                 max_age_s=s.outbox.max_age_s, policy=s.outbox.policy,
                                 synchronous=s.outbox.synchronous)
        if self.store is None:
            self.store = ConfigStore(s.data_path(s.config.store), keep=s.config.keep)
        if self.engine is None:
            self._load_applied_config()

    def wait_for_storage(self, stop: threading.Event) -> bool:
        """``open_storage``, retried every ``status.local_interval_s`` while the disk refuses
        it (full, I/O error, read-only); False if ``stop`` is set first.

        Exiting instead would make a crash loop under systemd, a traceback every few
        seconds, and gain nothing: until the agent connects, the local broker keeps the
        sensor messages for its persistent session, and they arrive once the disk
        recovers. Other errors (a bad bootstrap document, no permission) are raised."""
        failing_since = logged = 0.0
        while True:
            try:
                self.open_storage()
            except (sqlite3.OperationalError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno not in DISK_REFUSALS:
                    raise
                now = time.monotonic()
                if not failing_since:
                    failing_since = logged = now
                    log.error("agent event=storage_unavailable data_dir=%s error=%r action=%r",
                              self.settings.data_dir, str(exc),
                              f"retrying every {self.settings.status.local_interval_s:g} s before connecting; "
                              "the local broker keeps the sensor messages meanwhile")
                elif now - logged >= DISK_REMINDER_EVERY_S:
                    logged = now
                    log.error("agent event=storage_still_unavailable for_s=%.0f error=%r",
                              now - failing_since, str(exc))
                if stop.wait(self.settings.status.local_interval_s):
                    return False
                continue
            if failing_since:
                log.info("agent event=storage_recovered after_s=%.1f", time.monotonic() - failing_since)
            return True

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _load_applied_config(self) -> None:
        """Build the engine from the last applied config (or the bootstrap document)."""
        assert self.store is not None
        s = self.settings
        stored = self.store.current()
        compiled = None
        if stored is not None:
            try:
                compiled = compile_document(stored.version, stored.format, stored.document, s)
            except ConfigRejected as exc:
                log.error("config event=stored_config_unusable version=%s reason=%r action='running without patterns'",
                          stored.version, exc.reason)
        elif s.config.bootstrap:
            text = Path(s.config.bootstrap).read_text()
            fmt = "turtle" if s.config.bootstrap.endswith(".ttl") else "trig"
            limits = document_limits(s)
            version = load_config_document(text, fmt, limits).version or 0
            compiled = compile_document(version, fmt, text, s, limits)   # a broken local file should stop start-up
            self.store.record(version, fmt, text, source="bootstrap")
            log.info("config event=bootstrap path=%s version=%s", s.config.bootstrap, version)
        self.engine = build_engine(compiled, s, self._matches.append)
        self.applied = compiled
        if compiled:
            self.significance.set_rules(compiled.significance)
        self._engine_stats = self.engine.counters()
        log.info("config event=loaded version=%s patterns=%s source=%s", self.applied_version,
                 ",".join(compiled.patterns) if compiled else "", "store" if stored else
                 ("bootstrap" if compiled else "none"))

    @property
    def applied_version(self) -> int | None:
        return self.applied.version if self.applied else None

    # -- the network thread --------------------------------------------------------------------
    def _on_sensor_message(self, topic: str, payload: bytes, retained: bool, ack: Ack | None) -> None:
        """Network thread: handle the message right here unless older work is queued.

        ``ack`` (QoS 1 or 2 on the persistent local session) is called once the message is
        handled, under the engine lock: acknowledgements then leave in arrival order. Only
        a message without one can be dropped (counted) when input.queue_max items wait.

        Nothing may escape into paho: its ``loop_read`` would raise it out of the network
        thread, and both brokers' sockets stop with it. ``_handle`` catches whatever a
        message causes; this catches the rest (a RecursionError before ``_handle`` is
        even entered). Such a message stays unacknowledged: whether its ack went out is
        unknown here, and acknowledging a packet id twice could acknowledge another."""
        try:
            self._take_sensor_message(topic, payload, ack)
        except Exception as exc:
            try:
                self._count_error(_SENSOR, exc)
            except Exception:
                pass

    def _take_sensor_message(self, topic: str, payload: bytes, ack: Ack | None) -> None:
        item = (_SENSOR, topic, payload, _now_ms(), ack)
        with self._engine_lock:
            if not self._backlog:
                self._handle(item)
                self._acknowledge(ack)
                return
            full = ack is None and self._backlog >= self.settings.input.queue_max
            if not full:
                self._backlog += 1
        if not full:
            self._work.put_nowait(item)
            return
        self.counters.add("queue_full")
        if self.counters["queue_full"] % 1000 == 1:
            log.error("input event=queue_full dropped_total=%d queue_max=%d",
                      self.counters["queue_full"], self.settings.input.queue_max)

    def _on_cloud_message(self, topic: str, payload: bytes, retained: bool, ack: Ack | None) -> None:
        """Network thread: queue a config document for the engine thread (nothing escapes
        into paho, see ``_on_sensor_message``)."""
        try:
            if topic == topics.config_topic(self.gateway) and payload:
                self._enqueue((_CONFIG, payload))
        except Exception as exc:
            try:
                self._count_error(_CONFIG, exc)
            except Exception:
                pass

    def _on_cloud_connected(self, session_present: bool) -> None:
        assert self.uplink is not None
        self.uplink.on_connected(session_present)
        self._status_now.set()

    def request_reload(self) -> None:
        """Re-read the config store (after ``edgewave-agent rollback``), on the engine thread."""
        self._enqueue((_RELOAD,))

    def _enqueue(self, item: tuple) -> None:
        """Queue work for the engine thread; never dropped (a config document or a reload)."""
        with self._engine_lock:
            self._backlog += 1
        self._work.put(item)

    # -- the engine thread -----------------------------------------------------------------
    def _work_loop(self) -> None:
        last_stats = 0.0
        while True:
            try:
                item = self._work.get(timeout=0.5)
            except queue.Empty:
                # No queued work, which is the usual case: the network thread handles most
                # messages itself, and each of them moves the engine's clock. Only when none
                # arrived for IDLE_ADVANCE_MS does time move on without triples, so that
                # windows expire. Doing it on every tick took the engine lock for 1-2 ms
                # twice a second under load and made the latency tail (bursts of 5-12 ms
                # at a 0.5 s period, at 1,000 msg/s). Later arrivals are clamped to this
                # time, so the engine's clock never goes back.
                with self._engine_lock:
                    now_ms = _now_ms()
                    if now_ms - self._last_arrival_ms >= IDLE_ADVANCE_MS:
                        self._last_arrival_ms = now_ms
                        self.engine.advance(now_ms)
                    self._engine_stats = self.engine.counters()
                last_stats = time.monotonic()
                continue
            self._work_once(item)
            now = time.monotonic()
            if now - last_stats > 0.5:
                with self._engine_lock:
                    self._engine_stats = self.engine.counters()
                last_stats = now
            if item[0] == _STOP:
                break
        with self._engine_lock:
            self._engine_stats = self.engine.counters()

    def _work_once(self, item: tuple) -> None:
        """One queued item, in turn; only then may a newer message skip the queue."""
        with self._engine_lock:
            self._handle(item)
            if item[0] == _SENSOR:
                self._acknowledge(item[4])
            self._backlog -= 1

    def _acknowledge(self, ack: Ack | None) -> None:
        """A sensor message is handled: acknowledge it, unless events are waiting for the
        disk. Then it waits with them, because acknowledgements leave in arrival order, and
        an unacknowledged message is the broker's to deliver again if the agent dies.
        Caller holds the engine lock."""
        if ack is None:
            return
        if self._unwritten:
            self._held_acks.append(ack)
        else:
            ack()

    def _handle(self, item: tuple) -> None:
        """One work item, under ``_engine_lock``; a failure is counted, logged (once per kind
        a minute, with its traceback) and the agent goes on. The caller acknowledges the
        message either way: redelivering it would only fail again."""
        kind = item[0]
        try:
            if kind == _SENSOR:
                self._handle_sensor(item[1], item[2], item[3])
            elif kind == _CONFIG:
                self._handle_config(item[1])
            elif kind == _RELOAD:
                self._handle_reload()
        except Exception as exc:   # one bad message or document must not stop the agent
            try:
                self._count_error(kind, exc)
            except Exception:      # not even the stack for that call
                pass

    def _count_error(self, kind: str, exc: Exception) -> None:
        """Count a failed work item (``handler_error``) and log it. Called from an ``except``
        block, it must not raise: after a RecursionError little stack may be left, so the
        count is made without a call and a log line that cannot be written is given up."""
        values = self.counters.values
        values[HANDLER_ERROR] = values.get(HANDLER_ERROR, 0) + 1
        try:
            self._log_error(kind, exc)
        except Exception:
            pass

    def _log_error(self, kind: str, exc: Exception) -> None:
        """Log a failed work item, with its traceback, once per item kind and exception type a minute."""
        key = f"{kind}:{type(exc).__name__}"
        if self._error_log.allow(key):
            log.error("engine event=error item=%s error=%r suppressed_since_last=%d action=skipped",
                      kind, f"{type(exc).__name__}: {str(exc)[:200]}", self._error_log.suppressed.pop(key, 0),
                      exc_info=exc)

    def _handle_sensor(self, topic: str, payload: bytes, arrival_ms: int) -> None:
        counters = self.counters
        counters.add("messages_in")
        counters.add("bytes_in", len(payload))
        arrival_ms = max(arrival_ms, self._last_arrival_ms)    # the engine's clock never goes back
        self._last_arrival_ms = arrival_ms
        result = self.intake.decode(topic, payload, arrival_ms)
        if isinstance(result, Rejection):
            counters.add(result.reason)
            return
        counters.add("triples", len(result.triples))
        for triple in result.triples:
            self.engine.push(triple, arrival_ms, stream=result.stream)
        emitted = _now_ms()
        in_matches: set = set()
        stored = self._emit_matches(emitted, in_matches)
        if self.settings.significance.enabled:
            for obs in extract_observations(result.triples):
                if in_matches and any(t in in_matches for t in obs.triples):
                    self.significance.note_forwarded(obs, arrival_ms)
                    continue
                decision = self.significance.decide(obs, arrival_ms)
                if decision == FORWARD:
                    event = significant_event(self.gateway, obs.sensor, obs.property, obs.result,
                                              arrival_ms, obs.triples, emitted)
                    self._store(event, stored)
                    counters.add("significant")
                else:
                    counters.add(decision)
        if stored and self.uplink is not None:
            self.uplink.notify(stored)

    def _emit_matches(self, emitted: int, contributing: set | None = None) -> list[tuple[int, bytes]]:
        """Turn the matches the engine reported since the last call into outbox events;
        returns the ``(seq, payload)`` stored."""
        stored: list[tuple[int, bytes]] = []
        batch = self._matches[:]
        self._matches.clear()
        for m in batch:
            event = match_event(self.gateway, m.pattern, m.bindings, m.start, m.end, m.triples, emitted,
                                entailed=m.entailed)
            if contributing is not None:
                contributing.update(t for t, _ in m.triples)
            self._store(event, stored)
            self.counters.add("matches")
        return stored

    def _store(self, event: dict, stored: list[tuple[int, bytes]]) -> None:
        """Write one event to the outbox; on success append its ``(seq, payload)`` to ``stored``.

        If the disk refuses it (full, I/O error), the event waits in memory, and so does
        every later one, to keep their order, until ``_write_unwritten`` gets them on disk;
        the sensor messages handled meanwhile stay unacknowledged (``_acknowledge``).
        Only beyond ``outbox.unwritten_max_bytes`` is an event dropped (counted, logged).
        """
        assert self.outbox is not None
        payload = encode_event(event)
        if not self._unwritten:
            try:
                seq = self.outbox.append(event["id"], event["kind"], payload)
            except sqlite3.Error as exc:
                self.counters.add("outbox_write_failed")
                self._unwritten_since = self._unwritten_logged = time.monotonic()
                log.error("outbox event=write_failed id=%s kind=%s error=%r action='events wait in memory "
                          "and sensor messages stay unacknowledged until a write succeeds; retried every %ss'",
                          event["id"], event["kind"], str(exc), self.settings.status.local_interval_s)
            else:
                if seq is not None:
                    stored.append((seq, payload))
                return
        if self._unwritten_bytes + len(payload) > self.settings.outbox.unwritten_max_bytes:
            self.counters.add("outbox_unwritten_dropped")
            if self.counters["outbox_unwritten_dropped"] % 1000 == 1:
                log.error("outbox event=unwritten_dropped id=%s kind=%s dropped_total=%d unwritten_max_bytes=%d",
                          event["id"], event["kind"], self.counters["outbox_unwritten_dropped"],
                          self.settings.outbox.unwritten_max_bytes)
            return
        self._unwritten.append((event["id"], event["kind"], payload))
        self._unwritten_bytes += len(payload)

    def _write_unwritten(self) -> None:
        """Retry the events the disk refused, oldest first; once all are on disk, the held
        acknowledgements leave, in order. Caller holds the engine lock."""
        if not self._unwritten:
            return
        assert self.outbox is not None
        stored: list[tuple[int, bytes]] = []
        try:
            while self._unwritten:
                event_id, kind, payload = self._unwritten[0]
                seq = self.outbox.append(event_id, kind, payload)
                self._unwritten.popleft()
                self._unwritten_bytes -= len(payload)
                if seq is not None:
                    stored.append((seq, payload))
        except sqlite3.Error as exc:
            self.counters.add("outbox_write_failed")
            now = time.monotonic()
            if now - self._unwritten_logged >= DISK_REMINDER_EVERY_S:
                self._unwritten_logged = now
                log.error("outbox event=write_still_failing unwritten=%d bytes=%d acks_held=%d for_s=%.0f error=%r",
                          len(self._unwritten), self._unwritten_bytes, len(self._held_acks),
                          now - self._unwritten_since, str(exc))
        if stored and self.uplink is not None:
            self.uplink.notify(stored)
        if self._unwritten:
            return
        held, self._held_acks = self._held_acks, []
        log.warning("outbox event=write_recovered written=%d acks_released=%d after_s=%.1f",
                    len(stored), len(held), time.monotonic() - self._unwritten_since)
        for ack in held:
            ack()

    def _handle_config(self, payload: bytes) -> None:
        assert self.store is not None
        try:
            key, verified = self._keyring().key_for(payload)
        except (SettingsError, OSError) as exc:
            verdict = Verdict(None, REJECTED, f"gateway cannot verify documents: {exc}", kind=NO_KEY)
        else:
            verdict = judge(payload, self.settings, key, self.applied, self.store.high_water())
            if verified and self._keyring().note_verified(key):
                self._status_now.set()
        if verdict.status == APPLIED and not verdict.unchanged:
            assert verdict.config is not None
            previous = self.applied
            try:
                self._swap_in(verdict.config)
            except Exception as exc:   # validated beforehand, so an engine bug: back to known-good
                log.exception("config event=apply_failed version=%s action=rebuilt_previous", verdict.version)
                self._rebuild(previous)
                verdict = Verdict(verdict.version, REJECTED, f"apply failed: {exc}", kind=APPLY_FAILED)
            else:
                try:
                    self.store.record(verdict.config.version, verdict.config.format, verdict.config.document)
                except sqlite3.Error as exc:
                    log.error("config event=not_persisted version=%s error=%r "
                              "consequence='a restart comes back with the previous version'",
                              verdict.version, str(exc))
                    verdict = Verdict(verdict.version, APPLIED, f"applied but not persisted: {exc}",
                                      verdict.config)
        if verdict.status == APPLIED:
            self.counters.add("config_applied")
            log.info("config event=applied version=%s%s", verdict.version,
                     f" note={verdict.reason!r}" if verdict.reason else "")
        else:
            self.counters.add("config_rejected")
            self.counters.add(f"config_rejected_{verdict.kind or 'invalid'}")
            key = verdict.kind or "invalid"
            if self._config_log.allow(key):
                log.warning("config event=rejected version=%s kind=%s reason=%r applied_version=%s "
                            "suppressed_since_last=%d", verdict.version, key, (verdict.reason or "")[:300],
                            self.applied_version, self._config_log.suppressed.pop(key, 0))
        self._ack(verdict)
        self._status_now.set()

    def _swap_in(self, new: CompiledConfig) -> None:
        change = apply_difference(self.engine, self.applied, new)
        self.significance.set_rules(new.significance)
        self.applied = new
        # A new static triple can complete partial matches right away.
        if self._emit_matches(_now_ms()) and self.uplink is not None:
            self.uplink.notify()
        log.info("config event=swapped version=%d added=%s removed=%s kept=%s static_added=%d "
                 "static_removed=%d schema_changed=%s", new.version, ",".join(change.added),
                 ",".join(change.removed), ",".join(change.kept), change.static_added,
                 change.static_removed, change.schema_changed)
        # Removed join nodes and memories reference each other: only a full collection
        # frees them, and ``edgewave-agent run`` makes those rare (see cli.py).
        gc.collect()

    def _rebuild(self, config: CompiledConfig | None) -> None:
        """Last resort after a failed swap: a fresh engine from a known-good config."""
        self.engine = build_engine(config, self.settings, self._matches.append)
        self._matches.clear()
        self.applied = config
        self.significance.set_rules(config.significance if config else [])

    def _handle_reload(self) -> None:
        assert self.store is not None
        stored = self.store.current()
        if stored is None or stored.version == self.applied_version:
            return
        try:
            compiled = compile_document(stored.version, stored.format, stored.document, self.settings)
            self._swap_in(compiled)
            log.info("config event=rolled_back version=%d", stored.version)
        except Exception:
            log.exception("config event=rollback_failed version=%s", stored.version)
        self._status_now.set()

    def _ack(self, verdict: Verdict) -> None:
        if self.cloud is None:
            return
        # publish_soon: this runs under the engine lock, which the network thread may wait for
        payload = ack_payload(self.gateway, verdict, self.applied_version)
        if self._keys is not None:      # which key this gateway now holds (key rotation)
            payload = json.dumps({**json.loads(payload), "keyId": self._keys.active_id}).encode()
        self.cloud.publish_soon(topics.config_ack_topic(self.gateway), payload, qos=1)

    def _keyring(self) -> Keyring:
        """The keys config documents verify with, read from their files on first use."""
        if self._keys is None:
            self._keys = Keyring(self.settings)
        return self._keys

    # -- status ----------------------------------------------------------------------------
    def status(self, state: str = "online") -> dict[str, Any]:
        """The current status document (counters of every part)."""
        counters = self.counters.snapshot()
        stats = self._engine_stats
        counters["entailed"] = int(stats.get("entailed", 0))
        counters["engine_triples_in"] = int(stats.get("triples_in", 0))
        if self.uplink is not None:
            counters["forwarded"] = self.uplink.forwarded
            counters["bytes_forwarded"] = self.uplink.bytes_forwarded
            counters["inflight"] = self.uplink.inflight
        outbox = None
        if self.outbox is not None:
            ob = self.outbox.stats()
            outbox = {"depth": ob.depth, "bytes": ob.bytes, "oldestAgeMs": ob.oldest_age_ms,
                      "dropped": ob.dropped, "droppedFull": ob.dropped_full,
                      "droppedExpired": ob.dropped_expired, "refused": ob.refused,
                      # events the disk refused, waiting in memory, and the sensor messages
                      # left unacknowledged meanwhile (see _store)
                      "unwritten": len(self._unwritten), "unwrittenBytes": self._unwritten_bytes,
                      "acksHeld": len(self._held_acks)}
            counters["dropped"] = (ob.dropped + counters.get("queue_full", 0)
                                   + counters.get("outbox_unwritten_dropped", 0))
        doc = status_document(self.gateway, state, config_version=self.applied_version,
                              counters=counters, outbox=outbox, started_ms=self.started_ms,
                              pid=os.getpid())
        if self._keys is not None:
            doc["configKey"] = self._keys.describe()
        return doc

    def _status_loop(self) -> None:
        """Disk housekeeping and the state file every ``local_interval_s``; the status message
        every ``interval_s`` or when asked. A disk that refuses writes must not silence the
        status message: that is where the operator sees it (``outbox.unwritten``)."""
        s = self.settings.status
        state_path = self.settings.data_path(s.state_file)
        next_publish = 0.0
        next_local = 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            publish = self._status_now.is_set() or now >= next_publish
            if publish or now >= next_local:
                next_local = now + s.local_interval_s
                try:
                    if self._unwritten:
                        with self._engine_lock:
                            self._write_unwritten()
                    if self.outbox is not None:
                        self.outbox.expire()     # an idle gateway must age out old events too
                        self.outbox.checkpoint()
                except sqlite3.Error as exc:
                    log.error("outbox event=housekeeping_failed error=%r", str(exc))
                except Exception:
                    log.exception("status event=error")
                try:
                    doc = self.status()
                    self._save_state(state_path, doc)
                    if publish and self.cloud is not None and self.cloud.connected.is_set():
                        self._status_now.clear()
                        self.cloud.publish_soon(topics.status_topic(self.gateway), encode_status(doc), qos=1,
                                                retain=True)
                        next_publish = now + s.interval_s
                except Exception:
                    log.exception("status event=error")
            self._status_now.wait(timeout=max(0.05, min(next_local, next_publish) - time.monotonic()))

    def _save_state(self, path: Path, doc: dict[str, Any]) -> None:
        """The state file for `edgewave-agent status`; a disk that refuses it is logged once
        per episode and holds up nothing else."""
        try:
            write_state_file(path, doc)
        except OSError as exc:
            if not self._state_file_failing:
                log.error("status event=state_file_failed path=%s error=%r", path, str(exc))
            self._state_file_failing = True
        else:
            self._state_file_failing = False

    # -- shutdown --------------------------------------------------------------------------
    def stop(self) -> None:
        """Graceful: stop intake, drain the engine queue, wait for PUBACKs, say offline, disconnect."""
        if self._stopping.is_set():
            return
        log.info("agent event=stopping queued=%d", self._work.qsize())
        # With a clean local session, anything that arrived after this point would be lost:
        # stop the subscription first. With a persistent one, the queued messages are
        # handled and acknowledged first; what arrives meanwhile queues behind the stop,
        # unacknowledged, and the broker keeps it for the next start.
        keep_session = self.local is not None and self.local.ack_after_handling
        if self.local is not None and not keep_session:
            self.local.stop()
        self._enqueue((_STOP,))
        for thread in self._threads:
            if thread.name == "engine":
                thread.join(timeout=30)
        with self._engine_lock:
            self._write_unwritten()    # a last try: released acknowledgements leave before DISCONNECT
            if self._unwritten:
                log.error("outbox event=unwritten_at_stop events=%d bytes=%d acks_held=%d consequence=%r",
                          len(self._unwritten), self._unwritten_bytes, len(self._held_acks),
                          "not stored; the local broker delivers the unacknowledged sensor messages again "
                          "at the next start" if self._held_acks else "lost (no message to deliver again)")
        if self.local is not None and keep_session:
            self.local.stop()      # its DISCONNECT leaves after the acknowledgements queued before it
        drained = True
        if self.uplink is not None:
            drained = self.uplink.drain(self.settings.shutdown_grace_s)
        self._stopping.set()
        self._status_now.set()
        for thread in self._threads:
            if thread.name == "status":
                thread.join(timeout=5)
        if self.uplink is not None:
            self.uplink.stop()
        final = self.status(state="offline")
        if self.cloud is not None:
            if self.cloud.connected.is_set():
                info = self.cloud.publish(topics.status_topic(self.gateway), encode_status(final), qos=1,
                                          retain=True)
                try:
                    info.wait_for_publish(timeout=2.0)
                except Exception:
                    pass
            self.cloud.stop()
        self._save_state(self.settings.data_path(self.settings.status.state_file), final)
        depth = self.outbox.stats().depth if self.outbox else 0
        if self.outbox is not None:
            self.outbox.close()
        if self.store is not None:
            self.store.close()
        log.info("agent event=stopped drained=%s outbox_pending=%d", drained, depth)
