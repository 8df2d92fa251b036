"""Sensor kinds and the small state machines that produce their readings.

Each simulated sensor is one ``Firmware``: a value model with state (drift, door
position, a walker's position), a confidence model for the kinds that annotate their
results, and a reporting period with jitter. Everything draws from the sensor's own
``random.Random``, seeded from (run seed, gateway, sensor), so one sensor's stream does
not change when others are added or removed.

Normal operation is *bounded*: every model clamps its values to a documented safe range
(``SensorKind.safe_range``) that no pattern threshold of the example site can be crossed
from, so background noise never makes a pattern fire (see docs/sim.md, "Ground truth").
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from . import domain


@dataclass(frozen=True)
class SensorKind:
    """What a kind of sensor measures and how it reports."""

    name: str
    sensor_class: str                 # the generic class (ew:...)
    vendor_classes: dict[str, str]    # dialect -> vendor sub-class
    observed_property: str
    stream: str                       # topic stream segment
    period_s: float                   # default reporting period
    result: str                       # decimal | boolean | door | location
    confidence: bool = False          # RDF-star ew:confidence annotation on the result
    safe_range: tuple[float, float] | None = None  # background values stay inside


KINDS: dict[str, SensorKind] = {
    k.name: k
    for k in (
        SensorKind("temperature", domain.ew("TemperatureSensor"), {"acme": domain.acme("ClimateSensorCS5")},
                   domain.ew("AirTemperature"), "building", 10.0, "decimal", safe_range=(12.0, 32.0)),
        SensorKind("humidity", domain.ew("HumiditySensor"), {"acme": domain.acme("ClimateSensorCS5")},
                   domain.ew("RelativeHumidity"), "building", 30.0, "decimal", safe_range=(20.0, 70.0)),
        SensorKind("co2", domain.ew("CO2Sensor"), {"acme": domain.acme("CO2SensorC7")},
                   domain.ew("CO2Concentration"), "building", 30.0, "decimal", safe_range=(400.0, 1500.0)),
        SensorKind("smoke", domain.ew("SmokeDetector"), {"acme": domain.acme("SmokeDetectorX200")},
                   domain.ew("Smoke"), "building", 60.0, "boolean"),
        SensorKind("motion", domain.ew("MotionSensor"), {"acme": domain.acme("MotionSensorPIR9")},
                   domain.ew("Motion"), "building", 10.0, "boolean"),
        SensorKind("door", domain.ew("DoorContactSensor"), {"acme": domain.acme("DoorContactD2")},
                   domain.ew("DoorState"), "building", 30.0, "door"),
        SensorKind("heart_rate", domain.ew("HeartRateMonitor"), {"medisense": domain.medi("VitalBand")},
                   domain.ew("HeartRate"), "health", 10.0, "decimal", confidence=True, safe_range=(52.0, 92.0)),
        SensorKind("breathing_rate", domain.ew("BreathingRateSensor"), {"medisense": domain.medi("RespiBelt")},
                   domain.ew("BreathingRate"), "health", 10.0, "decimal", confidence=True,
                   safe_range=(12.0, 22.0)),
        SensorKind("spo2", domain.ew("PulseOximeter"), {"medisense": domain.medi("VitalBand")},
                   domain.ew("OxygenSaturation"), "health", 30.0, "decimal", confidence=True,
                   safe_range=(93.0, 100.0)),
        SensorKind("location", domain.ew("LocationTracker"), {}, domain.ew("Location"), "location", 30.0,
                   "location"),
    )
}


def seconds_of_day(t_epoch_s: float) -> float:
    return t_epoch_s % 86400.0


def daily_cycle(t_epoch_s: float, peak_hour: float) -> float:
    """-1..1, +1 at ``peak_hour`` (UTC) each day."""
    return math.cos(2 * math.pi * (seconds_of_day(t_epoch_s) / 3600.0 - peak_hour) / 24.0)


def daytime_activity(t_epoch_s: float) -> float:
    """0..1: how busy an occupied building is at this hour (office hours)."""
    hour = seconds_of_day(t_epoch_s) / 3600.0
    if 8.0 <= hour < 18.0:
        return 1.0 - abs(hour - 13.0) / 10.0
    return 0.05


@dataclass
class ContinuousModel:
    """A value with a daily cycle, a bounded random-walk drift and Gaussian noise."""

    base: float
    daily_amplitude: float
    peak_hour: float
    drift_step: float
    drift_limit: float
    noise: float
    low: float
    high: float
    decimals: int = 1
    drift: float = 0.0

    def read(self, t_epoch_s: float, rng: random.Random) -> float:
        self.drift = max(-self.drift_limit, min(self.drift_limit, self.drift + rng.gauss(0.0, self.drift_step)))
        value = self.base + self.daily_amplitude * daily_cycle(t_epoch_s, self.peak_hour) + self.drift
        value += rng.gauss(0.0, self.noise)
        return round(max(self.low, min(self.high, value)), self.decimals)


@dataclass
class MotionModel:
    """PIR motion: true with a probability that follows office hours; never while armed."""

    armed: bool

    def read(self, t_epoch_s: float, rng: random.Random) -> bool:
        if self.armed:
            return False
        return rng.random() < 0.6 * daytime_activity(t_epoch_s)


@dataclass
class DoorModel:
    """A door that people open and close during the day; stays shut while armed."""

    armed: bool
    open: bool = False

    def read(self, t_epoch_s: float, rng: random.Random) -> str:
        if self.armed:
            self.open = False
        elif self.open:
            self.open = rng.random() < 0.3
        else:
            self.open = rng.random() < 0.4 * daytime_activity(t_epoch_s)
        return "open" if self.open else "closed"


@dataclass
class SmokeModel:
    """A smoke detector's periodic heartbeat: no smoke in normal operation."""

    def read(self, t_epoch_s: float, rng: random.Random) -> bool:
        return False


@dataclass
class WalkerModel:
    """A person wandering around home: a random walk kept within ``radius`` degrees of home."""

    home_lat: float
    home_long: float
    radius: float
    step: float = 0.0004
    lat: float = field(default=0.0)
    long: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.lat, self.long = self.home_lat, self.home_long

    def read(self, t_epoch_s: float, rng: random.Random) -> tuple[float, float]:
        lat = self.lat + rng.gauss(0.0, self.step)
        long = self.long + rng.gauss(0.0, self.step)
        d_lat, d_long = lat - self.home_lat, long - self.home_long
        if abs(d_lat) > self.radius:
            lat = self.home_lat + math.copysign(self.radius, d_lat)
        if abs(d_long) > self.radius:
            long = self.home_long + math.copysign(self.radius, d_long)
        self.lat, self.long = lat, long
        return (round(lat, 6), round(long, 6))


@dataclass
class ConfidenceModel:
    """How much a wearable trusts its own reading: mostly high, sometimes a motion artefact."""

    def read(self, rng: random.Random) -> float:
        if rng.random() < 0.1:
            return round(rng.uniform(0.45, 0.78), 2)
        return round(rng.uniform(0.82, 0.99), 2)


def value_model(kind: SensorKind, *, armed: bool, home: tuple[float, float] | None, radius: float,
                rng: random.Random):
    """A fresh state machine for one sensor of ``kind``; per-sensor offsets drawn from ``rng``."""
    low, high = kind.safe_range or (0.0, 0.0)
    if kind.name == "temperature":
        return ContinuousModel(21.0 + rng.uniform(-1.5, 1.5), 2.0, 15.0, 0.05, 1.5, 0.1, low, high)
    if kind.name == "humidity":
        return ContinuousModel(42.0 + rng.uniform(-5, 5), -6.0, 15.0, 0.2, 5.0, 0.5, low, high)
    if kind.name == "co2":
        return ContinuousModel(650.0 + rng.uniform(-80, 80), 200.0, 13.0, 5.0, 100.0, 10.0, low, high, 0)
    if kind.name == "heart_rate":
        return ContinuousModel(70.0 + rng.uniform(-5, 5), 6.0, 14.0, 0.3, 5.0, 2.0, low, high, 0)
    if kind.name == "breathing_rate":
        return ContinuousModel(16.0 + rng.uniform(-1, 1), 1.0, 14.0, 0.1, 1.5, 0.6, low, high, 0)
    if kind.name == "spo2":
        return ContinuousModel(97.0, 0.5, 14.0, 0.05, 0.8, 0.4, low, high, 0)
    if kind.name == "smoke":
        return SmokeModel()
    if kind.name == "motion":
        return MotionModel(armed)
    if kind.name == "door":
        return DoorModel(armed)
    if kind.name == "location":
        if home is None:
            raise ValueError("a location tracker needs a home position")
        return WalkerModel(home[0], home[1], radius)
    raise ValueError(f"unknown sensor kind {kind.name!r}")

