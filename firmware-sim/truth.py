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
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from .observation import Reading, result_term
from .sensors import KINDS
from .site import Site

# Window widths of the patterns (RANGE in configs/patterns/*.rq; a test keeps them equal).
WINDOW_MS = {
    "fire": 60_000,
    "intrusion": 60_000,
    "abnormal-patient": 300_000,
    "close-friends": 120_000,
}
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
        raise AmbiguousScenario(f"{pattern}: {what} {value} equals its threshold {limit}; make it clearly above or below")
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
            return _above("abnormal-patient", f"confidence of {r.observation}", r.confidence, patient.minimum_confidence)

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


def ground_truth(sites: list[Site], readings: Iterable[Reading]) -> list[ExpectedMatch]:
    """Every match the four example patterns must report over ``readings``."""
    per_site: dict[str, dict[str, list[Reading]]] = {
        site.gateway: defaultdict(list) for site in sites
    }
    for r in readings:
        if r.sensor.gateway in per_site:
            per_site[r.sensor.gateway][r.sensor.kind.name].append(r)
    out: list[ExpectedMatch] = []
    for site in sites:
        by_kind = per_site[site.gateway]
        for rule in (_fire, _intrusion, _patient, _friends):
            out.extend(rule(site, by_kind))
    out.sort(key=lambda m: (m.gateway, m.end, m.start, m.pattern, sorted(m.bindings.items())))
    return out


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
    homes = list(site.people.values())
    for i, a in enumerate(homes):
        for b in homes[i + 1:]:
            gap = max(abs(a.home[0] - b.home[0]), abs(a.home[1] - b.home[1])) - 2 * site.home_radius
            if gap <= max(a.nearby_within_degrees, b.nearby_within_degrees):
                problems.append(f"{a.name} and {b.name} live close enough to be 'nearby' in normal operation")
    return problems
