"""Real data (UCI occupancy, UCI air quality) converted to SOSA observations by the documented
mapping. The data are not in the repository; the tests read the reference data directory beside the checkout and skip without it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import rdflib
from rdflib import Namespace

from edgewave.firmware_sim.cli import main
from reference_data import where
from edgewave.firmware_sim.recording import read_messages

SOSA = Namespace("http://www.w3.org/ns/sosa/")
EW = Namespace("https://edgewave.dev/ns#")


def data_file(shared_data: Path, folder: str, name: str) -> Path:
    path = shared_data / folder / name
    if not path.is_file():
        pytest.skip(f"{path} not found ({where()}; see {folder}/PROVENANCE.md)")  # a failure once the data is there
    return path


def graph_of(message) -> rdflib.Graph:
    return rdflib.Graph().parse(data="\n".join(message.lines) + "\n", format="nt")


def test_uci_occupancy_rows_become_six_sosa_observations(shared_data: Path, tmp_path: Path) -> None:
    source = data_file(shared_data, "uci-occupancy", "datatest.txt")
    out, static = tmp_path / "occ.tsv", tmp_path / "occ.nt"
    assert main(["--log-level", "WARNING", "import", "uci-occupancy", str(source), "--limit", "10",
                 "--out", str(out), "--static", str(static)]) == 0
    messages = list(read_messages(out))
    assert len(messages) == 60
    first_row = source.read_text().splitlines()[1].split(",")  # "2015-02-02 14:19:00",23.7,26.272,585.2,749.2,...
    by_property = {}
    for m in messages[:6]:
        g = graph_of(m)
        obs = next(g.subjects(SOSA.observedProperty, None))
        by_property[g.value(obs, SOSA.observedProperty)] = g.value(obs, SOSA.hasSimpleResult).toPython()
        assert g.value(obs, SOSA.resultTime).toPython().isoformat() == "2015-02-02T14:19:00+00:00"
        assert m.ms == 1422886740000
    assert float(by_property[EW.AirTemperature]) == float(first_row[1])
    assert float(by_property[EW.CO2Concentration]) == float(first_row[4])
    assert by_property[EW.Occupancy] is True
    # The inventory says what each sensor is.
    inventory = rdflib.Graph().parse(static, format="nt")
    assert (None, rdflib.RDF.type, EW.OccupancySensor) in inventory


def test_uci_air_quality_skips_missing_values(shared_data: Path, tmp_path: Path, caplog) -> None:
    source = data_file(shared_data, "uci-airquality", "AirQualityUCI.csv")
    rows = source.read_text().splitlines()[1:201]
    missing = sum(cell == "-200" for row in rows for cell in row.split(",")[2:])
    assert missing > 0  # these rows do contain the -200 sentinel
    out = tmp_path / "air.tsv"
    caplog.set_level("INFO")
    assert main(["import", "uci-airquality", str(source), "--limit", "200", "--out", str(out)]) == 0
    messages = list(read_messages(out))
    assert len(messages) == 200 * 13 - missing
    assert f"missing_values={missing}" in caplog.text
    assert not any('"-200"' in line for m in messages for line in m.lines)
    g = graph_of(messages[0])
    assert (None, SOSA.observedProperty, EW.COConcentration) in g
    assert all(re.match(r"ew/in/air/uci-airquality-", m.topic) for m in messages)


def test_a_file_that_is_not_the_data_set_is_refused(tmp_path: Path, capsys) -> None:
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("a,b\n1,2\n")
    assert main(["import", "uci-occupancy", str(wrong), "--out", str(tmp_path / "x.tsv")]) == 2
    assert "columns" in capsys.readouterr().err
