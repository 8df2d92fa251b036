"""Payload formats: one reading as the MQTT message a real device of that kind would publish.

A gateway's broker rarely hears N-Triples from off-the-shelf devices: Zigbee sensors come
through Zigbee2MQTT, Wi-Fi plugs and sensors run Tasmota or ESPHome, industrial ones speak
SenML. The agent maps those payloads back onto SOSA observations (RML presets), so the
simulator publishes the same readings in each of these shapes to exercise that path.

A format only changes how a reading is written: the readings, their times, their order and
the ground truth are the same in every format. A reading a format cannot express (vital
signs with their RDF-star confidence, locations; smoke, motion and door in Tasmota, whose
switch inputs mean whatever a site wires to them) is published as N-Triples on its
``ew/in/<stream>/<sensor>`` topic, as in the ``ntriples`` format. Vendor dialects (acme,
medisense) only shape N-Triples; a device payload is the same whatever the dialect.

The device name in every topic is the sensor's local id (``room3-temperature``): a device
knows nothing of the gateway, since each gateway has its own broker.
"""
from __future__ import annotations

import json
import zlib
from datetime import datetime, timezone
from typing import Any, Callable

from edgewave.shared.decimal_lexical import decimal_lexical

from .fleet import Message, to_message
from .observation import Reading

__all__ = ["DEFAULT_FORMAT", "FORMATS", "device_message", "encoder", "to_format_message"]

DEFAULT_FORMAT = "ntriples"

# A device encoder returns (topic, payload) or None when the format cannot express the reading.
DeviceEncoder = Callable[[Reading], "tuple[str, bytes] | None"]


def _json(document: Any) -> bytes:
    """Compact JSON, as the devices' firmware writes it (no spaces), keys in the order given."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _device(reading: Reading) -> str:
    return reading.sensor.local


def _number(reading: Reading) -> float:
    return float(reading.value)


def _stable(text: str) -> int:
    """A number fixed by ``text`` (not drawn from the sensors' generators, which would change the stream)."""
    return zlib.crc32(text.encode("utf-8"))


def battery(reading: Reading) -> int:
    """A Zigbee device's battery percentage: fixed per sensor, 60-100."""
    sensor = reading.sensor
    return 60 + _stable(f"battery/{sensor.gateway}/{sensor.local}") % 41


def linkquality(reading: Reading) -> int:
    """A Zigbee link quality (LQI, 0-255): per sensor 80-200, varying by up to +-10 per report."""
    sensor = reading.sensor
    base = 80 + _stable(f"lqi/{sensor.gateway}/{sensor.local}") % 121
    return base + _stable(f"lqi/{sensor.gateway}/{sensor.local}/{reading.ms}") % 21 - 10


# ---- Zigbee2MQTT: zigbee2mqtt/<device>, the device's state as one JSON object ----

_Z2M_KEY = {"temperature": "temperature", "humidity": "humidity", "co2": "co2", "smoke": "smoke",
            "motion": "occupancy", "door": "contact"}


def zigbee2mqtt(reading: Reading) -> tuple[str, bytes] | None:
    """``{"<expose>": value, "battery": b, "linkquality": q}``; a contact sensor's ``contact``
    is true when the door is closed (the magnet touches the reed switch)."""
    kind = reading.sensor.kind.name
    key = _Z2M_KEY.get(kind)
    if key is None:
        return None
    if kind == "door":
        value: Any = reading.value == "closed"
    elif reading.sensor.kind.result == "boolean":
        value = bool(reading.value)
    else:
        value = _number(reading)
    body = {key: value, "battery": battery(reading), "linkquality": linkquality(reading)}
    return f"zigbee2mqtt/{_device(reading)}", _json(body)


# ---- Tasmota: tele/<device>/SENSOR, the periodic telemetry ----

_TASMOTA = {"temperature": ("AM2301", "Temperature", True), "humidity": ("AM2301", "Humidity", True),
            "co2": ("MHZ19B", "CarbonDioxide", False)}


def tasmota_time(ms: int) -> str:
    """Tasmota's ``Time``: the UTC time of the reading to the second, without a zone."""
    return datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def tasmota(reading: Reading) -> tuple[str, bytes] | None:
    """``{"Time": t, "<sensor>": {"<Quantity>": v}[, "TempUnit": "C"]}``; only the climate and CO2
    sensors: a Tasmota switch input (smoke, motion, door) has no meaning of its own."""
    entry = _TASMOTA.get(reading.sensor.kind.name)
    if entry is None:
        return None
    sensor, quantity, temp_unit = entry
    body: dict[str, Any] = {"Time": tasmota_time(reading.ms), sensor: {quantity: _number(reading)}}
    if temp_unit:
        body["TempUnit"] = "C"
    return f"tele/{_device(reading)}/SENSOR", _json(body)


# ---- ESPHome: <device>/sensor/<name>/state, a plain-text state per entity ----

_ESPHOME_SENSORS = ("temperature", "humidity", "co2")
_ESPHOME_BINARY = ("smoke", "motion", "door")


def esphome(reading: Reading) -> tuple[str, bytes] | None:
    """A number as its shortest decimal text (``63.5``, ``650``: the same lexical form the
    N-Triples carry), a binary sensor as ``ON``/``OFF`` (a door ``ON`` when open)."""
    kind = reading.sensor.kind.name
    device = _device(reading)
    if kind in _ESPHOME_SENSORS:
        return f"{device}/sensor/{kind}/state", decimal_lexical(_number(reading)).encode("ascii")
    if kind in _ESPHOME_BINARY:
        on = reading.value == "open" if kind == "door" else bool(reading.value)
        return f"{device}/binary_sensor/{kind}/state", b"ON" if on else b"OFF"
    return None


# ---- SenML (RFC 8428): senml/<device>, a pack of one record ----

_SENML_UNITS = {"temperature": "Cel", "humidity": "%RH", "co2": "ppm"}


def senml(reading: Reading) -> tuple[str, bytes] | None:
    """``[{"bn": "urn:dev:ew:<device>:", "bt": seconds, "n": kind, "u": unit, "v": v}]``;
    booleans as ``vb``, the door as ``vs`` ("open"/"closed")."""
    kind = reading.sensor.kind.name
    device = _device(reading)
    record: dict[str, Any] = {"bn": f"urn:dev:ew:{device}:", "bt": reading.ms / 1000.0, "n": kind}
    if kind in _SENML_UNITS:
        record["u"] = _SENML_UNITS[kind]
        record["v"] = _number(reading)
    elif kind in ("smoke", "motion"):
        record["vb"] = bool(reading.value)
    elif kind == "door":
        record["vs"] = str(reading.value)
    else:
        return None
    return f"senml/{device}", _json([record])


FORMATS: dict[str, DeviceEncoder | None] = {
    "ntriples": None,          # today's SOSA N-Triples on ew/in/<stream>/<sensor>
    "senml": senml,
    "zigbee2mqtt": zigbee2mqtt,
    "tasmota": tasmota,
    "esphome": esphome,
}


def check_format(name: str) -> str:
    """``name`` if it is a known format, else ValueError naming the known ones."""
    if name not in FORMATS:
        raise ValueError(f"unknown payload format {name!r}; known: {', '.join(FORMATS)}")
    return name


def device_message(reading: Reading, name: str) -> Message | None:
    """The reading as the device payload of format ``name``, or None where it cannot say it."""
    encode = FORMATS[check_format(name)]
    if encode is None:
        return None
    encoded = encode(reading)
    if encoded is None:
        return None
    topic, body = encoded
    return Message(reading.ms, reading.sensor.gateway, topic, (), body)


def to_format_message(reading: Reading, name: str = DEFAULT_FORMAT) -> Message:
    """The message a sensor publishes in format ``name``: its device payload, or N-Triples."""
    return device_message(reading, name) or to_message(reading)


def encoder(name: str) -> Callable[[Reading], Message]:
    """``to_format_message`` bound to one format (checked once), for the hot loop."""
    check_format(name)
    if FORMATS[name] is None:
        return to_message
    return lambda reading: device_message(reading, name) or to_message(reading)
