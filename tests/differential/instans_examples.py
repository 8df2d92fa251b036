"""INSTANS' own examples as edgewave streams and queries (tests/differential/test_instans_examples.py).

INSTANS (Aalto DSG) is a Rete engine for SPARQL 1.1 rules over RDF streams; its examples are
read from the reference data directory's ``instans/`` (tests/reference_data.py; its
PROVENANCE.md names the repositories and commits). Nothing of them is copied here. This
module holds what turns them into an `edgewave match` run and back:

- ``cep2sparql/``: the eight agent types of *Event Processing in Action* as SPARQL rules
  (Rinne & Nuutila, ODBASE 2014). Each event is a named graph (``<Input-Eve1> { ... }``) and
  each agent writes new graphs named after its channel (``<Poststateless-Eve1>``). Here a
  channel is a stream: the graphs ``<http://instans.org/Input-EveN>`` become the triples of
  stream ``<http://instans.org/Input>`` at the event's ``ep:hasEventObjectSamplingTime``,
  and an agent is a chained rule whose name is the stream of its output channel. The
  outputs INSTANS printed (TriG blocks) are read block by block and compared, graph by
  graph up to blank-node renaming, with what a query reading each output stream sees.
- ``closefriends/``: the Close Friends benchmark, its events as a stream at their
  ``tl:at`` times, and an independent brute-force reference of its rules' meaning.

What edgewave has no word for is written with static tables (``HOURS`` is not among the
engine's functions, so the hour of day comes from a 24-row table matched with CONTAINS on
the lexical form; compass directions from a 9-row table) and with "memory" streams: a rule
writes the state INSTANS keeps in its ``<memory>`` graph, and ``CONSUME RECENT`` reads the
newest such triple, which is the previous event's, because a rule's triples enter the
engine after the triple that made them.
"""
from __future__ import annotations

import io
import json
import re
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.compare import to_canonical_graph
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.util import from_n3

from edgewave.agent import match_cli
from reference_data import reference_data_dir

INSTANS = "http://instans.org/"        # BASE of every cep2sparql file: graph names, events, channels
COLON = "http:instans.org/default#"    # their ':' prefix, as written (no '//')
EP = "http://www.ontologydesignpatterns.org/cp/owl/eventprocessing.owl#"
GEO = "http://www.w3.org/2003/01/geo/wgs84_pos#"
SSN = "http://purl.oclc.org/NET/ssnx/ssn#"
XSD = "http://www.w3.org/2001/XMLSchema#"
T = "https://edgewave.dev/ns/test/instans#"   # our helper terms: tables, links, memory
SAMPLING_TIME = URIRef(EP + "hasEventObjectSamplingTime")

PREFIXES = f"""BASE <{INSTANS}>
PREFIX : <{COLON}>
PREFIX geo: <{GEO}>
PREFIX ssn: <{SSN}>
PREFIX ep: <{EP}>
PREFIX xsd: <{XSD}>
PREFIX t: <{T}>
"""


def instans_dir() -> Path | None:
    """``instans/`` of the reference data directory, or None."""
    root = reference_data_dir()
    if root is None or not (root / "instans").is_dir():
        return None
    return root / "instans"


def channel(name: str) -> str:
    """The stream IRI of an INSTANS channel: ``Poststateless`` -> ``<http://instans.org/Poststateless>``."""
    return f"{INSTANS}{name}"


def epoch_ms(value: Literal) -> int:
    """An ``xsd:dateTime`` without a time zone, read as UTC, in milliseconds."""
    moment = datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


# -- the cep2sparql event files ------------------------------------------------------------

@dataclass(frozen=True)
class EventGraph:
    """One named graph of a cep2sparql TriG file: ``Input-Eve1`` is channel ``Input``, event ``Eve1``."""
    name: str
    channel: str
    event: str
    ms: int
    statements: tuple[str, ...]


def _nt(term, labels: dict[BNode, str]) -> str:
    return labels[term] if isinstance(term, BNode) else term.n3()


def read_event_graphs(path: Path) -> list[EventGraph]:
    """The named graphs of a TriG file, each with its event's sampling time, in time order.

    Blank nodes get labels of their own graph (``_:InputEve4b0``): two events at the same
    point have equal canonical graphs, and must not share their point in the stream."""
    dataset = Dataset()
    dataset.parse(path, format="trig")
    graphs = []
    for graph in dataset.graphs():
        if graph.identifier == DATASET_DEFAULT_GRAPH_ID or not len(graph):
            continue
        name = str(graph.identifier).removeprefix(INSTANS)
        kind, _, event = name.rpartition("-")
        (subject, time), = graph.subject_objects(SAMPLING_TIME)
        canonical = to_canonical_graph(graph)
        prefix = re.sub(r"[^A-Za-z0-9]", "", name)
        blanks = sorted({term for triple in canonical for term in triple if isinstance(term, BNode)})
        labels = {blank: f"_:{prefix}b{i}" for i, blank in enumerate(blanks)}
        statements = sorted(f"{_nt(s, labels)} {_nt(p, labels)} {_nt(o, labels)} ." for s, p, o in canonical)
        graphs.append(EventGraph(name, kind, str(subject).removeprefix(INSTANS), epoch_ms(time), tuple(statements)))
    return sorted(graphs, key=lambda g: (g.ms, g.name))


def streams_of(graphs: Iterable[EventGraph]) -> dict[str, list[str]]:
    """Stream IRI -> ``<ms>\\t<statement>`` lines: each graph's triples at its event's time."""
    streams: dict[str, list[str]] = {}
    for graph in graphs:
        streams.setdefault(channel(graph.channel), []).extend(f"{graph.ms}\t{s}" for s in graph.statements)
    return streams


def static_of_trig(path: Path) -> list[str]:
    """Every triple of a TriG file (all graphs) as N-Triples statements: static data."""
    dataset = Dataset()
    dataset.parse(path, format="trig")
    return sorted(f"{s.n3()} {p.n3()} {o.n3()} ." for s, p, o, _ in dataset.quads())


# -- what INSTANS printed ------------------------------------------------------------------

Canonical = frozenset  # a graph's triples after canonical blank-node labelling

_BLOCK_START = re.compile(r"^<([^>]*)> \{")


def canonical(triples: Iterable[tuple]) -> Canonical:
    graph = Graph()
    for triple in triples:
        graph.add(triple)
    return frozenset(to_canonical_graph(graph))


def sections(text: str) -> dict[str, str]:
    """batch_test_output.txt by run: its title line (``EPA1 (Stateless filter)``) -> that run's output."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("EPA"):
            current = found.setdefault(line.strip(), [])
        elif current is not None:
            current.append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


def printed_graphs(text: str) -> list[tuple[str, Canonical]]:
    """The TriG blocks INSTANS printed, in order: (graph name without the BASE, canonical triples).

    Each block is parsed alone: INSTANS prints a graph such as ``<eventcounts>`` once per
    event it makes, and a TriG parser would merge them."""
    header: list[str] = []
    blocks: list[tuple[str, Canonical]] = []
    block: list[str] | None = None
    for line in text.splitlines():
        if block is None:
            if line.startswith(("PREFIX", "BASE")):
                header.append(line)
            elif _BLOCK_START.match(line):
                block = [line]
        else:
            block.append(line)
            if line.strip() == "}":
                dataset = Dataset()
                dataset.parse(data="\n".join(header + block), format="trig")
                (graph,) = [g for g in dataset.graphs() if g.identifier != DATASET_DEFAULT_GRAPH_ID and len(g)]
                blocks.append((str(graph.identifier).removeprefix(INSTANS), canonical(graph)))
                block = None
    return blocks


# -- running edgewave match ----------------------------------------------------------------

def run_match(folder: Path, queries: dict[str, str], streams: dict[str, list[str]],
              static: Iterable[str] = ()) -> tuple[list[dict], str]:
    """`edgewave match` (its entry function, in process) with one file per query and per
    stream (``--stream IRI=FILE``) and the static statements; (matches, summary)."""
    folder.mkdir(parents=True, exist_ok=True)
    args = ["match"]
    for n, text in enumerate(queries.values()):
        (folder / f"q{n}.rq").write_text(PREFIXES + text, encoding="utf-8")
        args += ["--query", str(folder / f"q{n}.rq")]
    static = list(static)
    if static:
        (folder / "static.nt").write_text("\n".join(static) + "\n", encoding="utf-8")
        args += ["--static", str(folder / "static.nt")]
    for n, (iri, lines) in enumerate(streams.items()):
        ordered = sorted(lines, key=lambda line: int(line.split("\t", 1)[0]))  # stable: file order within a ms
        (folder / f"s{n}.tsv").write_text("\n".join(ordered) + "\n", encoding="utf-8")
        args += ["--stream", f"<{iri}>={folder / f's{n}.tsv'}"]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = match_cli.main(args)
    assert code == 0, err.getvalue()
    assert " malformed=0 " in err.getvalue(), err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def tap(stream: str) -> str:
    """A query that reports every triple of a stream: what a reader of that channel sees."""
    return (f"REGISTER RSTREAM <tap:{stream}> AS SELECT ?s ?p ?o\n"
            f"FROM NAMED WINDOW <w> ON <{stream}> [RANGE PT1S STEP PT1S]\nWHERE {{ WINDOW <w> {{ ?s ?p ?o }} }}\n")


def tapped_graphs(matches: list[dict]) -> list[tuple[str, Canonical]]:
    """The triples the tap queries saw, one graph per stream and millisecond (every rule
    match here is one event's, and events are minutes apart), named as INSTANS names its
    graphs: ``Poststateless-Eve1`` when it is an event's (its ``ep:hasEventObjectSamplingTime``
    subject), else the channel alone (``PatternDetect``)."""
    grouped: dict[tuple[str, int], list[tuple]] = {}
    for match in matches:
        if match.get("pattern", "").startswith("tap:"):
            b = match["bindings"]
            grouped.setdefault((match["pattern"][4:], match["end"]), []).append(
                (from_n3(b["s"]), from_n3(b["p"]), from_n3(b["o"])))
    graphs = []
    for (stream, _), triples in sorted(grouped.items(), key=lambda item: (item[0][1], item[0][0])):
        assert len(set(triples)) == len(triples), f"a triple made twice on {stream}: {triples}"
        name = stream.removeprefix(INSTANS)
        events = {str(s).removeprefix(INSTANS) for s, p, _ in triples if p == SAMPLING_TIME and isinstance(s, URIRef)}
        if len(events) == 1:
            name = f"{name}-{events.pop()}"
        graphs.append((name, canonical(triples)))
    return graphs


def difference(got: Counter, want: Counter) -> str:
    """For a failed comparison: the graphs one side has more often than the other, with their triples."""
    lines = []
    for side, more, fewer in (("edgewave only", got, want), ("INSTANS only", want, got)):
        for (name, triples), n in sorted((more - fewer).items(), key=lambda item: item[0][0]):
            lines.append(f"{side}: {name} (x{n})")
            lines += [f"    {s.n3()} {p.n3()} {o.n3()} ." for s, p, o in sorted(triples)]
    return "\n".join(lines)


# -- static tables and seeds ---------------------------------------------------------------

def hour_table() -> list[str]:
    """HOURS() as data: ``t:hourN t:hourOfDay N ; t:lexicalHour "TNN:"``. In an
    ``xsd:dateTime`` without a time zone, as every cep2sparql event has, "T09:" occurs
    exactly when HOURS() is 9."""
    rows = []
    for hour in range(24):
        rows += [f'<{T}hour{hour}> <{T}hourOfDay> "{hour}"^^<{XSD}integer> .',
                 f'<{T}hour{hour}> <{T}lexicalHour> "T{hour:02d}:" .']
    return rows


def direction_table() -> list[str]:
    """EPA 8's compass directions as data: the label INSTANS' BINDs make for the sign of
    the change in latitude and in longitude ("N" and "E" for an increase, "0" for none)."""
    rows = []
    for lat_sign, lat in ((1, "N"), (-1, "S"), (0, "")):
        for long_sign, long in ((1, "E"), (-1, "W"), (0, "")):
            label = (lat + long) or "0"
            node = f"<{T}direction-{label}>"
            rows += [f'{node} <{T}label> "{label}" .',
                     f'{node} <{T}latSign> "{lat_sign}"^^<{XSD}integer> .',
                     f'{node} <{T}longSign> "{long_sign}"^^<{XSD}integer> .']
    return rows


# -- the agents (cep2sparql/queries/EPA*.rq) in edgewave's language ------------------------

# The event shape of every cep2sparql event graph; INSTANS' agents copy a graph with
# ``?s ?p ?o``, which a CONSTRUCT template cannot (its predicates are constants), so the
# templates name these six triples.
EVENT = ("?event a ep:EventObject ; ssn:Sensor ?sensor ; geo:Point ?point ; "
         "ep:hasEventObjectSamplingTime ?time . ?point geo:lat ?lat ; geo:long ?long .")
PER_EVENT = "[RANGE PT1S STEP PT1S]"    # one event's triples share their millisecond
MEMORY = "[RANGE P1D STEP PT1S]"        # state kept from event to event (the sample's gaps are hours)


def rule(out: str, template: str, windows: dict[str, tuple[str, str]], where: str) -> str:
    """A chained rule: its matches make ``template``'s triples on stream ``out``."""
    froms = "".join(f"FROM NAMED WINDOW <{w}> ON <{stream}> {size}\n" for w, (stream, size) in windows.items())
    return f"REGISTER RSTREAM <{out}> AS\nCONSTRUCT {{ {template} }}\n{froms}WHERE {{ {where} }}\n"


def recent_rule(out: str, template: str, streams: list[str], where: str) -> str:
    """A chained rule under ``CONSUME RECENT``, which takes one window: C-SPARQL's default
    window over several streams (``FROM STREAM``), whose patterns also match static data."""
    froms = "".join(f"FROM STREAM <{stream}> {MEMORY}\n" for stream in streams)
    return f"REGISTER RSTREAM <{out}> AS\nCONSTRUCT {{ {template} }}\n{froms}WHERE {{ {where} }}\nCONSUME RECENT\n"


def epa1(source: str, out: str) -> dict[str, str]:
    """EPA1-Stateless: events generated during business hours, HOURS(?time) in 9..16."""
    return {"EPA1": rule(out, EVENT, {"in": (source, PER_EVENT)},
                         "WINDOW <in> { " + EVENT + " } ?h t:hourOfDay ?hour ; t:lexicalHour ?lex "
                         "FILTER(CONTAINS(STR(?time), ?lex) && ?hour > 8 && ?hour < 17)")}


def epa2(source: str, out: str) -> dict[str, str]:
    """EPA2-Stateful: one event per hour, an event passing when its hour of day differs from
    the hour in memory. INSTANS updates ``:stateful :hour`` only when an event passes; the
    memory here holds every event's hour, which is the same hour (an event that does not
    pass has the hour already there). A rule that updated it from its own output would be
    one derivation deeper at every pass, and edgewave stops chains at depth 8 by design."""
    memory, passed = f"{T}EPA2-memory", f"{T}EPA2-pass"
    hour = "?h t:hourOfDay ?hour ; t:lexicalHour ?lex"
    return {
        "EPA2-memory": rule(memory, ":stateful :hour ?hour", {"in": (source, PER_EVENT)},
                            f"WINDOW <in> {{ ?event ep:hasEventObjectSamplingTime ?time }} {hour} "
                            "FILTER(CONTAINS(STR(?time), ?lex))"),
        # RECENT: the newest sampling time (this event's) and the newest memory triple (the
        # previous event's: this event's own enters after it); neither pattern shares a variable
        "EPA2-Stateful-update-memory": recent_rule(
            passed, ":stateful :passEvent ?event", [source, memory],
            f"?event ep:hasEventObjectSamplingTime ?time . :stateful :hour ?prevhour . "
            f"{hour} FILTER(CONTAINS(STR(?time), ?lex) && ?hour != ?prevhour)"),
        "EPA2-Stateful-pass-one-event-per-hour": rule(
            out, EVENT, {"p": (passed, PER_EVENT), "in": (source, PER_EVENT)},
            "WINDOW <p> { :stateful :passEvent ?event } WINDOW <in> { " + EVENT + " }"),
    }


def epa2_seed(first_ms: int) -> dict[str, list[str]]:
    """EPA2-Init's ``INSERT DATA { :stateful :hour -1 }``: the memory's first triple, on its
    stream just before the first event."""
    return {f"{T}EPA2-memory": [f'{first_ms - 1}\t<{COLON}stateful> <{COLON}hour> "-1"^^<{XSD}integer> .']}


def epa3_local(source: str, out: str) -> dict[str, str]:
    """EPA3-Enrich as the example runs it without the network: the location name bound to "Espoo"."""
    return {"EPA3": rule(out, EVENT + ' ?event :locationName "Espoo" .', {"in": (source, PER_EVENT)},
                         "WINDOW <in> { " + EVENT + " }")}


def epa4(source: str, out: str) -> dict[str, str]:
    """EPA4-Project: the event without ``:locationName`` (INSTANS: ``FILTER (?p != :locationName)``)."""
    return {"EPA4": rule(out, EVENT, {"in": (source, PER_EVENT)}, "WINDOW <in> { " + EVENT + " }")}


def epa5(source: str, geo_out: str, sensor_out: str) -> dict[str, str]:
    """EPA5-Split: a geo channel (time and a new point) and a sensor channel (time and sensor)."""
    where = "WINDOW <in> { " + EVENT + " }"
    return {
        "EPA5-geo": rule(geo_out, "?event a ep:EventObject ; ep:hasEventObjectSamplingTime ?time ; geo:Point _:p . "
                                  "_:p geo:lat ?lat ; geo:long ?long .", {"in": (source, PER_EVENT)}, where),
        "EPA5-sensor": rule(sensor_out, "?event a ep:EventObject ; ssn:Sensor ?sensor ; "
                                        "ep:hasEventObjectSamplingTime ?time .", {"in": (source, PER_EVENT)}, where),
    }


def epa7(geo: str, sensor: str, out: str) -> dict[str, str]:
    """EPA7-Compose: the two channels joined on the event again."""
    return {"EPA7": rule(out, "?event a ep:EventObject ; ssn:Sensor ?sensor ; geo:Point _:p ; "
                              "ep:hasEventObjectSamplingTime ?time . _:p geo:lat ?lat ; geo:long ?long .",
                         {"g": (geo, PER_EVENT), "s": (sensor, PER_EVENT)},
                         "WINDOW <g> { ?event a ep:EventObject ; geo:Point ?point . ?point geo:lat ?lat ; "
                         "geo:long ?long } WINDOW <s> { ?event a ep:EventObject ; ssn:Sensor ?sensor ; "
                         "ep:hasEventObjectSamplingTime ?time }")}


def epa6(source: str) -> dict[str, str]:
    """EPA6-Aggregate: events per hour, evaluated per one-hour tumbling window instance
    (an aggregate needs a window's content as a whole; docs/engine.md, "Per-instance queries").
    INSTANS counts a run of consecutive events with one hour of day, a window the events of
    one clock hour: the same on the sample, where no run spans two days."""
    return {"EPA6": (f"REGISTER RSTREAM <{INSTANS}eventcounts> AS\n"
                     "SELECT ?hour (COUNT(?event) AS ?count)\n"
                     f"FROM NAMED WINDOW <w> ON <{source}> [RANGE PT1H STEP PT1H]\n"
                     "WHERE { WINDOW <w> { ?event ep:hasEventObjectSamplingTime ?time } "
                     "?h t:hourOfDay ?hour ; t:lexicalHour ?lex FILTER(CONTAINS(STR(?time), ?lex)) }\n"
                     "GROUP BY ?hour\n")}


def epa8(source: str, out: str, label: str) -> dict[str, str]:
    """EPA8-Pattern: each event's compass direction from the sensor's previous point
    (EPA8-Transform), then a direction of the pattern's index 1 followed, at the sensor's
    next event, by the one of index 2 (EPA8-1..5; the pattern is static data, and the
    query is written for a pattern of length 2, as the sample's). INSTANS advances an index
    through the pattern and resets it on a mismatch, which for two different directions is
    the same as two consecutive ones. A sensor's first event has no previous point, and no
    direction here."""
    last, links, directions = f"{T}EPA8-last", f"{T}EPA8-previous", f"{INSTANS}directions"
    return {
        # the memory: each sensor's newest event
        "EPA8-memory": rule(last, "?sensor t:lastEvent ?event", {"in": (source, PER_EVENT)},
                            "WINDOW <in> { ?event ssn:Sensor ?sensor }"),
        # RECENT: this sensor's newest event and its newest memory triple, the previous event's
        "EPA8-previous": recent_rule(links, "?event t:previous ?previous", [source, last],
                                     "?event ssn:Sensor ?sensor . ?sensor t:lastEvent ?previous "
                                     "FILTER(!sameTerm(?previous, ?event))"),
        "EPA8-Transform": rule(
            directions, "?event a ep:EventObject ; ssn:Sensor ?sensor ; ep:hasEventObjectSamplingTime ?time ; "
                        ":direction ?dir .", {"l": (links, PER_EVENT), "in": (source, MEMORY)},
            "WINDOW <l> { ?event t:previous ?previous } WINDOW <in> { " + EVENT + " ?previous geo:Point ?prevpoint . "
            "?prevpoint geo:lat ?prevlat ; geo:long ?prevlong } ?d t:label ?dir ; t:latSign ?ns ; t:longSign ?ew "
            "FILTER(IF(?lat > ?prevlat, 1, IF(?lat < ?prevlat, -1, 0)) = ?ns && "
            "IF(?long > ?prevlong, 1, IF(?long < ?prevlong, -1, 0)) = ?ew)"),
        "EPA8-Pattern": rule(
            out, f'_:d a ep:EventObject ; :patterndetected "{label}" ; ssn:Sensor ?sensor ; :lastEvent ?event .',
            {"l": (links, MEMORY), "d": (directions, MEMORY)},
            "WINDOW <l> { ?event t:previous ?previous } WINDOW <d> { ?previous :direction ?first . "
            "?event :direction ?second ; ssn:Sensor ?sensor } "
            ":pattern :length 2 . ?i1 :index 1 ; :value ?first . ?i2 :index 2 ; :value ?second"),
    }


# -- Close Friends (closefriends/) ---------------------------------------------------------

CF = "http://example.org/#"   # the ':' of CF-Queries-default.rq; the data's <#p1> read against http://example.org/
FOAF = "http://xmlns.com/foaf/0.1/"
EVENT_NS = "http://purl.org/NET/c4dm/event.owl#"
TL = "http://purl.org/NET/c4dm/timeline.owl#"
_TERM = re.compile(r'<[^>]*>|_:[A-Za-z0-9]+|"(?:[^"\\]|\\.)*"(?:\^\^<[^>]*>|@[A-Za-z-]+)?')


@dataclass(frozen=True)
class FriendEvent:
    event: str
    person: str
    lat: float
    long: float
    ms: int
    statements: tuple[str, ...]


def read_close_friends(path: Path) -> tuple[list[str], list[FriendEvent]]:
    """(static statements, events in file order). The file is one statement a line with
    IRIs relative to the document (``<#p1>``); an event is the lines from its ``a event:Event``
    to the next event's."""
    static: list[str] = []
    groups: list[list[tuple[str, str, str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        terms = [t.replace("<#", f"<{CF}", 1) if t.startswith("<#") else t for t in _TERM.findall(line)]
        if len(terms) != 3:
            continue
        s, p, o = terms
        if p == "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>" and o == f"<{EVENT_NS}Event>":
            groups.append([])
        if groups:
            groups[-1].append((s, p, o))
        else:
            static.append(f"{s} {p} {o} .")
    events = []
    for triples in groups:
        value = {p: o for _, p, o in triples}
        events.append(FriendEvent(
            event=triples[0][0], person=value[f"<{EVENT_NS}agent>"],
            lat=float(from_n3(value[f"<{GEO}lat>"]).toPython()), long=float(from_n3(value[f"<{GEO}long>"]).toPython()),
            ms=epoch_ms(from_n3(value[f"<{TL}at>"])),
            statements=tuple(f"{s} {p} {o} ." for s, p, o in triples)))
    return static, events


def friends(static: list[str]) -> list[tuple[str, str]]:
    """The ``foaf:knows`` pairs of the static part, as (person1, person2) IRIs in brackets."""
    pairs = []
    for statement in static:
        s, p, o = _TERM.findall(statement)
        if p == f"<{FOAF}knows>":
            pairs.append((s, o))
    return sorted(pairs)


def close_friends_reference(events: list[FriendEvent], knows: list[tuple[str, str]]) -> list[tuple[str, str, int]]:
    """CF-Queries-default.rq by its meaning, in plain Python: (person1, person2, ms) notifications.

    RemoveOldEvents keeps each person's newest event; after each event, for every pair of
    friends with a newest event each: DetectNearby makes ``:nearby`` when both |Δlat| and
    |Δlong| are below 0.01 and it is not there yet (Notification reports it then, once),
    DetectNotNearby removes it when either is above 0.02; in between, nothing changes."""
    latest: dict[str, tuple[float, float]] = {}
    nearby: set[tuple[str, str]] = set()
    notified = []
    for event in events:
        latest[event.person] = (event.lat, event.long)
        for a, b in knows:
            if event.person not in (a, b) or a not in latest or b not in latest:
                continue
            d_lat, d_long = abs(latest[b][0] - latest[a][0]), abs(latest[b][1] - latest[a][1])
            if d_lat < 0.01 and d_long < 0.01:
                if (a, b) not in nearby:
                    nearby.add((a, b))
                    notified.append((a, b, event.ms))
            elif d_lat > 0.02 or d_long > 0.02:
                nearby.discard((a, b))
    return notified


def pair_iri(a: str, b: str) -> str:
    return f"<{T}pair-{a.strip('<>').rpartition('#')[2]}-{b.strip('<>').rpartition('#')[2]}>"


def pair_table(knows: list[tuple[str, str]]) -> list[str]:
    """A node per ordered pair of friends (``t:first``, ``t:second``): what the status of a
    pair is about. INSTANS states it as ``?person1 :nearby ?person2`` and deletes it; an
    edgewave rule only adds triples, so the pair's successive statuses are triples about
    the pair, the newest of which is the current one."""
    return [row for a, b in knows
            for row in (f"{pair_iri(a, b)} <{T}first> {a} .", f"{pair_iri(a, b)} <{T}second> {b} .")]


def status_seed(knows: list[tuple[str, str]], first_ms: int) -> dict[str, list[str]]:
    """Where INSTANS starts, no pair is ``:nearby``: each pair's previous status is "not
    nearby" before the first event."""
    return {f"{T}cf-previous-status": [f"{first_ms - 1}\t{pair_iri(a, b)} <{T}wasStatus> <{T}NotNearby> ."
                                       for a, b in knows]}


CF_PREFIXES = (f"PREFIX cf: <{CF}>\nPREFIX foaf: <{FOAF}>\nPREFIX event: <{EVENT_NS}>\nPREFIX tl: <{TL}>\n")
CF_EVENT = ("?event{n} event:agent ?person{n} ; event:place ?place{n} . "
            "?place{n} geo:lat ?lat{n} ; geo:long ?long{n} .")


def close_friends_queries(events_stream: str) -> dict[str, str]:
    """CF-Queries-default.rq as chained rules and one SELECT (docs/engine.md, "Chained rules",
    "Consumption strategies")."""
    latest, pairs, status, previous = (f"{T}cf-latest", f"{T}cf-current-pairs", f"{T}cf-status",
                                       f"{T}cf-previous-status")
    near = "ABS(?lat2 - ?lat1) < 0.01 && ABS(?long2 - ?long1) < 0.01"
    far = "ABS(?lat2 - ?lat1) > 0.02 || ABS(?long2 - ?long1) > 0.02"
    queries = {
        # RemoveOldEvents, read the other way: a complete event is its person's latest
        "latest": rule(latest, "?person t:latestEvent ?event", {"e": (events_stream, PER_EVENT)},
                       "WINDOW <e> { ?event event:agent ?person ; event:place ?place ; event:time ?time . "
                       "?place geo:lat ?lat ; geo:long ?long . ?time tl:at ?at }"),
        # each person's newest event (RECENT: ?event1 and ?event2 occur in no other pattern)
        # with each friend's, whenever either changes
        "current-pairs": recent_rule(pairs, "?event1 t:currentWith ?event2", [latest],
                                     "?person1 t:latestEvent ?event1 . ?person2 t:latestEvent ?event2 . "
                                     "?person1 foaf:knows ?person2"),
        # DetectNearby and DetectNotNearby: the pair's status, when the two are < 0.01 or > 0.02 apart
        "status": rule(status, "?pair t:status ?status",
                       {"p": (pairs, PER_EVENT), "e": (events_stream, MEMORY)},
                       "WINDOW <p> { ?event1 t:currentWith ?event2 } WINDOW <e> { "
                       + CF_EVENT.format(n=1) + " " + CF_EVENT.format(n=2) + " } "
                       "?pair t:first ?person1 ; t:second ?person2 . ?status a t:Status "
                       f"FILTER((sameTerm(?status, t:Nearby) && {near}) || "
                       f"(sameTerm(?status, t:NotNearby) && ({far})))"),
        # the status a moment later: read beside the next one, it is the previous one
        "previous-status": rule(previous, "?pair t:wasStatus ?status", {"s": (status, PER_EVENT)},
                                "WINDOW <s> { ?pair t:status ?status }"),
        # Notification: a pair that is nearby now and was not before (RECENT: the pair's newest
        # status and newest previous status; the seed says "not nearby" before any)
        "Notification": (f"REGISTER RSTREAM <{CF}Notification> AS SELECT ?person1 ?person2\n"
                         f"FROM STREAM <{status}> {MEMORY}\nFROM STREAM <{previous}> {MEMORY}\n"
                         "WHERE { ?pair t:status ?now . ?pair t:wasStatus ?before . "
                         "?pair t:first ?person1 ; t:second ?person2 "
                         "FILTER(sameTerm(?now, t:Nearby) && !sameTerm(?before, t:Nearby)) }\nCONSUME RECENT\n"),
    }
    return {name: CF_PREFIXES + text for name, text in queries.items()}


def status_table() -> list[str]:
    return [f"<{T}Nearby> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{T}Status> .",
            f"<{T}NotNearby> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{T}Status> ."]
