"""The running agent: its threads, the engine lock, start-up and shutdown.

The work runs elsewhere, in one direction: a sensor message goes through the pipeline
(pipeline.py: intake, engine, events, significance), its events into the outbox
(outbox_writer.py), just-stored ones to the uplink (uplink.py), and then the message's
acknowledgement, once the writer releases it. Config documents go through
config_apply.py, the status through status.py. Threads and who owns what:

- the pipeline, the applied config, the window journal and the outbox writer are touched
  only under ``_engine_lock``, one work item (a sensor message, a config document, a
  reload) at a time;
- the *network thread* (``NetworkLoop``) runs both brokers' sockets. A sensor message is
  handled right there when nothing is queued before it, and its events are written to
  the cloud socket from this same thread. No thread hand-over lies on the latency path:
  under CPython's GIL each can cost milliseconds (measured: a four-thread relay gave p99
  37-58 ms at 1,000 completing messages/s);
- behind queued work (a burst, a config document, a rollback) a sensor message queues
  too (``_work``) and the *engine thread* handles everything in arrival order;
  ``_backlog`` counts what is queued or being handled, so no message overtakes an older
  one. It holds the engine lock, which the network thread may wait for, so it publishes
  only with ``publish_soon``. It also lets windows expire while the gateway is idle
  (and deletes the window journal's expired rows then);
- the *uplink thread* times the handling of PUBACKs and landed acknowledgements, re-sends
  and the backlog (uplink.py); the *status
  thread* publishes the status and retries the events the disk refused; the outbox's
  *checkpoint thread* copies its WAL into the file (outbox_checkpoint.py).

Start-up order matters: the outbox and the last applied config are loaded, the engine
built and its windows restored from the journal (window_journal.py) *before* any
connection, so a restarted gateway matches with the patterns and windows it had. Each
part is built once, by the agent, with the parts it uses: the outbox, then the journal
in its file, then the writer of both (``open_storage``); the links, the uplink and the
status reporter once the agent connects (``start``).
"""
from __future__ import annotations

import logging
import os
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple, Union

from edgewave.agent.agent_clock import CLOCK
from edgewave.agent.config import AgentSettings
from edgewave.agent.config_apply import ConfigApplier
from edgewave.agent.config_store import ConfigStore
from edgewave.agent.links import cloud_link, local_link, sensor_subscriptions
from edgewave.agent.mqtt_link import Ack, MqttLink
from edgewave.agent.network_loop import NetworkLoop
from edgewave.agent.outbox import Outbox
from edgewave.agent.outbox_writer import OutboxWriter, Written
from edgewave.agent.pipeline import Pipeline
from edgewave.agent.status import Counters, StatusReporter, WorkErrors, save_offline
from edgewave.agent.storage import wait_for_storage
from edgewave.agent.uplink import Uplink
from edgewave.agent.window_journal import WindowJournal
from edgewave.shared import clock, topics

log = logging.getLogger("edgewave.agent")

_now_ms = CLOCK.wall_ms      # stream time: the wall clock (tests may shift it, agent_clock.py)


# Work for the engine thread, handled in arrival order. ``kind`` names the item in the
# error count and log (status.py, WorkErrors).
class SensorMessage(NamedTuple):
    """A sensor's message as it arrived; ``ack`` (persistent local session) is not sent yet."""

    topic: str
    payload: bytes
    arrival_ms: int
    ack: Ack | None
    kind = "sensor"


class ConfigDocument(NamedTuple):
    """A signed config envelope from the cloud broker."""

    payload: bytes
    kind = "config"


class Reload(NamedTuple):
    """Re-read the config store (after ``edgewave-agent rollback``)."""

    kind = "reload"


class Stop(NamedTuple):
    """The last item: the engine thread ends after it."""

    kind = "stop"


WorkItem = Union[SensorMessage, ConfigDocument, Reload, Stop]


class Agent:
    """One gateway agent. ``start()`` returns once everything runs; ``stop()`` shuts down gracefully."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.gateway = settings.gateway
        self._landed_topic = topics.landed_topic(settings.gateway)
        self._started_ms = clock.now_ms()
        self.counters = Counters()
        self.pipeline = Pipeline(settings, self.counters)
        self._status_requested = threading.Event()   # the status goes out at once (StatusReporter)
        # Work for the engine thread. Sensor messages without an acknowledgement (QoS 0, or
        # no persistent local session) are dropped beyond input.queue_max; the others are
        # bounded by the broker, which sends at most queue_max unacknowledged ones (MQTT 5
        # Receive Maximum), so one is never dropped: dropping it would acknowledge it.
        self._work: queue.Queue[WorkItem] = queue.Queue()
        self._engine_lock = threading.Lock()
        self._backlog = 0                           # work items queued or being handled
        self._errors = WorkErrors(self.counters)
        self._stopping = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        # open_storage builds these, in this order:
        self.outbox: Outbox | None = None
        self.configs: ConfigApplier | None = None
        self.journal: WindowJournal | None = None
        self.writer: OutboxWriter | None = None
        # and start these:
        self.cloud: MqttLink | None = None
        self.uplink: Uplink | None = None
        self.reporter: StatusReporter | None = None
        self.local: MqttLink | None = None

    # -- start-up --------------------------------------------------------------------------
    def start(self) -> None:
        s, gw = self.settings, self.gateway
        self.open_storage()
        assert self.outbox is not None and self.configs is not None and self.writer is not None
        network = NetworkLoop("network")
        self.cloud = cloud_link(s, network, self._on_cloud_message, self._on_cloud_connected,
                                self._on_cloud_published)
        self.uplink = Uplink(self.outbox, self.cloud, topics.events_topic(gw),
                             max_inflight=s.outbox.max_inflight, max_rate_per_s=s.outbox.max_rate_per_s,
                             resend_after_s=s.outbox.resend_after_s, batch=s.uplink.batch,
                             landed=s.uplink.landed)
        self.local = local_link(s, network, self._on_sensor_message,    # its session: see links.py
                                self.configs.applied)
        reporter = self.reporter = StatusReporter(s, self.counters, pipeline=self.pipeline, configs=self.configs,
                                                  writer=self.writer, uplink=self.uplink, cloud=self.cloud,
                                                  local=self.local, requested=self._status_requested,
                                                  started_ms=self._started_ms)
        self._spawn("engine", self._work_loop)
        self._spawn("status", lambda: reporter.run(self._stopping, self._housekeeping))
        for part in (self.uplink, self.cloud, self.local):
            part.start()
        applied = self.configs.applied
        log.info("agent event=started gateway=%s config_version=%s patterns=%s data_dir=%s pid=%d",
                 gw, self.configs.version, ",".join(applied.patterns) if applied else "", s.data_dir, os.getpid())

    def open_storage(self) -> None:
        """The outbox, the config store, the engine with the last applied config, and its
        windows from the journal: all that comes back before any connection (``start`` runs
        it first). What is open already stays open, so a failed call can be repeated."""
        s = self.settings
        Path(s.data_dir).mkdir(parents=True, exist_ok=True)
        if self.outbox is None:
            outbox = Outbox(s.data_path(s.outbox.path), max_bytes=s.outbox.max_bytes, max_age_s=s.outbox.max_age_s,
                            policy=s.outbox.policy, synchronous=s.outbox.synchronous,
                            checkpoint_every_s=s.outbox.checkpoint_interval_s)
            outbox.start_checkpoints()
            self.outbox = outbox
        if self.configs is None:
            self.configs = ConfigApplier(s, self.counters, self.pipeline,
                                         ConfigStore(s.data_path(s.config.store), keep=s.config.keep),
                                         on_change=self._status_requested.set, send_ack=self._send_config_ack)
        if self.pipeline.engine is None:
            self.configs.load()
        if self.journal is None:
            journal = WindowJournal(self.outbox, s, self.counters, stream_ms=self.pipeline.stream_ms)
            journal.follow(self.configs.applied, self.pipeline.engine)
            journal.restore(self.pipeline)
            self.journal = journal
            self.writer = OutboxWriter(self.outbox, journal, s, self.counters)

    def wait_for_storage(self, stop: threading.Event) -> bool:
        """``open_storage``, retried while the disk refuses it (storage.py); False if ``stop`` is set first."""
        return wait_for_storage(self.open_storage, stop, self.settings.status.local_interval_s,
                                self.settings.data_dir)

    def _spawn(self, name: str, target: Callable[[], Any]) -> None:
        (thread := threading.Thread(target=target, name=name, daemon=True)).start()
        self._threads[name] = thread

    # -- the network thread --------------------------------------------------------------------
    def _on_sensor_message(self, topic: str, payload: bytes, retained: bool, ack: Ack | None) -> None:
        """Network thread: handle the message here unless older work is queued. ``ack`` (QoS 1
        or 2, persistent local session) goes once the writer releases it, under the engine
        lock, so acknowledgements leave in arrival order; only a message without one can be
        dropped (counted) when input.queue_max items wait. Nothing may escape into paho (it
        would stop the network thread and both brokers' sockets): what ``_handle`` does not
        catch is counted here, and that message stays unacknowledged, since whether its ack
        went out is unknown and a packet id acknowledged twice could acknowledge another."""
        try:
            item = SensorMessage(topic, payload, _now_ms(), ack)
            with self._engine_lock:
                if not self._backlog:
                    self._handle(item)
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
        except Exception as exc:
            self._errors.count(SensorMessage.kind, exc)

    def _on_cloud_message(self, topic: str, payload: bytes, retained: bool, ack: Ack | None) -> None:
        """Network thread: hand ingest's landed acknowledgements to the uplink, queue a config
        document for the engine thread (nothing escapes into paho, see ``_on_sensor_message``)."""
        try:
            if topic == self._landed_topic and self.uplink is not None:
                self.uplink.on_landed(payload)
            elif topic == topics.config_topic(self.gateway) and payload:
                self._enqueue(ConfigDocument(payload))
        except Exception as exc:
            self._errors.count(ConfigDocument.kind, exc)

    def _on_cloud_published(self, mid: int, reason: int) -> None:
        """Network thread: a PUBACK, for the uplink (which exists before the link connects)."""
        if self.uplink is not None:
            self.uplink.on_published(mid, reason)

    def _send_config_ack(self, payload: bytes) -> None:
        """A config acknowledgement to the cloud. publish_soon: this runs under the engine
        lock, which the network thread may wait for."""
        if self.cloud is not None:
            self.cloud.publish_soon(topics.config_ack_topic(self.gateway), payload, qos=1)

    def _on_cloud_connected(self, session_present: bool) -> None:
        assert self.uplink is not None and self.configs is not None
        self.uplink.on_connected(session_present)
        self.configs.resend_ack()
        self._status_requested.set()

    def request_state_file(self) -> None:
        """Write the state file now (``edgewave-agent status`` asks, by SIGUSR1); signal-safe."""
        if self.reporter is not None:
            self.reporter.request_state_file()

    def request_reload(self) -> None:
        """Re-read the config store (after ``edgewave-agent rollback``), on the engine thread."""
        self._enqueue(Reload())

    def _enqueue(self, item: WorkItem) -> None:
        """Queue work for the engine thread; never dropped (a config document or a reload)."""
        with self._engine_lock:
            self._backlog += 1
        self._work.put(item)

    # -- the engine thread -----------------------------------------------------------------
    def _work_loop(self) -> None:
        assert self.writer is not None
        last_stats = 0.0
        while True:
            try:
                item = self._work.get(timeout=self.writer.poll_s)
            except queue.Empty:
                self._idle()
                last_stats = time.monotonic()
                continue
            self._work_once(item)
            if isinstance(item, Stop) or time.monotonic() - last_stats > 0.5:
                with self._engine_lock:
                    self.pipeline.read_engine_counters()
                last_stats = time.monotonic()
            if isinstance(item, Stop):
                break

    def _idle(self) -> None:
        """No queued work, the usual case: the network thread handles most messages itself
        (each moves the engine's clock, see Pipeline.idle); a group of journal rows, or the
        journal's expired rows, may be due (outbox_writer.py)."""
        assert self.writer is not None and self.journal is not None
        with self._engine_lock:
            idled = self.pipeline.idle(_now_ms())
            if idled.events:    # what the clock closed or fired: stored with how far it goes
                if idled.reported_through >= 0:
                    self.journal.note_reported(idled.reported_through)
                if idled.fired_through >= 0:
                    self.journal.note_fired(idled.fired_through)
                self._to_uplink(self.writer.write(idled.events, None))
            self._release_written(self.writer.flush_due())

    def _work_once(self, item: WorkItem) -> None:
        """One queued item, in turn; only then may a newer message skip the queue."""
        with self._engine_lock:
            try:
                self._handle(item)
            finally:
                self._backlog -= 1

    def _handle(self, item: WorkItem) -> None:
        """One work item, under ``_engine_lock``. A failure is counted and logged; a sensor
        message is acknowledged either way (it would fail again), once the writer releases it."""
        assert self.writer is not None
        if isinstance(item, Stop):
            return
        acks: tuple[Ack, ...] = () if not isinstance(item, SensorMessage) or item.ack is None else (item.ack,)
        try:
            if isinstance(item, SensorMessage):
                acks = self._handle_message(item)
            else:
                self._apply_config(item)
        except Exception as exc:   # one bad message or document must not stop the agent
            self._errors.count(item.kind, exc)
        for ack in self.writer.release(acks):
            ack()

    def _handle_message(self, message: SensorMessage) -> tuple[Ack, ...]:
        """In one direction: pipeline -> the journal row of what entered the engine -> the
        outbox writer (the events and the row in one transaction) -> the uplink. Returns the
        acknowledgements that may go once the writer releases them."""
        journal, writer = self.journal, self.writer
        assert journal is not None and writer is not None
        topic, payload = message.topic, message.payload
        if journal.redelivered(topic, payload, message.ack):     # the restored windows hold it already
            return () if message.ack is None else (message.ack,)
        handled = self.pipeline.handle(topic, payload, message.arrival_ms, message.ack)
        row = journal.entry(topic, payload, handled.entered)
        if handled.events or row is not None:
            self._to_uplink(writer.write(handled.events, row))
        return handled.acks

    def _apply_config(self, item: ConfigDocument | Reload) -> None:
        """A config document or a reload; the events of the matches the change completed go the
        way of a message's. The journal follows the config then running, whatever happened: a
        change empties it, with this item's transaction."""
        journal, writer, configs = self.journal, self.writer, self.configs
        assert journal is not None and writer is not None and configs is not None
        try:
            events = configs.apply_pushed(item.payload) if isinstance(item, ConfigDocument) else configs.reload()
        finally:
            journal.follow(configs.applied, self.pipeline.engine)
            if self.local is not None:        # the mappings' topic filters follow the document
                self.local.set_subscriptions(sensor_subscriptions(self.settings, configs.applied))
        self._to_uplink(writer.write(events, None))

    def _to_uplink(self, fresh: list[tuple[int, bytes]]) -> None:
        """Events on disk now: to the uplink, published at once if nothing older waits."""
        if fresh and self.uplink is not None:
            self.uplink.notify(fresh)

    def _housekeeping(self) -> None:
        """Status thread: retry the events the disk refused (under the engine lock, so the
        released acknowledgements keep their order), then age out and checkpoint the outbox."""
        writer = self.writer
        assert writer is not None
        try:
            if writer.unwritten:
                with self._engine_lock:
                    self._release_written(writer.retry())
            writer.maintain()
        except sqlite3.Error as exc:
            log.error("outbox event=housekeeping_failed error=%r", str(exc))

    def _release_written(self, written: Written) -> None:
        if written.rows and self.uplink is not None:
            self.uplink.notify(written.rows)
        for ack in written.acks:
            ack()

    def status(self, state: str = "online") -> dict[str, Any]:
        """The current status document (counters of every part), once started."""
        assert self.reporter is not None
        return self.reporter.document(state)

    # -- shutdown --------------------------------------------------------------------------
    def stop(self) -> None:
        """Graceful: stop intake, drain the engine queue, wait for the events to land, say offline, disconnect.

        With a clean local session, what arrived after this point would be lost: the
        subscription stops first. With a persistent one, the queued messages are handled and
        acknowledged first; what arrives meanwhile stays unacknowledged with the broker."""
        if self._stopping.is_set():
            return
        log.info("agent event=stopping queued=%d", self._work.qsize())
        keep_session = self.local is not None and self.local.ack_after_handling
        if self.local is not None and not keep_session:
            self.local.stop()
        self._enqueue(Stop())
        if "engine" in self._threads:
            self._threads["engine"].join(timeout=30)
        if self.writer is not None:
            with self._engine_lock:   # a last try: released acknowledgements leave before DISCONNECT
                self._release_written(self.writer.retry_at_stop())
        if self.local is not None and keep_session:
            self.local.stop()      # its DISCONNECT leaves after the acknowledgements queued before it
        drained = self.uplink.drain(self.settings.shutdown_grace_s) if self.uplink is not None else True
        self._stopping.set()
        self._status_requested.set()
        if "status" in self._threads:
            self._threads["status"].join(timeout=5)
        if self.uplink is not None:
            self.uplink.stop()
        if self.reporter is not None:
            self.reporter.say_offline()
        else:                      # never connected (the disk refused, or start-up failed)
            save_offline(self.settings, self.counters, self._started_ms,
                         self.configs.version if self.configs else None)
        if self.cloud is not None:
            self.cloud.stop()
        depth = self.outbox.stats().depth if self.outbox else 0
        if self.outbox is not None:
            self.outbox.close()
        if self.configs is not None:
            self.configs.store.close()
        log.info("agent event=stopped drained=%s outbox_pending=%d", drained, depth)
