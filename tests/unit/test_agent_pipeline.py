"""The message pipeline on its own: one sensor message in, the events to store and the
acknowledgements it may release out, with no thread, broker or file (pipeline.py)."""
from __future__ import annotations

import dataclasses
import gc
import tracemalloc

from agent_harness import ALARM, EX, FIRE, alarm, config_document, observation

from edgewave.agent.config import settings_from_dict
from edgewave.agent.pipeline import Handled, Pipeline
from edgewave.agent.reconfigure import compile_document
from edgewave.agent.status import Counters

SETTINGS = settings_from_dict({"gateway": "gw1", "config": {"key": "k"}})


def pipeline_with(document: str) -> Pipeline:
    pipeline = Pipeline(SETTINGS, Counters())
    pipeline.rebuild(compile_document(1, "trig", document, SETTINGS))
    return pipeline


def test_a_completing_message_gives_its_event_and_its_acknowledgement_back_unsent() -> None:
    pipeline = pipeline_with(config_document(1, patterns={"alarm": ALARM}))
    sent: list[int] = []
    ack = lambda: sent.append(1)  # noqa: E731
    handled = pipeline.handle("ew/in/alarm/s1", alarm(7), 1_000, ack)
    assert isinstance(handled, Handled) and handled.acks == (ack,) and sent == []
    [event] = handled.events
    assert event["kind"] == "match" and event["pattern"] == "alarm"
    assert {b["variable"]: b["value"] for b in event["bindings"]}["room"] == f"<{EX}room1>"
    assert handled.entered is not None and len(handled.entered.triples) == 2
    assert handled.entered.stream == "<http://example.org/stream/alarm>" and handled.entered.arrival_ms == 1_000
    assert pipeline.counters["messages_in"] == 1 and pipeline.counters["triples"] == 2


def test_a_rejected_message_enters_nothing_and_its_acknowledgement_may_go() -> None:
    pipeline = pipeline_with(config_document(1, patterns={"alarm": ALARM}))
    ack = lambda: None  # noqa: E731
    handled = pipeline.handle("ew/in/alarm/s1", b"not n-triples", 1_000, ack)
    assert handled == Handled((), (ack,), None)
    assert pipeline.counters["malformed"] == 1 and pipeline.engine.counters()["triples_in"] == 0
    assert pipeline.handle("ew/in/alarm/s1", alarm(1), 1_001).acks == ()     # QoS 0: nothing to release


def test_observations_no_match_used_go_through_the_significance_filter() -> None:
    pipeline = pipeline_with(config_document(1, patterns={}, significance="[ ew:deadbandAbsolute 1.0 ]"))
    kinds = []
    for n, value in enumerate((20.0, 20.5, 21.5)):
        handled = pipeline.handle("ew/in/air/t1", observation(f"o{n}", "t1", "temperature", value),
                                  1_000 + 10_000 * n)
        kinds.append([e["kind"] for e in handled.events])
    assert kinds == [["significant"], [], ["significant"]]
    assert pipeline.counters["below_deadband"] == 1


def test_the_clock_never_goes_back() -> None:
    pipeline = pipeline_with(config_document(1, patterns={"alarm": ALARM}))
    pipeline.handle("ew/in/alarm/s1", alarm(1), 5_000)
    late = pipeline.handle("ew/in/alarm/s1", alarm(2), 4_000)
    assert late.entered.arrival_ms == 5_000 and pipeline.last_arrival_ms == 5_000


def test_a_static_triple_added_by_a_config_change_completes_a_waiting_match() -> None:
    """The alarm from a sensor with no known room waits in its window; the config that
    places the sensor completes it, and the match comes back as an event to store."""
    pipeline = pipeline_with(config_document(1, patterns={"alarm": ALARM}))
    old = compile_document(1, "trig", config_document(1, patterns={"alarm": ALARM}), SETTINGS)
    pipeline.rebuild(old)
    unplaced = alarm(3).replace(b"<http://example.org/s1>", b"<http://example.org/s9>")
    assert pipeline.handle("ew/in/alarm/s9", unplaced, 1_000).events == []
    placed = (f"<{EX}s9>", f"<{EX}locatedIn>", f"<{EX}room9>")
    new = dataclasses.replace(old, version=2, static=old.static | {placed})
    change, events = pipeline.reconfigure(old, new)
    assert change.static_added == 1
    [event] = events
    assert {b["variable"]: b["value"] for b in event["bindings"]}["room"] == f"<{EX}room9>"
    assert pipeline.engine.on_match is None


def test_memory_levels_off_over_a_stream_of_one_off_terms() -> None:
    """A gateway's terms mostly never repeat (each observation's own IRI, an exact reading):
    whatever the pipeline caches of them must stay bounded, or a long-running agent grows
    without end. Once the windows and caches are full (phase one), three times as many
    messages (phase two) may not add more than a little churn."""
    from edgewave.agent.cli import TERM_CACHE_LIMIT
    from edgewave.shared import ntriples

    ntriples.set_term_cache_limit(TERM_CACHE_LIMIT)       # as `edgewave-agent run` does
    pipeline = pipeline_with(config_document(1, patterns={"fire": FIRE},
                                             significance="[ ew:deadbandAbsolute 0.0001 ]"))
    sent = [0]

    def stream(messages: int) -> int:
        for _ in range(messages):
            n = sent[0]
            sent[0] += 1
            if n % 20 == 0:
                message = observation(f"s{n}", "s1", "smoke", n % 2)
            else:
                message = observation(f"o{n}", "t1", "temperature", round(20 + n * 0.0013, 4))
            pipeline.handle("ew/in/fire/t1", message, 1_000 + 2_000 * n)
        # The token caches are emptied whenever they fill (a saw-tooth of at most
        # TERM_CACHE_LIMIT entries each): measured empty, so only what else stays is seen.
        ntriples.clear_term_caches()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        full = stream(1_000)                              # windows (60 s) full, the caches nearly
        later = stream(3_000)
    finally:
        tracemalloc.stop()
        ntriples.set_term_cache_limit(ntriples.DEFAULT_CACHE_LIMIT)
    assert pipeline.counters["messages_in"] == 4_000
    # 3,000 one-off readings kept in caches of 65,536 entries each added 1.7 MB.
    assert later - full < 300_000, f"grew {(later - full) / 1e6:.2f} MB over 3,000 messages"
