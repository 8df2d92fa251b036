"""INSTANS' own examples through `edgewave match`: the cep2sparql event-processing agents
against the outputs INSTANS printed, and Close Friends against a brute-force reference.

The examples are read from the reference data directory's ``instans/`` (tests/reference_data.py;
that folder's PROVENANCE.md names the repositories and commits); without it these tests
skip, and with the reference data directory there they may not (tests/conftest.py). The
queries are ours, in edgewave's language, built in ``instans_examples.py``, which also says
how INSTANS' named graphs become streams and what stands in for what edgewave has no word
for (HOURS, BIND, deleting a triple).

cep2sparql (Rinne & Nuutila, ODBASE 2014): ``sample-output/batch_test_output.txt`` holds
each agent run alone over the sample events, ``cep2sparql_output.txt`` all of them chained
(EPA-All). Every graph INSTANS printed must be one a reader of that agent's output stream
sees, with the same name and isomorphic (blank nodes are arbitrary), and there must be no
other. EPA6's counts are compared in order. EPA3 as written (a remote SERVICE) is skipped
with its reason.

Close Friends: no expected output exists. ``close_friends_reference`` implements the rules'
meaning in plain Python, and the notifications (pair and time) must be the same.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from rdflib import Literal
from rdflib.util import from_n3

from .instans_examples import (
    CF, COLON, GEO, INSTANS, SSN, EventGraph, FriendEvent, channel, close_friends_queries, close_friends_reference,
    difference, direction_table, epa1, epa2, epa2_seed, epa3_local, epa4, epa5, epa6, epa7, epa8, friends, hour_table,
    instans_dir, pair_table, printed_graphs, read_close_friends, read_event_graphs, run_match, sections,
    static_of_trig, status_seed, status_table, streams_of, tap, tapped_graphs,
)

DATA = instans_dir()
NO_DATA = pytest.mark.skipif(DATA is None, reason="INSTANS examples not found: instans/ in the reference data "
                                                  "directory ($EDGEWAVE_REFERENCE_DATA, var/reference-data or "
                                                  "shared/data beside the checkout; scripts/fetch-reference-data.py "
                                                  "fetches it)")
# With the reference data directory there, tests/conftest.py turns these skips into failures.
DATA_MARKS = [pytest.mark.reference_data, NO_DATA]

INPUT = channel("Input")
SAMPLE = "CEP2SPARQL_SampleEvents.trig"


def needs_data(test):
    for mark in DATA_MARKS:
        test = mark(test)
    return test


def cep2sparql() -> Path:
    assert DATA is not None
    return DATA / "cep2sparql"


def static_tables() -> list[str]:
    """The hour and direction tables and EPA8's pattern (CEP2SPARQL_SamplePattern.trig)."""
    return hour_table() + direction_table() + static_of_trig(cep2sparql() / "data" / "CEP2SPARQL_SamplePattern.trig")


@dataclass(frozen=True)
class Agent:
    title: str                                           # its run in batch_test_output.txt
    events: str                                          # its input, in cep2sparql/data
    queries: Callable[[], dict[str, str]]
    outputs: tuple[str, ...]                             # the channels it writes
    seeds: Callable[[list[EventGraph]], dict[str, list[str]]] = lambda graphs: {}


AGENTS = {
    "EPA1": Agent("EPA1 (Stateless filter)", SAMPLE, lambda: epa1(INPUT, channel("Poststateless")),
                  ("Poststateless",)),
    "EPA2": Agent("EPA2 (Stateful filter)", SAMPLE, lambda: epa2(INPUT, channel("Poststateful")),
                  ("Poststateful",), lambda graphs: epa2_seed(graphs[0].ms)),
    "EPA3-local": Agent("EPA3 (Enrich) local", SAMPLE, lambda: epa3_local(INPUT, channel("Translated")),
                        ("Translated",)),
    "EPA4": Agent("EPA4 (Project) - using input from EPA3 local", "EPA3_SampleEvents.trig",
                  lambda: epa4(channel("Translated"), channel("Projected")), ("Projected",)),
    "EPA5": Agent("EPA5 (Split)", SAMPLE, lambda: epa5(INPUT, channel("GeoEvents"), channel("SensorEvents")),
                  ("GeoEvents", "SensorEvents")),
    "EPA7": Agent("EPA7 (Compose) - using input from EPA5", "EPA5_SampleEvents.trig",
                  lambda: epa7(channel("GeoEvents"), channel("SensorEvents"), channel("Combined")), ("Combined",)),
    "EPA8": Agent("EPA8 (Pattern detection)", SAMPLE,
                  lambda: epa8(INPUT, channel("PatternDetect"), "BackAndForth!"), ("PatternDetect",)),
}
SERVICE = ("EPA3 as written looks each location up with SERVICE <http://factforge.net/sparql>, a remote "
           "federated query: edgewave has no SERVICE (refused, docs/engine.md) and the suite uses no network; "
           "EPA3-local, the example's own offline form, runs instead")


def run_agents(tmp_path: Path, events: str, queries: dict[str, str], outputs: tuple[str, ...],
               seeds: dict[str, list[str]] | None = None) -> tuple[list[dict], str]:
    """`edgewave match` over a cep2sparql event file with the agents' queries and a tap on
    each output channel."""
    streams = streams_of(read_event_graphs(cep2sparql() / "data" / events))
    streams.update(seeds or {})
    for name in outputs:
        queries[f"tap {name}"] = tap(channel(name))
    return run_match(tmp_path, queries, streams, static_tables())


def batch_output(title: str) -> str:
    return sections((cep2sparql() / "sample-output" / "batch_test_output.txt").read_text(encoding="utf-8"))[title]


@pytest.mark.parametrize("name", [pytest.param(name, id=name, marks=DATA_MARKS) for name in AGENTS]
                         + [pytest.param("EPA3-service", id="EPA3-service", marks=pytest.mark.skip(reason=SERVICE))])
def test_agent_alone_gives_what_instans_printed(name: str, tmp_path: Path) -> None:
    agent = AGENTS[name]
    graphs = read_event_graphs(cep2sparql() / "data" / agent.events)
    matches, summary = run_agents(tmp_path, agent.events, agent.queries(), agent.outputs, agent.seeds(graphs))
    want = Counter(printed_graphs(batch_output(agent.title)))
    got = Counter(tapped_graphs(matches))
    assert want, "nothing read from INSTANS' output: the reader or the file is broken"
    assert got == want, difference(got, want) + "\n" + summary
    assert "derivations_cut=0 " in summary, summary


def hour_counts(graphs: list[tuple[str, frozenset]]) -> list[tuple[int, int]]:
    """EPA6's ``<eventcounts>`` graphs as (hour, count), in the order printed."""
    counts = []
    for name, triples in graphs:
        if name == "eventcounts":
            value = {str(p).removeprefix(COLON): o.toPython() for _, p, o in triples}
            counts.append((value["hour"], value["count"]))
    return counts


def reported_counts(matches: list[dict]) -> list[tuple[int, int]]:
    """The per-instance reports of our EPA6 as (hour, count), in the order reported."""
    counts = []
    for report in matches:
        if report.get("query") == f"{INSTANS}eventcounts":
            (row,) = report["rows"]
            counts.append((int(from_n3(row["hour"]).toPython()), int(from_n3(row["count"]).toPython())))
    return counts


@needs_data
def test_epa6_counts_events_per_hour_as_instans_did(tmp_path: Path) -> None:
    """EPA6-Aggregate, per one-hour window instance. INSTANS prints an hour's count when the
    next hour's first event arrives; edgewave reports it when that event closes the
    instance, and closes at the end of its input the last hour too (Eve12's, 04:00 on the
    9th), which INSTANS never prints: no event follows it."""
    matches, summary = run_agents(tmp_path, SAMPLE, epa6(INPUT), ())
    want = hour_counts(printed_graphs(batch_output("EPA6 (Aggregate)")))
    assert want == [(9, 2), (10, 1), (11, 1), (21, 1), (4, 1), (9, 2), (10, 1), (11, 1), (21, 1)]
    assert reported_counts(matches) == want + [(4, 1)], summary


@needs_data
def test_epa8_directions_are_the_ones_instans_binds(tmp_path: Path) -> None:
    """EPA8-Transform's compass directions (INSTANS printed only the detections made of
    them), against its BINDs done in Python on each event and its sensor's previous one."""
    matches, _ = run_agents(tmp_path, SAMPLE, epa8(INPUT, channel("PatternDetect"), "x"), ("directions",))
    got = {}
    for name, triples in tapped_graphs(matches):
        (direction,) = [str(o) for _, p, o in triples if str(p) == f"{COLON}direction"]
        got[name.removeprefix("directions-")] = direction
    want, previous = {}, {}
    for graph in read_event_graphs(cep2sparql() / "data" / SAMPLE):
        value = {}
        for statement in graph.statements:
            _, p, o = (from_n3(term) for term in statement.removesuffix(" .").split(" ", 2))
            value[str(p)] = o.toPython() if isinstance(o, Literal) else o
        sensor, lat, long = value[SSN + "Sensor"], float(value[GEO + "lat"]), float(value[GEO + "long"])
        if sensor in previous:
            before_lat, before_long = previous[sensor]
            text = (("N" if lat > before_lat else "") + ("S" if lat < before_lat else "")
                    + ("E" if long > before_long else "") + ("W" if long < before_long else ""))
            want[graph.event] = text or "0"
        previous[sensor] = (lat, long)
    assert got == want
    assert set(want.values()) == {"NW", "NE", "SW", "SE", "0"}


@needs_data
def test_all_agents_chained_give_what_instans_printed(tmp_path: Path) -> None:
    """EPA-All.rq: EPA1 -> EPA2 -> EPA3 (local) -> EPA4, EPA2 -> EPA5 -> EPA7, and EPA6 and
    EPA8 on the input, each agent reading the stream the one before it writes; compared with
    every graph cep2sparql_output.txt holds (it prints the input graphs too)."""
    ch = {name: channel(name) for name in ("Poststateless", "Poststateful", "Translated", "Projected", "GeoEvents",
                                           "SensorEvents", "Combined", "PatternDetect")}
    queries = {**epa1(INPUT, ch["Poststateless"]), **epa2(ch["Poststateless"], ch["Poststateful"]),
               **epa3_local(ch["Poststateful"], ch["Translated"]), **epa4(ch["Translated"], ch["Projected"]),
               **epa5(ch["Poststateful"], ch["GeoEvents"], ch["SensorEvents"]),
               **epa7(ch["GeoEvents"], ch["SensorEvents"], ch["Combined"]), **epa6(INPUT),
               **epa8(INPUT, ch["PatternDetect"], "Pattern detected!")}
    first = read_event_graphs(cep2sparql() / "data" / SAMPLE)[0]
    matches, summary = run_agents(tmp_path, SAMPLE, queries, ("Input", *ch), epa2_seed(first.ms))
    printed = printed_graphs((cep2sparql() / "sample-output" / "cep2sparql_output.txt").read_text(encoding="utf-8"))
    want = Counter((name, triples) for name, triples in printed if name != "eventcounts")
    got = Counter(tapped_graphs(matches))
    assert sum(want.values()) == 58  # 12 input graphs, 8 + 6 * 6 made by the agents, 2 detections
    assert got == want, difference(got, want) + "\n" + summary
    assert reported_counts(matches) == hour_counts(printed) + [(4, 1)]   # as in the EPA6 test
    assert "derivations_cut=0 " in summary, summary


def test_a_copy_made_by_a_rule_leaves_the_input_triple_at_depth_0(tmp_path: Path) -> None:
    """What EPA-All needs, alone. Seven rules copy ``:a :p :b`` (input, at 1000 ms) from
    stream to stream, the same triple at the same time; rule Z reads the input stream
    (``:a :p :b`` and ``:a :r :c`` at 2000 ms) and rule Z2 reads Z's stream. By
    docs/engine.md ("Chained rules": an input triple is at depth 0) Z's triple is at depth
    1 and Z2's at 2, and both are made: the copies' depths (up to 7) are theirs, not the
    input arrival's, which equals them."""
    ex = "http://ex.org/"
    queries = {}
    for n in range(1, 8):
        source = f"{ex}s" if n == 1 else f"{ex}c{n - 1}"
        queries[f"copy{n}"] = (f"REGISTER RSTREAM <{ex}c{n}> AS CONSTRUCT {{ ?x <{ex}p> ?y }}\n"
                               f"FROM NAMED WINDOW <w> ON <{source}> [RANGE PT10S STEP PT1S]\n"
                               f"WHERE {{ WINDOW <w> {{ ?x <{ex}p> ?y }} }}\n")
    queries["z"] = (f"REGISTER RSTREAM <{ex}z> AS CONSTRUCT {{ ?x <{ex}q> ?z }}\n"
                    f"FROM NAMED WINDOW <w> ON <{ex}s> [RANGE PT10S STEP PT1S]\n"
                    f"WHERE {{ WINDOW <w> {{ ?x <{ex}p> ?y . ?x <{ex}r> ?z }} }}\n")
    queries["z2"] = (f"REGISTER RSTREAM <{ex}z2> AS CONSTRUCT {{ ?x <{ex}done> ?z }}\n"
                     f"FROM NAMED WINDOW <w> ON <{ex}z> [RANGE PT10S STEP PT1S]\n"
                     f"WHERE {{ WINDOW <w> {{ ?x <{ex}q> ?z }} }}\n")
    stream = {f"{ex}s": [f"1000\t<{ex}a> <{ex}p> <{ex}b> .", f"2000\t<{ex}a> <{ex}r> <{ex}c> ."]}
    _, alone = run_match(tmp_path / "alone", {"z": queries["z"], "z2": queries["z2"]}, stream)
    assert "derived=2 derivations_cut=0 " in alone, alone
    _, copied = run_match(tmp_path / "copied", queries, stream)
    assert "derived=9 derivations_cut=0 " in copied, copied


# -- Close Friends ----------------------------------------------------------------------

def run_close_friends(tmp_path: Path, static: list[str], events: list[FriendEvent]) -> tuple[list[tuple], str]:
    """Our CF-Queries-default over the events: the notifications as (person1, person2, ms)."""
    knows = friends(static)
    stream = f"{CF}events"
    streams = {stream: [f"{event.ms}\t{statement}" for event in events for statement in event.statements]}
    streams.update(status_seed(knows, events[0].ms))
    matches, summary = run_match(tmp_path, close_friends_queries(stream), streams,
                                 static + pair_table(knows) + status_table())
    return sorted((m["bindings"]["person1"], m["bindings"]["person2"], m["end"])
                  for m in matches if m.get("pattern") == f"{CF}Notification"), summary


def without_dead_band(events: list[FriendEvent], knows: list[tuple[str, str]]) -> list[tuple[str, str, int]]:
    """The reference with DetectNotNearby at 0.01 instead of 0.02: what a translation that
    lost the rules' dead band between the two would report."""
    latest: dict[str, tuple[float, float]] = {}
    nearby: set[tuple[str, str]] = set()
    notified = []
    for event in events:
        latest[event.person] = (event.lat, event.long)
        for a, b in knows:
            if event.person in (a, b) and a in latest and b in latest:
                close = abs(latest[b][0] - latest[a][0]) < 0.01 and abs(latest[b][1] - latest[a][1]) < 0.01
                if close and (a, b) not in nearby:
                    notified.append((a, b, event.ms))
                (nearby.add if close else nearby.discard)((a, b))
    return notified


@pytest.mark.parametrize("file, first, notifications, dead_band_matters", [
    pytest.param("5actors100events.ttl", None, 2, False, id="100events", marks=DATA_MARKS),
    pytest.param("5actors1000events.ttl", 300, 10, True, id="1000events-first300", marks=DATA_MARKS),
    pytest.param("5actors1000events.ttl", None, 18, True, id="1000events", marks=[*DATA_MARKS, pytest.mark.slow]),
])
def test_close_friends_notifies_as_the_rules_mean(file: str, first: int | None, notifications: int,
                                                  dead_band_matters: bool, tmp_path: Path) -> None:
    static, events = read_close_friends(DATA / "closefriends" / file)
    events = events[:first]
    knows = friends(static)
    assert len(knows) == 20 and len(events) == (first or int(file.split("actors")[1].split("events")[0]))
    # RECENT takes each person's newest event by arrival, RemoveOldEvents by tl:at: the same here
    assert all(a.ms <= b.ms for a, b in zip(events, events[1:]))
    # a friend's newest event and a pair's last status are kept a day (instans_examples.MEMORY)
    assert events[-1].ms - events[0].ms < 86_400_000
    want = close_friends_reference(events, knows)
    assert len(want) == notifications
    # the comparison tells the rules from a translation without their dead band
    assert (sorted(without_dead_band(events, knows)) != sorted(want)) == dead_band_matters
    got, summary = run_close_friends(tmp_path, static, events)
    assert got == sorted(want), summary
    assert "derivations_cut=0 " in summary, summary
