"""The fleet: every sensor of every gateway, merged into one time-ordered stream of messages.

A ``Firmware`` is one sensor's state machine (value model, confidence, reporting period
with jitter) driven by its own seeded random generator. ``fleet_readings`` merges all of
them with a scenario's injected readings; the result is a pure function of (config,
scenario, seed), so the same seed gives the identical stream whether it is written to a
file in a second or published in real time (the clock is the caller's business).
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Iterable, Iterator

from .config import SimConfig
from .observation import Reading, encode
from .sensors import ConfidenceModel, value_model
from .site import SensorSpec, Site, build_site


@dataclass(frozen=True)
class Message:
    """One MQTT message: one observation event (several N-Triples lines) on one topic, or,
    in a device payload format (payload_formats.py), the device's own payload as ``body``
    with no lines."""

    ms: int
    gateway: str
    topic: str
    lines: tuple[str, ...]
    body: bytes | None = None

    @property
    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        return ("\n".join(self.lines) + "\n").encode("utf-8")


def to_message(reading: Reading) -> Message:
    return Message(reading.ms, reading.sensor.gateway, reading.sensor.topic, tuple(encode(reading)))


class Firmware:
    """One sensor: reports a reading every period (with 2 % jitter) from its state machine.

    ``paused`` intervals (epoch ms, end exclusive) are when a scenario has taken the sensor
    over; the state machine still advances, so the rest of the stream is the same as
    without the scenario.
    """

    def __init__(self, spec: SensorSpec, site: Site, period_s: float, seed: int) -> None:
        self.spec = spec
        self.period_s = period_s
        self.rng = random.Random(f"{seed}/{spec.gateway}/{spec.local}")
        home = site.people[spec.place].home if spec.kind.result == "location" else None
        self.model = value_model(spec.kind, armed=site.armed, home=home, radius=site.home_radius, rng=self.rng)
        self.confidence = ConfidenceModel() if spec.kind.confidence else None
        self.paused: list[tuple[int, int]] = []

    def readings(self, start_ms: int, end_ms: int | None) -> Iterator[Reading]:
        rng = self.rng
        t = rng.uniform(0.0, self.period_s)
        while True:
            ms = start_ms + int(round(t * 1000))
            if end_ms is not None and ms >= end_ms:
                return
            value = self.model.read(ms / 1000.0, rng)
            confidence = self.confidence.read(rng) if self.confidence else None
            if not any(a <= ms < b for a, b in self.paused):
                yield Reading(ms, self.spec, value, confidence)
            t += self.period_s * (1.0 + rng.uniform(-0.02, 0.02))


def build_sites(config: SimConfig, gateways: Iterable[str] | None = None) -> list[Site]:
    wanted = None if gateways is None else set(gateways)
    if wanted is not None:
        for gw in wanted:
            config.gateway(gw)  # raises a clear error for an unknown id
    return [build_site(gw) for gw in config.gateways if wanted is None or gw.id in wanted]


def fleet_readings(config: SimConfig, sites: list[Site], *, duration_s: float | None,
                   injected: list[Reading] = (), pauses: dict[tuple[str, str], list[tuple[int, int]]] | None = None,
                   ) -> Iterator[Reading]:
    """Every reading of every sensor of ``sites`` plus ``injected``, in time order.

    Ties are broken by gateway then sensor order, so the order is fully determined.
    """
    start = config.start_ms
    end = None if duration_s is None else start + int(round(duration_s * 1000))
    pauses = pauses or {}
    order: dict[tuple[str, str], tuple[int, int]] = {}
    sources = []
    for site in sites:
        for n, spec in enumerate(site.sensors):
            order[(spec.gateway, spec.local)] = (site.index, n)
            period = 1.0 / config.rate_per_sensor if config.rate_per_sensor else config.periods[spec.kind.name]
            fw = Firmware(spec, site, period, config.seed)
            fw.paused = sorted(pauses.get((spec.gateway, spec.local), []))
            sources.append(((r.ms, site.index, n, 0, r) for r in fw.readings(start, end)))
    extra = []
    for i, r in enumerate(injected):
        key = (r.sensor.gateway, r.sensor.local)
        if key not in order:
            continue  # a gateway not selected for this run
        if end is not None and r.ms >= end:
            continue
        extra.append((r.ms, *order[key], 1 + i, r))
    extra.sort(key=lambda item: item[:4])
    sources.append(iter(extra))
    for item in heapq.merge(*sources, key=lambda item: item[:4]):
        yield item[4]


def fleet_messages(readings: Iterable[Reading]) -> Iterator[Message]:
    for reading in readings:
        yield to_message(reading)
