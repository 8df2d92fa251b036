"""`configs/sim.yaml`: the simulated fleet, with working defaults for every option.

Every option is documented in configs/sim.yaml itself and in docs/sim.md. A bad file
raises ``SettingsError`` naming the file and the option, so an operator knows what to fix.
A gateway's broker has the shape every tier shares (``edgewave.shared.broker``: address,
credentials, TLS) plus the sensors' QoS and client id prefix.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from edgewave.shared.broker import BrokerSettings, TlsSettings
from edgewave.shared.settings import SettingsError, bind, check_keys, read_yaml, setting

from .sensors import KINDS

__all__ = ["GatewaySettings", "SensorBrokerSettings", "SettingsError", "SimConfig", "SimConfigError", "TlsSettings",
           "load_config", "parse_start"]

# The name the simulator's tests and callers have used for SettingsError.
SimConfigError = SettingsError

DEFAULT_SITE: dict[str, Any] = {
    "rooms": 7,
    "room_sensors": ["temperature", "humidity", "co2", "smoke", "motion", "door"],
    "acme_rooms": [3, 6],
    "armed": False,
    "fire_temperature_threshold": 57,
    "position": [60.16, 24.88],
    "nearby_within_degrees": 0.005,
    "home_radius_degrees": 0.004,
    "patients": [
        {"name": "rut", "wearables": ["heart_rate", "breathing_rate", "spo2"], "vendor": "medisense",
         "heart_rate_upper_limit": 100, "breathing_rate_lower_limit": 10, "minimum_confidence": 0.8},
        {"name": "olle", "wearables": ["heart_rate", "breathing_rate"], "vendor": "sosa",
         "heart_rate_upper_limit": 110, "breathing_rate_lower_limit": 10, "minimum_confidence": 0.8},
    ],
    "people": [
        {"name": "alice", "home": [0.03, 0.0]},
        {"name": "bob", "home": [-0.03, 0.0]},
        {"name": "carol", "home": [0.0, 0.03]},
    ],
    "friends": [["alice", "bob"]],
}


@dataclass
class SensorBrokerSettings(BrokerSettings):
    """A gateway's local broker as its sensors reach it: client id ``<client_id_prefix>-<gateway>``."""

    # QoS 1: the local broker keeps a message for the agent until the agent has it on disk
    # (docs/agent.md, Durable windows); QoS 0 is fire-and-forget, lost if the agent is down.
    qos: int = setting(1, choices=(0, 1, 2))
    client_id_prefix: str = "edgewave-sim"

    def client_id(self, name: str) -> str:
        """The MQTT client id of the connection for gateway ``name``."""
        return f"{self.client_id_prefix}-{name}"


@dataclass(frozen=True)
class GatewaySettings:
    """One gateway: its id, its site (the template with this gateway's overrides), its broker."""

    id: str
    index: int
    site: dict[str, Any]
    broker: SensorBrokerSettings


@dataclass(frozen=True)
class SimConfig:
    seed: int
    start_ms: int
    duration_s: float | None
    rate_per_sensor: float | None
    periods: dict[str, float]
    gateways: tuple[GatewaySettings, ...]
    broker: SensorBrokerSettings
    format: str = "ntriples"      # payload format of the messages (payload_formats.py)
    source: str = "<defaults>"
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def gateway(self, gateway_id: str) -> GatewaySettings:
        for gw in self.gateways:
            if gw.id == gateway_id:
                return gw
        raise SettingsError(f"gateway {gateway_id!r} is not in {self.source} (has: "
                            f"{', '.join(g.id for g in self.gateways)})")


def parse_start(value: Any) -> int:
    """Epoch milliseconds of an ISO-8601 UTC instant (``2026-01-05T08:00:00Z``)."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise SettingsError(f"start: {value!r} is not an ISO-8601 instant like 2026-01-05T08:00:00Z") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    return int(round(moment.timestamp() * 1000))


def _site(template: dict[str, Any], overrides: dict[str, Any], where: str) -> dict[str, Any]:
    check_keys(overrides, DEFAULT_SITE, where)
    site = copy.deepcopy(template)
    site.update(copy.deepcopy(overrides))
    for name in site["room_sensors"]:
        if name not in KINDS or KINDS[name].stream != "building":
            raise SettingsError(f"{where}.room_sensors: {name!r} is not a room sensor kind")
    if not isinstance(site["rooms"], int) or site["rooms"] < 1:
        raise SettingsError(f"{where}.rooms: must be a positive integer")
    for patient in site["patients"]:
        if "name" not in patient:
            raise SettingsError(f"{where}.patients: every patient needs a name")
        if patient.get("vendor", "sosa") not in ("sosa", "medisense"):
            raise SettingsError(f"{where}.patients[{patient['name']}].vendor: wearables speak 'sosa' or 'medisense'")
        for wearable in patient.get("wearables", []):
            if wearable not in KINDS or KINDS[wearable].stream != "health":
                raise SettingsError(f"{where}.patients[{patient['name']}]: {wearable!r} is not a wearable kind")
    names = [p["name"] for p in site["people"]] + [p["name"] for p in site["patients"]]
    if len(set(names)) != len(names):
        raise SettingsError(f"{where}: patient and people names must be unique")
    people = {p["name"] for p in site["people"]}
    for pair in site["friends"]:
        if len(pair) != 2 or not set(pair) <= people:
            raise SettingsError(f"{where}.friends: {pair!r} must name two of the people {sorted(people)}")
    return site


KNOWN_KEYS = ("seed", "start", "duration_s", "rate_per_sensor", "format", "sensors", "broker", "site", "gateways")


def load_config(path: str | Path | None = None, *, gateways: int | None = None,
                rate: float | None = None, seed: int | None = None, payload_format: str | None = None) -> SimConfig:
    """Read a sim config (None: the built-in defaults); the flags override the file."""
    if path is None:
        return _config({}, "<defaults>", gateways, rate, seed, payload_format)
    raw = read_yaml(path) or {}
    try:
        return _config(raw, str(path), gateways, rate, seed, payload_format)
    except SettingsError as exc:
        raise exc.in_file(path) from None


def _payload_format(value: Any) -> str:
    from .payload_formats import FORMATS   # payload_formats builds on fleet, which imports this module

    if value not in FORMATS:
        raise SettingsError(f"format: {value!r} is not a payload format; known: {', '.join(FORMATS)}")
    return str(value)


def _config(raw: Any, source: str, gateways: int | None, rate: float | None, seed: int | None,
            payload_format: str | None = None) -> SimConfig:
    if not isinstance(raw, dict):
        raise SettingsError("expected a mapping at the top level")
    check_keys(raw, KNOWN_KEYS)

    periods = {name: kind.period_s for name, kind in KINDS.items()}
    for name, opts in (raw.get("sensors") or {}).items():
        if name not in KINDS:
            raise SettingsError(f"sensors.{name}: unknown sensor kind; known: {sorted(KINDS)}")
        period = (opts or {}).get("period_s")
        if period is not None:
            if float(period) <= 0:
                raise SettingsError(f"sensors.{name}.period_s: must be > 0")
            periods[name] = float(period)

    broker = bind(SensorBrokerSettings, raw.get("broker"), key="broker")
    template = _site(DEFAULT_SITE, raw.get("site") or {}, "site")

    entries = raw.get("gateways") or [{"id": "gw1", "armed": True}, {"id": "gw2", "armed": False}]
    if gateways is not None:
        if gateways < 1:
            raise SettingsError("--gateways: must be at least 1")
        # Load tests: gw1..gwN from the template; the file's entries keep their overrides.
        by_id = {str(e.get("id")): e for e in entries}
        entries = [by_id.get(f"gw{i}", {"id": f"gw{i}", "armed": i % 2 == 1}) for i in range(1, gateways + 1)]
    built = []
    seen = set()
    for index, entry in enumerate(entries):
        entry = dict(entry)
        gw_id = str(entry.pop("id", "") or "")
        if not gw_id or any(c in gw_id for c in "/+#- ") or gw_id in seen:
            raise SettingsError(f"gateways[{index}].id: {gw_id!r} must be unique, non-empty, without / + # - or spaces")
        seen.add(gw_id)
        gw_broker = bind(SensorBrokerSettings, entry.pop("broker", None), key=f"gateways[{gw_id}].broker", base=broker)
        site = _site(template, entry, f"gateways[{gw_id}]")
        built.append(GatewaySettings(gw_id, index, site, gw_broker))

    rate_value = rate if rate is not None else raw.get("rate_per_sensor")
    if rate_value is not None and float(rate_value) <= 0:
        raise SettingsError("rate_per_sensor: must be > 0 (messages per sensor per second)")
    duration = raw.get("duration_s", 600)
    return SimConfig(
        seed=int(seed if seed is not None else raw.get("seed", 42)),
        start_ms=parse_start(raw.get("start", "2026-01-05T08:00:00Z")),
        duration_s=None if duration is None else float(duration),
        rate_per_sensor=None if rate_value is None else float(rate_value),
        periods=periods,
        gateways=tuple(built),
        broker=broker,
        format=_payload_format(payload_format if payload_format is not None else raw.get("format", "ntriples")),
        source=source,
        raw=raw,
    )
