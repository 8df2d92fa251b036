"""Real sensor data as SOSA observations: the UCI occupancy and air-quality data sets.

Both are CSV with one row per time step; each non-missing cell becomes one observation
(one MQTT message) by the plain-SOSA firmware dialect, timestamped with the row's time
(read as UTC: the data sets give local time without a zone). The mapping, column by
column, is in docs/sim.md. The data are not in the repository: download them from the UCI Machine Learning
Repository and point the converter at the file.
"""
from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from edgewave.shared import vocab

from . import domain
from .fleet import Message, to_message
from .observation import Reading
from .sensors import SensorKind
from .site import SensorSpec

log = logging.getLogger("edgewave.firmware_sim.datasets")

UCI_MISSING = -200.0


@dataclass(frozen=True)
class Column:
    """One CSV column: which sensor reports it, what it observes, how its value reads."""

    name: str
    sensor: str             # sensor local name
    sensor_class: str
    observed_property: str
    result: str = "decimal"  # decimal | boolean
    target: str | None = None  # metal-oxide sensors: the gas they respond to


def _kind(col: Column, stream: str) -> SensorKind:
    return SensorKind(col.sensor, col.sensor_class, {}, col.observed_property, stream, 60.0, col.result)


OCCUPANCY_COLUMNS = (
    Column("Temperature", "temperature", domain.ew("TemperatureSensor"), domain.ew("AirTemperature")),
    Column("Humidity", "humidity", domain.ew("HumiditySensor"), domain.ew("RelativeHumidity")),
    Column("Light", "light", domain.ew("LightSensor"), domain.ew("Illuminance")),
    Column("CO2", "co2", domain.ew("CO2Sensor"), domain.ew("CO2Concentration")),
    Column("HumidityRatio", "humidity-ratio", domain.ew("HumiditySensor"), domain.ew("HumidityRatio")),
    Column("Occupancy", "occupancy-camera", domain.ew("OccupancySensor"), domain.ew("Occupancy"), "boolean"),
)

AIRQUALITY_COLUMNS = (
    Column("CO_GT", "co-analyser", domain.ew("GasSensor"), domain.ew("COConcentration")),
    Column("PT08_S1_CO", "mox-s1", domain.ew("GasSensor"), domain.ew("MetalOxideResponse"),
           target=domain.ew("COConcentration")),
    Column("NMHC_GT", "nmhc-analyser", domain.ew("GasSensor"), domain.ew("NMHCConcentration")),
    Column("C6H6_GT", "benzene-analyser", domain.ew("GasSensor"), domain.ew("BenzeneConcentration")),
    Column("PT08_S2_NMHC", "mox-s2", domain.ew("GasSensor"), domain.ew("MetalOxideResponse"),
           target=domain.ew("NMHCConcentration")),
    Column("NOx_GT", "nox-analyser", domain.ew("GasSensor"), domain.ew("NOxConcentration")),
    Column("PT08_S3_NOx", "mox-s3", domain.ew("GasSensor"), domain.ew("MetalOxideResponse"),
           target=domain.ew("NOxConcentration")),
    Column("NO2_GT", "no2-analyser", domain.ew("GasSensor"), domain.ew("NO2Concentration")),
    Column("PT08_S4_NO2", "mox-s4", domain.ew("GasSensor"), domain.ew("MetalOxideResponse"),
           target=domain.ew("NO2Concentration")),
    Column("PT08_S5_O3", "mox-s5", domain.ew("GasSensor"), domain.ew("MetalOxideResponse"),
           target=domain.ew("O3Concentration")),
    Column("T", "temperature", domain.ew("TemperatureSensor"), domain.ew("AirTemperature")),
    Column("RH", "humidity", domain.ew("HumiditySensor"), domain.ew("RelativeHumidity")),
    Column("AH", "absolute-humidity", domain.ew("HumiditySensor"), domain.ew("AbsoluteHumidity")),
)


@dataclass(frozen=True)
class Dataset:
    name: str
    gateway: str        # IRIs and topics are minted under this id
    feature: str        # local name of the feature of interest
    stream: str
    columns: tuple[Column, ...]


DATASETS = {
    "uci-occupancy": Dataset("uci-occupancy", "uci-occupancy", "office", "building", OCCUPANCY_COLUMNS),
    "uci-airquality": Dataset("uci-airquality", "uci-airquality", "street", "air", AIRQUALITY_COLUMNS),
}


class DatasetError(ValueError):
    """A data file that does not look like the data set it was given as."""


@dataclass
class ConversionStats:
    rows: int = 0
    observations: int = 0
    missing: int = 0
    bad_rows: int = 0


def _sensors(ds: Dataset) -> dict[str, SensorSpec]:
    foi = domain.site_iri(ds.gateway, ds.feature)
    return {c.name: SensorSpec(ds.gateway, c.sensor, _kind(c, ds.stream), "sosa", foi, ds.feature) for c in ds.columns}


def static_triples(ds: Dataset) -> list[tuple[str, str, str]]:
    """The inventory of a data set's sensors, as an agent would load it."""
    foi = domain.site_iri(ds.gateway, ds.feature)
    out = [(foi, vocab.RDF_TYPE, domain.ROOM if ds.stream == "building" else domain.ew("Space"))]
    specs = _sensors(ds)
    for col in ds.columns:
        spec = specs[col.name]
        out.append((spec.iri, vocab.RDF_TYPE, col.sensor_class))
        out.append((spec.iri, vocab.SOSA_OBSERVES, col.observed_property))
        out.append((spec.iri, domain.LOCATED_IN, foi))
        if col.target:
            out.append((spec.iri, domain.ew("metalOxideResponseOf"), col.target))
    return list(dict.fromkeys(out))


def _row_time(ds: Dataset, row: dict[str, str]) -> int:
    if ds.name == "uci-occupancy":
        moment = datetime.strptime(row["Date"], "%Y-%m-%d %H:%M:%S")
    else:
        moment = datetime.strptime(f"{row['Date']} {row['Time']}", "%d/%m/%Y %H:%M:%S")
    return int(moment.replace(tzinfo=timezone.utc).timestamp() * 1000)


def _rows(reader: csv.DictReader, path: str | Path) -> Iterator[dict[str, str]]:
    """The reader's rows; a file that stops being UTF-8 CSV text is a DatasetError."""
    try:
        yield from reader
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _unreadable(path, reader, exc) from None


def _unreadable(path: str | Path, reader: csv.DictReader, exc: Exception) -> DatasetError:
    if isinstance(exc, UnicodeDecodeError):  # text is decoded ahead in blocks: no line to name
        return DatasetError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x}: {exc.reason})")
    return DatasetError(f"{path}: after line {reader.line_num}: not CSV as expected ({exc})")


def convert(name: str, path: str | Path, *, limit: int | None = None,
            stats: ConversionStats | None = None) -> Iterator[Message]:
    """The messages of a data file, in time order; missing values (-200) are skipped."""
    if name not in DATASETS:
        raise DatasetError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
    ds = DATASETS[name]
    stats = stats if stats is not None else ConversionStats()
    specs = _sensors(ds)
    last_ms = -1
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        try:
            fieldnames = reader.fieldnames
        except (UnicodeDecodeError, csv.Error) as exc:
            raise _unreadable(path, reader, exc) from None
        wanted = {c.name for c in ds.columns} | ({"Date"} if name == "uci-occupancy" else {"Date", "Time"})
        missing_cols = wanted - set(fieldnames or [])
        if missing_cols:
            raise DatasetError(f"{path}: not {name} data, columns {sorted(missing_cols)} are missing")
        for line_no, row in enumerate(_rows(reader, path), 2):
            if limit is not None and stats.rows >= limit:
                return
            try:
                ms = _row_time(ds, row)
            except (ValueError, TypeError):
                stats.bad_rows += 1
                log.warning("dataset_row_skipped file=%s line=%d reason=bad_time", path, line_no)
                continue
            if ms <= last_ms:  # observations are named by sensor and time: one row per instant
                stats.bad_rows += 1
                log.warning("dataset_row_skipped file=%s line=%d reason=%s", path, line_no,
                            "duplicate_time" if ms == last_ms else "time_goes_back")
                continue
            stats.rows += 1
            last_ms = ms
            for col in ds.columns:
                text = (row.get(col.name) or "").strip()
                try:
                    number = float(text)
                except ValueError:
                    stats.missing += 1
                    continue
                if number == UCI_MISSING or not math.isfinite(number):  # inf and nan measure nothing
                    stats.missing += 1
                    continue
                value = bool(int(number)) if col.result == "boolean" else number
                stats.observations += 1
                yield to_message(Reading(ms, specs[col.name], value))
