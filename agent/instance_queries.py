"""The running config's per-instance queries: one evaluator each, fed what the engine is fed.

A pattern that needs a window's content as a whole (aggregates, OPTIONAL, negation, UNION,
ISTREAM/DSTREAM; docs/engine.md, "Per-instance queries") is evaluated on each window
instance as it closes, beside the continuous engine. Each reported instance becomes
uplink events of kind ``instance`` (shared/events.py), stored in the outbox like matches.

Stream time is the engine's: arrival times, and the wall clock while the gateway is idle
(``Pipeline.idle``), so a quiet gateway still reports each instance on time.

Across a crash, the window journal (window_journal.py) replays what entered; instances that
close during the replay were reported before (their events were stored with the row that
closed them) and are dropped. Instances closed by the clock alone were stored in a
transaction of their own, which also wrote how far instances had been reported
(``reported_through``, in the journal's meta): after a restart, an instance ending by then
is not reported again. So an instance is neither lost nor sent twice; the cloud's
de-duplication by event id (stable: gateway, query, bounds, operator) stays the second line.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from edgewave.agent.engine.per_instance import InstanceEvaluator, InstanceResult
from edgewave.shared.events import instance_events

if TYPE_CHECKING:
    from edgewave.agent.reconfigure import CompiledConfig

Triple = tuple[str, str, str]
Event = dict


class InstanceQueries:
    """The per-instance queries of the applied config; one caller at a time (the engine lock)."""

    def __init__(self, gateway: str, entailment: bool) -> None:
        self.gateway = gateway
        self.entailment = entailment
        self.evaluators: dict[str, InstanceEvaluator] = {}
        self._texts: dict[str, tuple[str, str]] = {}     # name -> (query text, report policy) it runs
        self.reported_through = -1        # instances ending by then were reported (before a restart)
        self.reported = 0                 # instances reported (each one or more events)
        self.replayed = 0                 # instances closed again by a replay, already reported: dropped
        self._retired_late = 0            # late triples of evaluators no longer running

    # -- configuration ------------------------------------------------------------------------
    def rebuild(self, config: CompiledConfig | None) -> None:
        """Fresh evaluators for ``config``'s per-instance queries (start-up, a failed swap)."""
        self._retire(list(self.evaluators))
        for name in (config.instance_queries if config else ()):
            self._start(config, name)

    def reconfigure(self, old: CompiledConfig | None, new: CompiledConfig) -> None:
        """From ``old`` to ``new`` by difference: an unchanged query keeps its windows and
        takes the static data's difference; a new or changed one starts empty. A changed
        schema restarts them all (the entailments of what their windows hold would change)."""
        if old is None or new.schema != old.schema:
            self.rebuild(new)
            return
        gone = [n for n in self.evaluators
                if n not in new.instance_queries or self._texts[n] != (new.patterns[n], new.reports[n])]
        self._retire(gone)
        removed, added = sorted(old.static - new.static), sorted(new.static - old.static)
        for evaluator in self.evaluators.values():
            evaluator.remove_static(removed)
            evaluator.add_static(added)
        for name in new.instance_queries:
            if name not in self.evaluators:
                self._start(new, name)

    def _start(self, config: CompiledConfig, name: str) -> None:
        evaluator = InstanceEvaluator(config.instance_queries[name], sorted(config.schema),
                                      entailment=self.entailment, report=config.reports[name])
        evaluator.add_static(sorted(config.static))
        self.evaluators[name] = evaluator
        self._texts[name] = (config.patterns[name], config.reports[name])

    def _retire(self, names: Iterable[str]) -> None:
        for name in names:
            evaluator = self.evaluators.pop(name)
            del self._texts[name]
            self._retired_late += evaluator.late_triples

    # -- the stream ---------------------------------------------------------------------------
    def push(self, triples: Sequence[Triple], arrival_ms: int, stream: str | None) -> list[InstanceResult]:
        """One message's triples at ``arrival_ms``; the instances its time closed."""
        results: list[InstanceResult] = []
        for evaluator in self.evaluators.values():
            push = evaluator.push
            for triple in triples:
                results.extend(push(triple, arrival_ms, stream))
        return self._unreported(results) if results else results

    def advance(self, now_ms: int) -> list[InstanceResult]:
        """Stream time is ``now_ms``: the instances that end by it."""
        results: list[InstanceResult] = []
        for evaluator in self.evaluators.values():
            results.extend(evaluator.advance(now_ms))
        return self._unreported(results) if results else results

    def _unreported(self, results: list[InstanceResult]) -> list[InstanceResult]:
        through = self.reported_through
        fresh = [r for r in results if r.end > through]
        self.replayed += len(results) - len(fresh)
        self.reported += len(fresh)
        return fresh

    def events(self, results: Sequence[InstanceResult], emitted_ms: int) -> list[Event]:
        """The uplink events of reported instances, in the order they closed."""
        return [event for r in results
                for event in instance_events(self.gateway, r.query, r.start, r.end, r.stream, r.rows, emitted_ms)]

    def counters(self) -> dict[str, int]:
        """Running totals for the agent's status."""
        return {"instance_queries": len(self.evaluators), "instances_reported": self.reported,
                "state_replayed_instances": self.replayed,
                "late_triples": self._retired_late + sum(e.late_triples for e in self.evaluators.values())}
