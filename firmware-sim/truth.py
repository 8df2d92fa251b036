"""Ground truth: the matches a correct system must report for a simulated run.

Computed from the readings themselves (values, places, times), independently of the
engine, by the plain meaning of each pattern in configs/patterns/. It looks at every
reading, background included, so the truth is right by construction even if normal
operation produced a match; ``background`` on a row says whether one did (the example
scenarios are designed so that none does: background values stay in safe ranges, see
sensors.py, and people stay near home).

Consumption is unrestricted: every distinct combination of contributing observations
whose time span fits the window is one match, from the first to the last observation's
timestamp. A combination within ``AMBIGUITY_MS`` of the window width, or a value within a
hair of its threshold, is refused (``AmbiguousScenario``): a correct engine could go
either way on window boundaries, so a ground truth must not depend on them.

Per-instance queries (co2-per-room, silent-rooms) have a truth of their own
(``instance_truth``): the rows each tumbling window instance ``[k*W, (k+1)*W)`` in stream
milliseconds must yield. Those boundaries are fixed by the window's semantics, not by a
convention an engine may choose, so nothing there is ambiguous.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any, Iterable

from edgewave.shared import vocab
from edgewave.shared.decimal_lexical import decimal_lexical
from edgewave.shared.ntriples import make_literal

from . import domain
from .observation import Reading, result_term
from .scenario import Silence
from .sensors import KINDS
from .site import Site

# Window widths of the patterns (RANGE in configs/patterns/*.rq; a test keeps them equal).
WINDOW_MS = {
    "fire": 60_000,
    "intrusion": 60_000,
    "abnormal-patient": 300_000,
    "close-friends": 120_000,
    "hot-building": 60_000,
    "silent-sensor-in-alarm": 60_000,
}
# Per-instance queries with a ground truth, each a tumbling window (RANGE = STEP) of this
# width on the stream of the rooms' sensors (a test keeps configs/patterns/<name>.rq so).
INSTANCE_QUERIES = ("co2-per-room", "silent-rooms")
INSTANCE_WINDOW_MS = 60_000
INSTANCE_STREAM = "building"
CO2 = domain.ew("CO2Concentration")
# Significant digits of an average that is not a terminating decimal (xsd:decimal division
# is implementation-defined in precision; 28 is what common engines, edgewave's included, give).
AVERAGE_DIGITS = 28
AMBIGUITY_MS = 1_500
VALUE_EPSILON = 1e-6
DEGREE_EPSILON = 0.0002


class AmbiguousScenario(ValueError):
    """A scenario whose right answer would depend on window-boundary conventions."""


@dataclass(frozen=True)
class ExpectedMatch:
    gateway: str
    pattern: str
    start: int
    end: int
    bindings: dict[str, str]
    entailment: bool          # only derivable with RDFS entailment (a vendor dialect contributed)
    background: bool          # a background (not injected) reading contributed
    events: tuple[int, ...]   # scenario events that contributed

    def to_json(self, start_ms: int, scenario: str) -> dict[str, Any]:
        return {
            "scenario": scenario,
            "gateway": self.gateway,
            "pattern": self.pattern,
            "start": self.start,
            "end": self.end,
            "start_s": (self.start - start_ms) / 1000.0,
            "end_s": (self.end - start_ms) / 1000.0,
            "bindings": self.bindings,
            "entailment": self.entailment,
            "background": self.background,
            "events": list(self.events),
        }


def _match(site: Site, pattern: str, readings: tuple[Reading, ...], bindings: dict[str, str]) -> ExpectedMatch:
    times = [r.ms for r in readings]
    return ExpectedMatch(
        gateway=site.gateway,
        pattern=pattern,
        start=min(times),
        end=max(times),
        bindings=bindings,
        entailment=any(r.sensor.dialect != "sosa" for r in readings),
        background=any(r.event is None for r in readings),
        events=tuple(sorted({r.event for r in readings if r.event is not None})),
    )


def _check_window(pattern: str, a: Reading, b: Reading) -> bool:
    """True when a and b fit one window; refuses spans too close to the width to call."""
    span = abs(a.ms - b.ms)
    width = WINDOW_MS[pattern]
    if abs(span - width) <= AMBIGUITY_MS:
        raise AmbiguousScenario(
            f"{pattern}: {a.observation} and {b.observation} are {span} ms apart, within "
            f"{AMBIGUITY_MS} ms of the {width} ms window; move them clearly inside or outside")
    return span <= width


def _above(pattern: str, what: str, value: float, limit: float) -> bool:
    if abs(value - limit) <= VALUE_EPSILON:
        raise AmbiguousScenario(f"{pattern}: {what} {value} equals its threshold {limit}; "
                                "make it clearly above or below")
    return value > limit


def _term(r: Reading) -> str:
    return result_term(r.sensor.kind.result, r.value)


def _fire(site: Site, by_kind: dict[str, list[Reading]]) -> Iterable[ExpectedMatch]:
    limit = site.fire_temperature_threshold
    smoke = [r for r in by_kind["smoke"] if r.value is True]
    hot = [r for r in by_kind["temperature"]
           if _above("fire", f"temperature of {r.observation}", float(r.value), limit)]
    for s in smoke:
        for t in hot:
            if s.sensor.place == t.sensor.place and _check_window("fire", s, t):
                yield _match(site, "fire", (s, t), {
                    "room": site.rooms[s.sensor.place], "smokeObs": s.observation,
                    "tempObs": t.observation, "temp": _term(t)})


def _intrusion(site: Site, by_kind: dict[str, list[Reading]]) -> Iterable[ExpectedMatch]:
    if not site.armed:
        return
    opened = [r for r in by_kind["door"] if r.value == "open"]
    moved = [r for r in by_kind["motion"] if r.value is True]
    for d in opened:
        for m in moved:
            if d.ms == m.ms:
                raise AmbiguousScenario(f"intrusion: door {d.observation} and motion {m.observation} at the same ms")
            if d.ms < m.ms and _check_window("intrusion", d, m):
                yield _match(site, "intrusion", (d, m), {
                    "building": site.building, "doorObs": d.observation, "motionObs": m.observation,
                    "door": d.sensor.iri, "motionSensor": m.sensor.iri})


def _patient(site: Site, by_kind: dict[str, list[Reading]]) -> Iterable[ExpectedMatch]:
    for name, patient in site.patients.items():
        def trusted(r: Reading) -> bool:
            return _above("abnormal-patient", f"confidence of {r.observation}", r.confidence,
                          patient.minimum_confidence)

        high = [r for r in by_kind["heart_rate"] if r.sensor.place == name
                and _above("abnormal-patient", f"heart rate {r.observation}", float(r.value),
                           patient.heart_rate_upper_limit) and trusted(r)]
        low = [r for r in by_kind["breathing_rate"] if r.sensor.place == name
               and not _above("abnormal-patient", f"breathing rate {r.observation}", float(r.value),
                              patient.breathing_rate_lower_limit) and trusted(r)]
        for h in high:
            for b in low:
                if _check_window("abnormal-patient", h, b):
                    yield _match(site, "abnormal-patient", (h, b), {
                        "patient": patient.iri, "hrObs": h.observation, "hr": _term(h),
                        "brObs": b.observation, "br": _term(b)})


def _near(d: float, limit: float, a: Reading, b: Reading) -> bool:
    if abs(d - limit) <= DEGREE_EPSILON:
        raise AmbiguousScenario(f"close-friends: {a.observation} and {b.observation} are {d:.6f} degrees apart, "
                                f"too close to the {limit} limit to call")
    return d < limit


def _friends(site: Site, by_kind: dict[str, list[Reading]]) -> Iterable[ExpectedMatch]:
    by_person: dict[str, list[Reading]] = defaultdict(list)
    for r in by_kind["location"]:
        by_person[r.sensor.place].append(r)
    for knower, known in site.friends:
        limit = site.people[knower].nearby_within_degrees
        for a in by_person[knower]:
            for b in by_person[known]:
                if abs(a.ms - b.ms) > WINDOW_MS["close-friends"] + AMBIGUITY_MS:
                    continue
                near = (_near(abs(a.value[0] - b.value[0]), limit, a, b)
                        and _near(abs(a.value[1] - b.value[1]), limit, a, b))
                if near and _check_window("close-friends", a, b):
                    yield _match(site, "close-friends", (a, b), {
                        "person1": site.people[knower].iri, "person2": site.people[known].iri,
                        "obs1": a.observation, "obs2": b.observation})


# The silent-sensor query (configs/scenarios/silent-sensor.rq): a CO2 sensor with no reading
# for this long after one.
SILENCE_MS = 45_000


def _silent_sensor(site: Site, by_kind: dict[str, list[Reading]], stream_end: int) -> Iterable[ExpectedMatch]:
    """Each CO2 reading not followed by another of its sensor within ``SILENCE_MS``, reported
    at its deadline, provided the stream goes on past it (a later reading of the gateway
    moves the clock there; the end of a recording is no silence)."""
    by_sensor: dict[str, list[Reading]] = defaultdict(list)
    for r in by_kind["co2"]:
        by_sensor[r.sensor.iri].append(r)
    for sensor, rows in by_sensor.items():
        rows.sort(key=lambda r: r.ms)
        for last, following in zip(rows, rows[1:] + [None]):
            deadline = last.ms + SILENCE_MS
            gap = (following.ms if following is not None else stream_end) - last.ms
            if following is not None and abs(gap - SILENCE_MS) <= AMBIGUITY_MS:
                raise AmbiguousScenario(f"silent-sensor: {sensor} has a gap of {gap} ms after {last.observation}, "
                                        f"within {AMBIGUITY_MS} ms of {SILENCE_MS} ms")
            if gap > SILENCE_MS and deadline < stream_end:
                yield ExpectedMatch(gateway=site.gateway, pattern="silent-sensor", start=last.ms, end=deadline,
                                    bindings={"sensor": sensor, "lastObs": last.observation},
                                    entailment=last.sensor.dialect != "sosa",
                                    # what fires is the silence, which only a scenario makes
                                    background=False, events=(last.event,) if last.event is not None else ())


HOT_ROOMS = "http://example.org/stream/hot-rooms"  # the rule's name: the stream it makes


def _hot_rooms(site: Site, by_kind: dict[str, list[Reading]]) -> Iterable[ExpectedMatch]:
    """The layered alert (configs/scenarios/hot-rooms.rq, hot-building.rq): the rule matches
    each temperature above the building's fire threshold, and makes "room hotIn building" at
    its time; hot-building pairs two of those of different rooms within the window."""
    limit = site.fire_temperature_threshold
    hot = [r for r in by_kind["temperature"]
           if _above("hot-rooms", f"temperature of {r.observation}", float(r.value), limit)]
    for r in hot:
        yield _match(site, HOT_ROOMS, (r,), {"obs": r.observation, "room": site.rooms[r.sensor.place]})
    for a in hot:
        for b in hot:
            room_a, room_b = site.rooms[a.sensor.place], site.rooms[b.sensor.place]
            if room_a < room_b and _check_window("hot-building", a, b):
                yield _match(site, "hot-building", (a, b), {"building": site.building, "roomA": room_a,
                                                            "roomB": room_b})


# The silent-sensor-in-alarm pattern (configs/patterns/silent-sensor-in-alarm.rq): a CO2 reading
# above the alarm level, then no reading of its sensor for this long.
CO2_ALARM_PPM = 2000.0
ALARM_SILENCE_MS = 10_000


def _silent_in_alarm(site: Site, by_kind: dict[str, list[Reading]], stream_end: int) -> Iterable[ExpectedMatch]:
    """Each CO2 reading above ``CO2_ALARM_PPM`` not followed by another of its sensor within
    ``ALARM_SILENCE_MS``, reported at its deadline. Normal operation never reaches the level
    (sensors.py), so only a scenario's readings count. An unanswered one whose deadline is not
    clearly before the end of the run is refused: a live agent reports it by its clock after
    the stream stops, a recording never does, so the end of the run must not decide it."""
    by_sensor: dict[str, list[Reading]] = defaultdict(list)
    for r in by_kind["co2"]:
        by_sensor[r.sensor.iri].append(r)
    for sensor, rows in by_sensor.items():
        rows.sort(key=lambda r: r.ms)
        for last, following in zip(rows, rows[1:] + [None]):
            if not _above("silent-sensor-in-alarm", f"CO2 of {last.observation}", float(last.value), CO2_ALARM_PPM):
                continue
            deadline = last.ms + ALARM_SILENCE_MS
            if following is not None:
                gap = following.ms - last.ms
                if abs(gap - ALARM_SILENCE_MS) <= AMBIGUITY_MS:
                    raise AmbiguousScenario(f"silent-sensor-in-alarm: {sensor} has a gap of {gap} ms after "
                                            f"{last.observation}, within {AMBIGUITY_MS} ms of {ALARM_SILENCE_MS} ms")
                if gap < ALARM_SILENCE_MS:
                    continue
            if deadline > stream_end - AMBIGUITY_MS:
                raise AmbiguousScenario(f"silent-sensor-in-alarm: {sensor} is silent after {last.observation} "
                                        f"until the end of the run, which comes before its deadline or within "
                                        f"{AMBIGUITY_MS} ms of it (a live agent reports it by its clock, a recording "
                                        "does not); end the silence or start it earlier")
            yield ExpectedMatch(gateway=site.gateway, pattern="silent-sensor-in-alarm", start=last.ms, end=deadline,
                                bindings={"sensor": sensor, "room": site.rooms[last.sensor.place],
                                          "level": _term(last), "lastObs": last.observation},
                                entailment=last.sensor.dialect != "sosa", background=last.event is None,
                                events=(last.event,) if last.event is not None else ())


def _by_site(sites: list[Site], readings: Iterable[Reading]) -> dict[str, dict[str, list[Reading]]]:
    per_site: dict[str, dict[str, list[Reading]]] = {site.gateway: defaultdict(list) for site in sites}
    for r in readings:
        if r.sensor.gateway in per_site:
            per_site[r.sensor.gateway][r.sensor.kind.name].append(r)
    return per_site


def _sorted(matches: list[ExpectedMatch]) -> list[ExpectedMatch]:
    return sorted(matches, key=lambda m: (m.gateway, m.end, m.start, m.pattern, sorted(m.bindings.items())))


def ground_truth(sites: list[Site], readings: Iterable[Reading]) -> list[ExpectedMatch]:
    """Every match the example patterns (configs/patterns/, the shipped gateway config) must
    report over ``readings``."""
    per_site = _by_site(sites, readings)
    out: list[ExpectedMatch] = []
    for site in sites:
        by_kind = per_site[site.gateway]
        for rule in (_fire, _intrusion, _patient, _friends):
            out.extend(rule(site, by_kind))
        times = [r.ms for rows in by_kind.values() for r in rows]  # every reading moves the clock
        if times:
            out.extend(_silent_in_alarm(site, by_kind, max(times)))
    return _sorted(out)


def scenario_query_truth(sites: list[Site], readings: Iterable[Reading]) -> list[ExpectedMatch]:
    """Every match the continuous queries kept beside the scenarios (configs/scenarios/*.rq:
    silent-sensor, the hot-rooms rule and hot-building) must report over ``readings``; apart
    from ``ground_truth``, whose readers count the shipped patterns' matches."""
    per_site = _by_site(sites, readings)
    out: list[ExpectedMatch] = []
    for site in sites:
        by_kind = per_site[site.gateway]
        out.extend(_hot_rooms(site, by_kind))
        times = [r.ms for rows in by_kind.values() for r in rows]  # every reading moves the clock
        if times:
            out.extend(_silent_sensor(site, by_kind, max(times)))
    return _sorted(out)


def background_hazards(site: Site) -> list[str]:
    """Ways normal operation of ``site`` could satisfy a pattern (empty: it cannot)."""
    problems = []
    t_high = KINDS["temperature"].safe_range[1]
    if site.fire_temperature_threshold <= t_high:
        problems.append(f"fire threshold {site.fire_temperature_threshold} is within normal temperatures (<= {t_high})")
    for p in site.patients.values():
        if p.heart_rate_upper_limit <= KINDS["heart_rate"].safe_range[1]:
            problems.append(f"{p.name}: heart-rate limit {p.heart_rate_upper_limit} within normal range")
        if p.breathing_rate_lower_limit >= KINDS["breathing_rate"].safe_range[0]:
            problems.append(f"{p.name}: breathing-rate limit {p.breathing_rate_lower_limit} within normal range")
    if KINDS["co2"].safe_range[1] >= CO2_ALARM_PPM:
        problems.append(f"the CO2 alarm level {CO2_ALARM_PPM} is within normal CO2 readings")
    homes = list(site.people.values())
    for i, a in enumerate(homes):
        for b in homes[i + 1:]:
            gap = max(abs(a.home[0] - b.home[0]), abs(a.home[1] - b.home[1])) - 2 * site.home_radius
            if gap <= max(a.nearby_within_degrees, b.nearby_within_degrees):
                problems.append(f"{a.name} and {b.name} live close enough to be 'nearby' in normal operation")
    return problems


# -- per-instance queries ----------------------------------------------------------------


@dataclass(frozen=True)
class ExpectedInstance:
    """The rows one window instance of a per-instance query must yield (engine-shaped:
    variable -> N-Triples term), in the query's ORDER BY."""

    gateway: str
    query: str
    start: int
    end: int
    rows: tuple[tuple[tuple[str, str], ...], ...]
    entailment: bool          # a vendor-dialect CO2 reading is in the instance: without RDFS entailment the rows differ
    events: tuple[int, ...]   # scenario events that shaped it (CO2 readings in it, silences overlapping it)

    def to_json(self, start_ms: int, scenario: str) -> dict[str, Any]:
        return {
            "scenario": scenario,
            "gateway": self.gateway,
            "query": self.query,
            "window": {"start": self.start, "end": self.end},
            "start_s": (self.start - start_ms) / 1000.0,
            "end_s": (self.end - start_ms) / 1000.0,
            "rows": [dict(row) for row in self.rows],
            "entailment": self.entailment,
            "events": list(self.events),
        }


def average_term(values: list[Decimal]) -> str:
    """AVG of xsd:decimal values: exact when the quotient terminates within AVERAGE_DIGITS
    significant digits, else rounded half-even to them."""
    with localcontext() as ctx:
        ctx.prec = AVERAGE_DIGITS
        ctx.rounding = ROUND_HALF_EVEN
        total = sum(values, Decimal(0))   # exact: the readings have far fewer digits
        average = total / Decimal(len(values))
    return make_literal(format(average, "f"), vocab.XSD_DECIMAL)


def _co2_rooms(site: Site) -> list[str]:
    """Rooms with a CO2 sensor (static: sosa:observes ew:CO2Concentration, ew:locatedIn)."""
    return sorted({site.rooms[s.place] for s in site.sensors
                   if s.kind.observed_property == CO2 and s.kind.stream == INSTANCE_STREAM})


def _co2_per_room(co2: dict[str, list[Reading]]) -> list[tuple[tuple[str, str], ...]]:
    rows = []
    for room in sorted(co2):
        readings = co2[room]
        values = [Decimal(decimal_lexical(float(r.value))) for r in readings]
        low = min(range(len(values)), key=values.__getitem__)
        high = max(range(len(values)), key=values.__getitem__)
        rows.append((("room", room), ("average", average_term(values)),
                     ("lowest", result_term("decimal", readings[low].value)),
                     ("highest", result_term("decimal", readings[high].value)),
                     ("readings", make_literal(str(len(readings)), vocab.XSD_INTEGER))))
    return rows


def instance_truth(sites: list[Site], readings: Iterable[Reading],
                   silences: Iterable[Silence] = ()) -> list[ExpectedInstance]:
    """The rows of co2-per-room and silent-rooms for every minute of the run that holds a
    reading on the rooms' stream (the instances an engine reports by default, non-empty).

    co2-per-room: per room with a CO2 reading in the minute, the average, lowest and
    highest value and how many readings; silent-rooms: the rooms with a CO2 sensor and no
    CO2 reading in the minute. Both are derived from the readings as published, never by
    the engine.
    """
    width = INSTANCE_WINDOW_MS
    busy: dict[str, set[int]] = {site.gateway: set() for site in sites}
    co2: dict[tuple[str, int], dict[str, list[Reading]]] = defaultdict(lambda: defaultdict(list))
    by_site = {site.gateway: site for site in sites}
    for r in readings:
        site = by_site.get(r.sensor.gateway)
        if site is None or r.sensor.kind.stream != INSTANCE_STREAM:
            continue
        k = r.ms // width
        busy[site.gateway].add(k)
        if r.sensor.kind.observed_property == CO2:
            co2[(site.gateway, k)][site.rooms[r.sensor.place]].append(r)
    co2_sensors = {(s.gateway, s.local) for site in sites for s in site.sensors if s.kind.observed_property == CO2}
    quiet = [q for q in silences if (q.gateway, q.sensor) in co2_sensors]
    out: list[ExpectedInstance] = []
    for site in sites:
        rooms = _co2_rooms(site)
        for k in sorted(busy[site.gateway]):
            start, end = k * width, (k + 1) * width
            in_window = co2.get((site.gateway, k), {})
            contributing = [r for rs in in_window.values() for r in rs]
            events = {r.event for r in contributing if r.event is not None}
            events |= {q.event for q in quiet if q.gateway == site.gateway and q.start < end and start < q.end}
            common = dict(gateway=site.gateway, start=start, end=end,
                          entailment=any(r.sensor.dialect != "sosa" for r in contributing),
                          events=tuple(sorted(events)))
            out.append(ExpectedInstance(query="co2-per-room", rows=tuple(_co2_per_room(in_window)), **common))
            silent = tuple((("room", room),) for room in rooms if room not in in_window)
            out.append(ExpectedInstance(query="silent-rooms", rows=silent, **common))
    out.sort(key=lambda i: (i.gateway, i.start, i.query))
    return out
