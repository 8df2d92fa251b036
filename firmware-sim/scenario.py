"""Scenarios: situations injected into the background stream at given times.

A scenario file (``configs/scenarios/*.yaml``) lists events; each event takes over some
sensors of one gateway for a while and makes them report given values at given offsets
(a fire in room 3 at t=120 s, a patient episode, two friends meeting, an intrusion).
The injected readings are plain ``Reading`` objects: the ground truth (truth.py) is
computed from them and the background, not from the engine.

Event kinds and their keys (offsets in seconds after ``at``):

- ``fire``: ``room``; ``smoke`` (offsets of smoke-alarm reports, default [0]);
  ``temperature`` ([offset, degrees C] pairs, default [[8, 63.5]]).
- ``intrusion``: ``door_room``, ``motion_room`` (default room1); ``door_open`` (offsets,
  default [0]); ``door_closed`` (offsets, default []); ``motion`` (offsets, default [6]).
- ``patient-episode``: ``patient``; ``heart_rate``, ``breathing_rate``, ``spo2``
  ([offset, value, confidence] triples, each default []).
- ``friends-meeting``: ``place`` ([d_lat, d_long] from the site's position);
  ``reports`` ({person: [offsets]}); positions scatter by up to ``spread`` degrees
  (default 0.0005) around the place.
- ``readings``: ``sensor`` (e.g. room5-temperature); ``values`` ([offset, value] or
  [offset, value, confidence]); for decoys and anything the kinds above do not cover.
- ``silence``: ``sensor``; ``for_s`` (default 60): the sensor sends nothing from ``at`` for
  ``for_s`` seconds (a flat battery, a lost radio link), what per-window-instance queries
  such as silent-rooms notice.

Every event has ``gateway`` (default gw1), ``at`` (seconds after the run's start) and
``hold_s`` (default 5): how long after its last injected reading the sensors it took
over stay quiet before their normal reports resume (a silence has no readings and no
hold: its sensor is quiet for exactly ``for_s``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .observation import Reading
from .site import SensorSpec, Site

EVENT_KINDS = ("fire", "intrusion", "patient-episode", "friends-meeting", "readings", "silence")


class ScenarioError(ValueError):
    """A scenario the simulator cannot inject: which event and why."""


@dataclass
class Scenario:
    name: str
    description: str
    duration_s: float | None
    events: list[dict[str, Any]]
    seed: int | None = None
    source: str = "<inline>"


@dataclass(frozen=True)
class Silence:
    """A sensor that sends nothing in [start, end) (epoch ms), and the event that said so."""

    gateway: str
    sensor: str
    start: int
    end: int
    event: int


@dataclass
class Injection:
    """What a scenario does to a run: extra readings, and when the sensors it uses are quiet."""

    readings: list[Reading] = field(default_factory=list)
    pauses: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    silences: list[Silence] = field(default_factory=list)


def load_scenario(path: str | Path) -> Scenario:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {path} is not valid YAML: {exc}") from None
    return scenario_from_dict(data, source=str(path))


def scenario_from_dict(data: dict[str, Any], source: str = "<inline>") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping with name, duration_s, events")
    unknown = set(data) - {"name", "description", "duration_s", "seed", "events"}
    if unknown:
        raise ScenarioError(f"{source}: unknown key(s) {sorted(unknown)}")
    events = data.get("events") or []
    if not isinstance(events, list):
        raise ScenarioError(f"{source}: events must be a list")
    for i, event in enumerate(events):
        if not isinstance(event, dict) or event.get("kind") not in EVENT_KINDS:
            raise ScenarioError(f"{source}: events[{i}].kind must be one of {', '.join(EVENT_KINDS)}")
        if not isinstance(event.get("at"), (int, float)) or event["at"] < 0:
            raise ScenarioError(f"{source}: events[{i}].at must be a number of seconds >= 0")
    duration = data.get("duration_s")
    return Scenario(
        name=str(data.get("name") or Path(source).stem),
        description=str(data.get("description", "")),
        duration_s=None if duration is None else float(duration),
        events=events,
        seed=data.get("seed"),
        source=source,
    )


class _Builder:
    def __init__(self, scenario: Scenario, sites: dict[str, Site], start_ms: int) -> None:
        self.scenario = scenario
        self.sites = sites
        self.start_ms = start_ms
        self.injection = Injection()
        self.taken: dict[tuple[str, str, int], int] = {}

    def where(self, i: int) -> str:
        return f"{self.scenario.source}: events[{i}] ({self.scenario.events[i]['kind']})"

    def site(self, i: int, event: dict[str, Any]) -> Site | None:
        gw = str(event.get("gateway", "gw1"))
        if gw not in self.sites:
            return None  # the gateway is not part of this run (--gateway): nothing to inject
        return self.sites[gw]

    def sensor(self, i: int, site: Site, local: str) -> SensorSpec:
        try:
            return site.sensor(local)
        except KeyError as exc:
            raise ScenarioError(f"{self.where(i)}: {exc.args[0]}") from None

    def add(self, i: int, event: dict[str, Any], sensor: SensorSpec, offset: Any, value: Any,
            confidence: Any = None) -> None:
        if not isinstance(offset, (int, float)) or offset < 0:
            raise ScenarioError(f"{self.where(i)}: offset {offset!r} must be a number of seconds >= 0")
        ms = self.start_ms + int(round((float(event["at"]) + float(offset)) * 1000))
        key = (sensor.gateway, sensor.local, ms)
        if key in self.taken:
            raise ScenarioError(f"{self.where(i)}: {sensor.local} already reports at t={ms - self.start_ms} ms "
                                f"(events[{self.taken[key]}]); a sensor reports at most once per millisecond")
        self.taken[key] = i
        if confidence is not None:
            confidence = float(confidence)
            if not 0.0 <= confidence <= 1.0:
                raise ScenarioError(f"{self.where(i)}: confidence {confidence} is not within 0..1")
        elif sensor.kind.confidence:
            raise ScenarioError(f"{self.where(i)}: {sensor.local} annotates a confidence: "
                                "give [offset, value, confidence]")
        self.injection.readings.append(Reading(ms, sensor, value, confidence, event=i))

    def hold(self, i: int, event: dict[str, Any]) -> None:
        """Keep the sensors this event used quiet from its first to its last reading + hold_s."""
        hold_ms = int(round(float(event.get("hold_s", 5)) * 1000))
        spans: dict[tuple[str, str], list[int]] = {}
        for r in self.injection.readings:
            if r.event == i:
                spans.setdefault((r.sensor.gateway, r.sensor.local), []).append(r.ms)
        for key, times in spans.items():
            self.injection.pauses.setdefault(key, []).append((min(times), max(times) + hold_ms + 1))

    # -- event kinds -------------------------------------------------------------------

    def fire(self, i: int, event: dict[str, Any], site: Site) -> None:
        room = str(event.get("room", ""))
        if room not in site.rooms:
            raise ScenarioError(f"{self.where(i)}: room {room!r} is not on {site.gateway} ({', '.join(site.rooms)})")
        smoke = self.sensor(i, site, f"{room}-smoke")
        thermometer = self.sensor(i, site, f"{room}-temperature")
        for offset in event.get("smoke", [0]):
            self.add(i, event, smoke, offset, True)
        for offset, celsius in event.get("temperature", [[8, 63.5]]):
            self.add(i, event, thermometer, offset, round(float(celsius), 1))

    def intrusion(self, i: int, event: dict[str, Any], site: Site) -> None:
        door = self.sensor(i, site, f"{event.get('door_room', 'room1')}-door")
        motion = self.sensor(i, site, f"{event.get('motion_room', 'room1')}-motion")
        for offset in event.get("door_open", [0]):
            self.add(i, event, door, offset, "open")
        for offset in event.get("door_closed", []):
            self.add(i, event, door, offset, "closed")
        for offset in event.get("motion", [6]):
            self.add(i, event, motion, offset, True)

    def patient_episode(self, i: int, event: dict[str, Any], site: Site) -> None:
        name = str(event.get("patient", ""))
        if name not in site.patients:
            raise ScenarioError(f"{self.where(i)}: no patient {name!r} on {site.gateway} ({', '.join(site.patients)})")
        for kind in ("heart_rate", "breathing_rate", "spo2"):
            entries = event.get(kind, [])
            if entries:
                sensor = self.sensor(i, site, f"{name}-{kind}")
                for entry in entries:
                    if len(entry) != 3:
                        raise ScenarioError(f"{self.where(i)}: {kind} entries are [offset, value, confidence]")
                    offset, value, confidence = entry
                    self.add(i, event, sensor, offset, round(float(value)), confidence)

    def friends_meeting(self, i: int, event: dict[str, Any], site: Site) -> None:
        d_lat, d_long = (float(v) for v in event.get("place", [0.0, 0.05]))
        center = (site.position[0] + d_lat, site.position[1] + d_long)
        spread = float(event.get("spread", 0.0005))
        rng = random.Random(f"{self.scenario.name}/{i}")
        reports = event.get("reports") or {}
        if not isinstance(reports, dict) or not reports:
            raise ScenarioError(f"{self.where(i)}: reports must map people to lists of offsets")
        for name, offsets in reports.items():
            if name not in site.people:
                raise ScenarioError(f"{self.where(i)}: no person {name!r} on {site.gateway} ({', '.join(site.people)})")
            sensor = self.sensor(i, site, f"{name}-location")
            for offset in offsets:
                position = (round(center[0] + rng.uniform(-spread, spread), 6),
                            round(center[1] + rng.uniform(-spread, spread), 6))
                self.add(i, event, sensor, offset, position)

    def readings(self, i: int, event: dict[str, Any], site: Site) -> None:
        sensor = self.sensor(i, site, str(event.get("sensor", "")))
        for entry in event.get("values", []):
            offset, value, *rest = entry
            if sensor.kind.result == "boolean":
                value = bool(value)
            elif sensor.kind.result == "decimal":
                value = float(value)
            elif sensor.kind.result == "location":
                value = (round(site.position[0] + float(value[0]), 6), round(site.position[1] + float(value[1]), 6))
            else:
                value = str(value)
            self.add(i, event, sensor, offset, value, rest[0] if rest else None)

    def silence(self, i: int, event: dict[str, Any], site: Site) -> None:
        sensor = self.sensor(i, site, str(event.get("sensor", "")))
        length = event.get("for_s", 60)
        if not isinstance(length, (int, float)) or length <= 0:
            raise ScenarioError(f"{self.where(i)}: for_s {length!r} must be a number of seconds > 0")
        start = self.start_ms + int(round(float(event["at"]) * 1000))
        end = start + int(round(float(length) * 1000))
        self.injection.silences.append(Silence(sensor.gateway, sensor.local, start, end, i))
        self.injection.pauses.setdefault((sensor.gateway, sensor.local), []).append((start, end))

    def check_silences(self) -> None:
        """An injected reading inside a silence of its sensor contradicts the scenario."""
        for quiet in self.injection.silences:
            for r in self.injection.readings:
                same = (r.sensor.gateway, r.sensor.local) == (quiet.gateway, quiet.sensor)
                if same and quiet.start <= r.ms < quiet.end:
                    raise ScenarioError(
                        f"{self.where(r.event)}: {quiet.sensor} reports at t={r.ms - self.start_ms} ms, "
                        f"while events[{quiet.event}] keeps it silent")


def inject(scenario: Scenario, sites: list[Site], start_ms: int) -> Injection:
    """The readings and pauses of a scenario over the given sites (others are skipped)."""
    builder = _Builder(scenario, {site.gateway: site for site in sites}, start_ms)
    for i, event in enumerate(scenario.events):
        site = builder.site(i, event)
        if site is None:
            continue
        getattr(builder, event["kind"].replace("-", "_"))(i, event, site)
        builder.hold(i, event)
    builder.check_silences()
    builder.injection.readings.sort(key=lambda r: r.ms)
    return builder.injection
