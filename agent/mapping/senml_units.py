"""SenML's registered units (RFC 8428 section 12.1, and RFC 8798's additions) as QUDT unit IRIs.

Used by ``ew:valueTable ew:SenMLUnits``: a SenML ``u``/``bu`` value becomes the unit's
IRI in ``http://qudt.org/vocab/unit/``, which the dashboard reads through ``qudt:unit``.
Units with no QUDT counterpart (``Bspl``, ``var``, ``/``...) are left out: a record using
one is refused (``unmapped_value``) by a mapping that asks for its unit.
"""
from __future__ import annotations

from .vocabulary import UNIT

_QUDT_LOCAL = {
    "m": "M", "kg": "KiloGM", "g": "GM", "s": "SEC", "A": "A", "K": "K", "cd": "CD", "mol": "MOL",
    "Hz": "HZ", "rad": "RAD", "sr": "SR", "N": "N", "Pa": "PA", "J": "J", "W": "W", "C": "C", "V": "V",
    "F": "FARAD", "Ohm": "OHM", "S": "S", "Wb": "WB", "T": "T", "H": "H", "Cel": "DEG_C", "lm": "LM",
    "lx": "LUX", "Bq": "BQ", "Gy": "GRAY", "Sv": "SV", "kat": "KAT", "m2": "M2", "m3": "M3", "l": "L",
    "m/s": "M-PER-SEC", "m/s2": "M-PER-SEC2", "m3/s": "M3-PER-SEC", "l/s": "L-PER-SEC",
    "W/m2": "W-PER-M2", "cd/m2": "CD-PER-M2", "bit": "BIT", "bit/s": "BIT-PER-SEC",
    "lat": "DEG", "lon": "DEG", "pH": "PH", "dB": "DeciB", "%": "PERCENT", "%RH": "PERCENT_RH",
    "%EL": "PERCENT", "EL": "SEC", "1/s": "PER-SEC", "1/min": "PER-MIN", "beat/min": "BEAT-PER-MIN",
    "S/m": "S-PER-M", "B": "BYTE", "VA": "V-A", "J/m": "J-PER-M", "kg/m3": "KiloGM-PER-M3", "deg": "DEG",
    "count": "NUM", "ppm": "PPM", "ms": "MilliSEC", "min": "MIN", "h": "HR", "MHz": "MegaHZ",
    "kW": "KiloW", "kVA": "KiloV-A", "Ah": "A-HR", "Wh": "W-HR", "kWh": "KiloW-HR", "mV": "MilliV",
    "mA": "MilliA", "dBm": "DeciB_M", "ug/m3": "MicroGM-PER-M3", "mm/h": "MilliM-PER-HR", "m/h": "M-PER-HR",
    "ppb": "PPB", "/100m": "PER-M", "%/s": "PERCENT-PER-SEC", "km/h": "KiloM-PER-HR", "mm": "MilliM",
    "kPa": "KiloPA", "hPa": "HectoPA",
}

SENML_UNITS: dict[str, str] = {unit: f"<{UNIT}{local}>" for unit, local in _QUDT_LOCAL.items()}
"""SenML unit symbol -> QUDT unit IRI term."""
