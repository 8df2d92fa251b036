"""The message pipeline: one sensor message in; the events to store and the acknowledgements out.

It runs in one direction, with no thread, lock or I/O of its own:

    intake (decode, check)  ->  engine (push; ``Engine.push_many`` returns the matches
    the triples completed) and the per-instance queries (instance_queries.py: the window
    instances the message's time closed)  ->  events (one per match, one per reported
    instance)  ->  significance (observations no match used)  ->  ``Handled``

The caller (runtime.py, under the engine lock) hands ``Handled.events`` to the outbox
writer (outbox_writer.py) and releases ``Handled.acks`` when the writer says they may go.
The acknowledgements travel with the result because a sensor message on the persistent
local session is acknowledged only once what it caused is durable: whatever must be
durable first sits between this pipeline and the release: the events in the outbox and,
in the same transaction, the journal row of what entered the engine (``Handled.entered``;
window_journal.py), so that windows survive a crash.

A config change runs through here too (``reconfigure``): static triples it adds can
complete matches at once, and their events take the same way to the outbox.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from edgewave.agent.agent_clock import CLOCK
from edgewave.agent.config import AgentSettings
from edgewave.agent.engine import Engine, Match
from edgewave.agent.engine.absence import AbsenceMatch
from edgewave.agent.instance_queries import InstanceQueries
from edgewave.agent.intake import PAYLOAD_REJECTED, Intake, Rejection, SensorEvent
from edgewave.agent.mqtt_link import Ack
from edgewave.agent.reconfigure import CompiledConfig, ConfigChange, apply_difference, build_engine
from edgewave.agent.significance import FORWARD, SignificanceFilter, extract_observations
from edgewave.agent.status import Counters
from edgewave.shared.events import match_event, match_event_id, significant_event

IDLE_ADVANCE_MS = 500          # with no sensor message for this long, stream time moves on by the clock

Event = dict[str, Any]


class Handled(NamedTuple):
    """What one work item leaves for the rest of the agent, in order of what must happen."""

    events: Sequence[Event]        # for the outbox, in the order they were made
    acks: tuple[Ack, ...]          # may be released once ``events`` (and ``entered``) are durable
    entered: SensorEvent | None    # the triples that entered the engine, with stream and time


class Idled(NamedTuple):
    """What the clock did on an idle gateway: the events, and how far they report (-1: none)
    so the journal stores it with them and a restarted agent does not report them again."""

    events: list[Event]
    reported_through: int          # the latest end of the window instances closed
    fired_through: int             # the latest deadline of the absences fired


_now_ms = CLOCK.wall_ms      # emittedAt: the same clock as arrival times (agent_clock.py)


class Pipeline:
    """Intake, engine, events and significance for one gateway; one caller at a time."""

    def __init__(self, settings: AgentSettings, counters: Counters) -> None:
        self.settings = settings
        self.gateway = settings.gateway
        self.counters = counters
        self.intake = Intake(settings)
        self.significance = SignificanceFilter(settings.significance)
        self._significance_on = settings.significance.enabled
        self.engine: Engine | None = None       # built from the applied config (``rebuild``)
        self.instances = InstanceQueries(settings.gateway, settings.engine.entailment)
        self.last_arrival_ms = 0                # the engine's clock: it never goes back
        self.engine_counters: dict[str, int] = {}

    # -- one sensor message ------------------------------------------------------------------
    def handle(self, topic: str, payload: bytes, arrival_ms: int, ack: Ack | None = None) -> Handled:
        """Run one message through intake, engine, events and significance.

        A rejected message is counted and entered nothing; its acknowledgement may go at
        once. Raises whatever the engine or an event raises past decoding (the engine may
        then hold some of the message's triples: there is no undo)."""
        counters = self.counters
        counters.add("messages_in")
        counters.add("bytes_in", len(payload))
        arrival_ms = max(arrival_ms, self.last_arrival_ms)
        self.last_arrival_ms = arrival_ms
        acks = () if ack is None else (ack,)
        accepted = self.intake.decode(topic, payload, arrival_ms)
        if isinstance(accepted, Rejection):
            counters.add(accepted.counter)
            if accepted.mapping is not None:
                counters.add(PAYLOAD_REJECTED)
            return Handled((), acks, None)
        triples = accepted.triples
        counters.add("triples", len(triples))
        matches = self.engine.push_many([(arrival_ms, t) for t in triples], accepted.stream)
        emitted = _now_ms()
        events = self.match_events(matches, emitted) if matches else []
        if self.instances.evaluators:
            closed = self.instances.push(triples, arrival_ms, accepted.stream)
            if closed:
                events.extend(self.instances.events(closed, emitted))
        if self._significance_on:
            self._significant(triples, matches, arrival_ms, emitted, events)
        return Handled(events, acks, accepted)

    def match_events(self, matches: Sequence[Match], emitted_ms: int) -> list[Event]:
        """One uplink event per match, in the order the engine completed them."""
        gateway, content = self.gateway, self.settings.uplink.match_content
        return [match_event(gateway, m.pattern, m.bindings, m.start, m.end, m.triples, emitted_ms,
                            entailed=m.entailed, content=content,
                            expected=m.expected if isinstance(m, AbsenceMatch) else None,
                            derived_from=[match_event_id(gateway, r.pattern, r.triples) for r in m.made_from])
                for m in matches]

    def _significant(self, triples: Sequence[tuple[str, str, str]], matches: Sequence[Match], arrival_ms: int,
                     emitted_ms: int, events: list[Event]) -> None:
        """Observations no match used go through the significance filter; those it forwards
        become events. One a match carried is the filter's new reference value."""
        used = {t for m in matches for t, _ in m.triples} if matches else None
        for obs in extract_observations(triples):
            if used and any(t in used for t in obs.triples):
                self.significance.note_forwarded(obs, arrival_ms)
                continue
            decision = self.significance.decide(obs, arrival_ms)
            if decision == FORWARD:
                events.append(significant_event(self.gateway, obs.sensor, obs.property, obs.result, arrival_ms,
                                                obs.triples, emitted_ms,
                                                with_triples=self.settings.uplink.significant_triples))
            else:
                self.counters.add(decision)

    # -- restart ------------------------------------------------------------------------------
    def decode_again(self, topic: str, payload: bytes, arrival_ms: int) -> SensorEvent | Rejection:
        """What a message that entered the engine before a restart enters again (the window
        journal's replay): the same intake, settings and mappings as then, and no counting."""
        return self.intake.decode(topic, payload, arrival_ms)

    def replay(self, messages: Sequence[tuple[int, str, Sequence[tuple[str, str, str]]]]) -> int:
        """Push what entered the engine before a restart, ``(arrival_ms, stream, triples)`` in
        order, into the fresh engine (window_journal.py); how many matches it completed. Those
        were stored with the journal's rows before the restart: they make no events again,
        and neither do the window instances the replay closes (the journal sets
        ``instances.reported_through`` first)."""
        engine, instances = self.engine, self.instances
        matches = 0
        for arrival_ms, stream, triples in messages:
            matches += len(engine.push_many([(arrival_ms, t) for t in triples], stream))
            if instances.evaluators:
                instances.push(triples, arrival_ms, stream)    # closed again: below reported_through
            self.last_arrival_ms = max(self.last_arrival_ms, arrival_ms)
        return matches

    # -- time and configuration --------------------------------------------------------------
    def stream_ms(self) -> int:
        """The engine's clock: the latest arrival time, or the wall clock once idle (``idle``)."""
        return self.last_arrival_ms

    def idle(self, now_ms: int) -> Idled:
        """No work queued: with no message for ``IDLE_ADVANCE_MS``, stream time moves on by
        the clock so that windows expire, absences whose deadline passed fire and window
        instances close; returns their events. Sooner would take the engine for 1-2 ms twice
        a second under load (the latency tail: bursts of 5-12 ms at a 0.5 s period at 1,000
        msg/s); later arrivals are clamped to this time, so the clock never goes back."""
        events: list[Event] = []
        reported = fired = -1
        if now_ms - self.last_arrival_ms >= IDLE_ADVANCE_MS:
            self.last_arrival_ms = now_ms
            absences = self.engine.advance(now_ms)
            if absences:
                events = self.match_events(absences, _now_ms())
                fired = max(m.end for m in absences)
            if self.instances.evaluators:
                closed = self.instances.advance(now_ms)
                if closed:
                    closed_events = self.instances.events(closed, _now_ms())
                    if closed_events:
                        reported = max(e["windowEnd"] for e in closed_events)
                        events += closed_events
        self.read_engine_counters()
        return Idled(events, reported, fired)

    def read_engine_counters(self) -> None:
        """Copy the engine's running totals for the status thread (constant time)."""
        self.engine_counters = {**self.engine.counters(), **self.instances.counters()}

    def rebuild(self, config: CompiledConfig | None) -> None:
        """A fresh engine and filter rules for ``config`` (start-up, or after a failed swap)."""
        self.engine = build_engine(config, self.settings)
        self.intake.set_mappings(config.mappings if config else ())
        self.instances.rebuild(config)
        self.significance.set_rules(config.significance if config else [])
        self.read_engine_counters()

    def reconfigure(self, old: CompiledConfig | None, new: CompiledConfig) -> tuple[ConfigChange, list[Event]]:
        """Change the running engine from ``old`` to ``new`` by difference and swap the
        filter's rules; returns the change and the events of the matches it completed (a
        new static triple can complete partial matches at once)."""
        engine = self.engine
        completed: list[Match] = []
        engine.on_match = completed.append     # matches made outside push arrive only here
        try:
            change = apply_difference(engine, old, new)
        finally:
            engine.on_match = None
        self.instances.reconfigure(old, new)
        self.intake.set_mappings(new.mappings)
        self.significance.set_rules(new.significance)
        return change, self.match_events(completed, _now_ms())
