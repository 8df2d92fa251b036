"""Config application: which config the engine runs, and how pushed documents and rollbacks change it.

At start-up the engine is built from the last applied document in the config store (or
``config.bootstrap``), before any connection. Afterwards, on the engine thread and
under the engine lock: a pushed document is judged (reconfigure.py: signature, version,
syntax, a trial build), swapped into the running engine by difference, recorded in the
store and acknowledged to the cloud; a rollback (``edgewave-agent rollback``, then
SIGHUP) swaps in the store's current document. A swap that fails despite the checks
rebuilds the engine from the previous, known-good config.

A swap's new static triples can complete matches at once: their events are returned,
for the caller to store like any other.
"""
from __future__ import annotations

import gc
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any, Callable, Sequence

from edgewave.agent.config import AgentSettings, SettingsError
from edgewave.agent.config_store import ConfigStore
from edgewave.agent.keyring import Keyring
from edgewave.agent.pipeline import Event, Pipeline
from edgewave.agent.reconfigure import (APPLIED, APPLY_FAILED, NO_KEY, REJECTED, CompiledConfig, Verdict, ack_payload,
                                        compile_document, document_limits, judge)
from edgewave.agent.status import Counters
from edgewave.agent.document_reader import parsed_from, read_document, reading_tag
from edgewave.shared.configdoc import ConfigRejected
from edgewave.shared.log_limit import LogLimiter

log = logging.getLogger("edgewave.agent")


class ConfigApplier:
    """Holds the applied config and changes the pipeline's engine to pushed or rolled-back ones."""

    def __init__(self, settings: AgentSettings, counters: Counters, pipeline: Pipeline, store: ConfigStore, *,
                 on_change: Callable[[], None], send_ack: Callable[[bytes], None]) -> None:
        """``send_ack`` publishes an acknowledgement to the cloud (the agent's cloud link, which
        exists from start-up on); ``on_change``: the status message should go out."""
        self.settings = settings
        self.gateway = settings.gateway
        self.counters = counters
        self.pipeline = pipeline
        self.store = store
        self.on_change = on_change
        self.send_ack = send_ack
        self.applied: CompiledConfig | None = None
        self._last_ack: bytes | None = None     # sent again after a reconnect
        self._keys: Keyring | None = None       # config-signing keys, on first use
        # One log line per rejection kind a minute: a stream of bad documents must not
        # become a stream of log lines.
        self._log = LogLimiter(max_lines=20)

    @property
    def version(self) -> int | None:
        return self.applied.version if self.applied else None

    def key_status(self) -> dict[str, Any] | None:
        """Which keys verify documents now (for the status), once they have been read."""
        return self._keys.describe() if self._keys is not None else None

    def load(self) -> None:
        """Build the pipeline's engine from the last applied config (or the bootstrap document)."""
        s = self.settings
        stored = self.store.current()
        compiled = None
        reading = "none"            # for the log: the store's kept reading, or the document read
        if stored is not None:
            kept = parsed_from(stored.reading, stored.reading_by)
            reading = "kept" if kept is not None else "read"
            try:
                compiled = compile_document(stored.version, stored.format, stored.document, s, parsed=kept)
            except ConfigRejected as exc:
                log.error("config event=stored_config_unusable version=%s reason=%r action='running without patterns'",
                          stored.version, exc.reason)
        elif s.config.bootstrap:
            text = Path(s.config.bootstrap).read_text()
            fmt = "turtle" if s.config.bootstrap.endswith(".ttl") else "trig"
            limits = document_limits(s)
            parsed = read_document(text, fmt, limits)   # a broken local file should stop start-up
            reading = "read"
            version = parsed.document.version or 0
            compiled = compile_document(version, fmt, text, s, limits, parsed)
            self.store.record(version, fmt, text, source="bootstrap", reading=compiled.reading,
                              reading_by=reading_tag())
            log.info("config event=bootstrap path=%s version=%s", s.config.bootstrap, version)
        self.pipeline.rebuild(compiled)
        self.applied = compiled
        log.info("config event=loaded version=%s patterns=%s source=%s reading=%s", self.version,
                 ",".join(compiled.patterns) if compiled else "", "store" if stored else
                 ("bootstrap" if compiled else "none"), reading)

    def apply_pushed(self, payload: bytes) -> Sequence[Event]:
        """Judge a document from the cloud, apply it if it passes, acknowledge it either way;
        returns the events of the matches the change completed."""
        events: Sequence[Event] = ()
        try:
            key, verified = self._keyring().key_for(payload)
        except (SettingsError, OSError) as exc:
            verdict = Verdict(None, REJECTED, f"gateway cannot verify documents: {exc}", kind=NO_KEY)
        else:
            verdict = judge(payload, self.settings, key, self.applied, self.store.high_water())
            if verified and self._keyring().note_verified(key):
                self.on_change()
        if verdict.status == APPLIED and not verdict.unchanged:
            assert verdict.config is not None
            previous = self.applied
            try:
                events = self._swap_in(verdict.config)
            except Exception as exc:   # validated beforehand, so an engine bug: back to known-good
                log.exception("config event=apply_failed version=%s action=rebuilt_previous", verdict.version)
                self.pipeline.rebuild(previous)
                self.applied = previous
                verdict = Verdict(verdict.version, REJECTED, f"apply failed: {exc}", kind=APPLY_FAILED)
            else:
                try:
                    config = verdict.config
                    self.store.record(config.version, config.format, config.document, reading=config.reading,
                                      reading_by=reading_tag())
                except sqlite3.Error as exc:
                    log.error("config event=not_persisted version=%s error=%r "
                              "consequence='a restart comes back with the previous version'",
                              verdict.version, str(exc))
                    verdict = Verdict(verdict.version, APPLIED, f"applied but not persisted: {exc}",
                                      verdict.config)
        self._count(verdict)
        self._ack(verdict)
        self.on_change()
        return events

    def reload(self) -> Sequence[Event]:
        """Apply the store's current document if it is not the running one (after a rollback)."""
        stored = self.store.current()
        if stored is None or stored.version == self.version:
            return ()
        events: Sequence[Event] = ()
        try:
            compiled = compile_document(stored.version, stored.format, stored.document, self.settings,
                                        parsed=parsed_from(stored.reading, stored.reading_by))
            events = self._swap_in(compiled)
            log.info("config event=rolled_back version=%d", stored.version)
        except Exception:
            log.exception("config event=rollback_failed version=%s", stored.version)
        self.on_change()
        return events

    def _swap_in(self, new: CompiledConfig) -> Sequence[Event]:
        change, events = self.pipeline.reconfigure(self.applied, new)
        self.applied = new
        log.info("config event=swapped version=%d added=%s removed=%s kept=%s static_added=%d "
                 "static_removed=%d schema_changed=%s", new.version, ",".join(change.added),
                 ",".join(change.removed), ",".join(change.kept), change.static_added,
                 change.static_removed, change.schema_changed)
        # Removed join nodes and memories reference each other: only a full collection
        # frees them, and ``edgewave-agent run`` makes those rare (see cli.py).
        gc.collect()
        return events

    def _count(self, verdict: Verdict) -> None:
        if verdict.status == APPLIED:
            self.counters.add("config_applied")
            log.info("config event=applied version=%s%s", verdict.version,
                     f" note={verdict.reason!r}" if verdict.reason else "")
            return
        kind = verdict.kind or "invalid"
        self.counters.add("config_rejected")
        self.counters.add(f"config_rejected_{kind}")
        if self._log.allow(kind):
            log.warning("config event=rejected version=%s kind=%s reason=%r applied_version=%s "
                        "suppressed_since_last=%d", verdict.version, kind, (verdict.reason or "")[:300],
                        self.version, self._log.suppressed.pop(kind, 0))

    def _ack(self, verdict: Verdict) -> None:
        payload = ack_payload(self.gateway, verdict, self.version)
        if self._keys is not None:      # which key this gateway now holds (key rotation)
            payload = json.dumps({**json.loads(payload), "keyId": self._keys.active_id}).encode()
        self._last_ack = payload
        self.send_ack(payload)

    def resend_ack(self) -> None:
        """After every reconnect to the cloud broker: the last acknowledgement again. One the
        broker had taken (PUBACK) and lost in a crash or restart would otherwise leave the push
        pending at the cloud; a repeated one changes nothing there (cloud/registry.py)."""
        if self._last_ack is not None:
            self.send_ack(self._last_ack)

    def _keyring(self) -> Keyring:
        """The keys config documents verify with, read from their files on first use."""
        if self._keys is None:
            self._keys = Keyring(self.settings)
        return self._keys
