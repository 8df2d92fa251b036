"""The example gateway config (configs/gateway-config.trig) is assembled from its parts and stays in step."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from edgewave.agent.engine import Engine, parse_query
from edgewave.shared import configdoc

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _assemble(tmp_path: Path) -> str:
    static = tmp_path / "gw1.nt"
    subprocess.run([str(BIN / "edgewave-sim"), "static", "--config", str(REPO / "configs/sim.yaml"),
                    "--gateway", "gw1", "--out", str(static)], check=True, capture_output=True, cwd=REPO)
    out = tmp_path / "config.trig"
    queries = [a for q in sorted((REPO / "configs/patterns").glob("*.rq")) for a in ("--query", str(q))]
    subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--schema", str(REPO / "configs/schema/building.ttl"),
                    "--static", str(static), *queries, "--out", str(out)], check=True, capture_output=True, cwd=REPO)
    return out.read_text()


def test_example_config_is_what_make_config_builds(tmp_path):
    assert _assemble(tmp_path) == (REPO / "configs/gateway-config.trig").read_text(), (
        "configs/gateway-config.trig is stale: rebuild it with edgewave-cloud make-config (see docs/cloud.md)")


def test_example_config_loads_and_its_patterns_run():
    doc = configdoc.load_config_document((REPO / "configs/gateway-config.trig").read_text(), "trig")
    assert set(doc.patterns) == {"fire", "intrusion", "abnormal-patient", "close-friends"}
    for path in (REPO / "configs/patterns").glob("*.rq"):
        query = parse_query(path.read_text())
        assert doc.patterns[query.name] == path.read_text(), f"{path.name} text changed on the way"
    engine = Engine(schema=doc.schema)
    for text in doc.patterns.values():
        engine.add_query(parse_query(text))
    engine.add_static(doc.static)
    assert sorted(engine.queries()) == sorted(doc.patterns)


def test_make_config_refuses_a_bad_pattern(tmp_path):
    bad = tmp_path / "bad.rq"
    bad.write_text("REGISTER RSTREAM <x> AS SELECT ?a WHERE { ?a ?b }")
    out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--query", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "bad.rq: line 1, column" in out.stderr
