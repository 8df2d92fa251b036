"""The example gateway config (configs/gateway-config.trig) is assembled from its parts and stays in step."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from edgewave.agent.engine import Engine, parse_query
from edgewave.agent.engine.per_instance import InstanceEvaluator, InstanceQuery, parse_for_evaluation
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
                    "--static", str(static), *queries, "--significance", str(REPO / "configs/significance.ttl"),
                    "--alerts", str(REPO / "configs/alerts.yaml"),
                    "--out", str(out)], check=True, capture_output=True, cwd=REPO)
    return out.read_text()


def test_example_config_is_what_make_config_builds(tmp_path):
    assert _assemble(tmp_path) == (REPO / "configs/gateway-config.trig").read_text(), (
        "configs/gateway-config.trig is stale: rebuild it with edgewave-cloud make-config (see docs/cloud.md)")


def test_example_config_loads_and_its_patterns_run():
    doc = configdoc.load_config_document((REPO / "configs/gateway-config.trig").read_text(), "trig")
    assert set(doc.patterns) == {"fire", "intrusion", "abnormal-patient", "close-friends", "co2-per-room",
                                 "silent-sensor-in-alarm"}
    assert {r.property: r.deadband_absolute for r in doc.significance}["<https://edgewave.dev/ns#AirTemperature>"] == 0.5
    for path in (REPO / "configs/patterns").glob("*.rq"):
        query = parse_for_evaluation(path.read_text())
        assert doc.patterns[query.name] == path.read_text(), f"{path.name} text changed on the way"
    engine = Engine(schema=doc.schema)
    per_instance = []
    for text in doc.patterns.values():
        query = parse_for_evaluation(text)
        if isinstance(query, InstanceQuery):
            per_instance.append(query.name)
            InstanceEvaluator(query, doc.schema).add_static(doc.static)
        else:
            engine.add_query(parse_query(text))
    engine.add_static(doc.static)
    assert per_instance == ["co2-per-room"]
    assert sorted(engine.queries() + per_instance) == sorted(doc.patterns)


def test_make_config_refuses_a_bad_pattern(tmp_path):
    bad = tmp_path / "bad.rq"
    bad.write_text("REGISTER RSTREAM <x> AS SELECT ?a WHERE { ?a ?b }")
    out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--query", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "bad.rq: line 1, column" in out.stderr


def test_make_config_names_the_file_and_reason_for_unusable_input(tmp_path):
    """A missing file, a malformed static line, an unknown format: a clear error, no document."""
    good = REPO / "configs/patterns/fire.rq"
    bad_static = tmp_path / "static.nt"
    bad_static.write_text('<http://ex.org/a> <http://ex.org/b> "1" .\n<http://ex.org/a> <http://ex.org/b> oops .\n')
    cases = [
        (["--query", str(tmp_path / "nope.rq")], "nope.rq: No such file"),
        (["--query", str(good), "--schema", str(tmp_path / "nope.ttl")], "nope.ttl: no such file"),
        (["--query", str(good), "--static", str(bad_static)], "static.nt: line 2, column"),
        (["--query", str(good), "--schema", str(good)], "fire.rq: unknown RDF format '.rq'"),
    ]
    for args, reason in cases:
        out_file = tmp_path / "out.trig"
        out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", *args, "--out", str(out_file)],
                             capture_output=True, text=True)
        assert out.returncode == 2, (args, out.stderr)
        assert reason in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert not out_file.exists()


def test_make_config_reads_files_that_start_with_a_byte_order_mark(tmp_path):
    """As saved by editors on Windows: the document is the one built from the same files without."""
    plain = _assemble(tmp_path)
    for path in [tmp_path / "gw1.nt", *sorted((REPO / "configs/patterns").glob("*.rq")), REPO / "configs/schema/building.ttl",
                 REPO / "configs/significance.ttl", REPO / "configs/alerts.yaml"]:
        copy = tmp_path / "bom" / path.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    queries = [a for q in sorted((tmp_path / "bom").glob("*.rq")) for a in ("--query", str(q))]
    out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--schema", str(tmp_path / "bom/building.ttl"),
                          "--static", str(tmp_path / "bom/gw1.nt"), *queries,
                          "--significance", str(tmp_path / "bom/significance.ttl"),
                          "--alerts", str(tmp_path / "bom/alerts.yaml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == plain


def test_make_config_names_what_a_mapping_lacks(tmp_path):
    good = REPO / "configs/patterns/fire.rq"
    for args, said in (
            (["--mapping", "zigbee2mqtt"], "the preset zigbee2mqtt needs --mapping-stream and --mapping-base"),
            (["--mapping", "zigbe2mqtt"], "--mapping zigbe2mqtt: neither a preset"),
    ):
        out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--query", str(good), *args],
                             capture_output=True, text=True)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    # a mapping of one's own that the compiler refuses: refused with the term named, nothing written
    own = tmp_path / "own.ttl"
    own.write_text("@prefix rml: <http://w3id.org/rml/> .\n@prefix ew: <https://edgewave.dev/ns#> .\n"
                   "<#m> a rml:TriplesMap ; rml:logicalSource [ rml:source [ a ew:MqttStream ; "
                   "ew:topicFilter \"dev/+\" ; ew:payloadFormat \"json\" ; ew:stream <http://example.org/s> ] ; "
                   "rml:referenceFormulation rml:XPath ; rml:iterator \"$\" ] ; "
                   "rml:subjectMap [ rml:template \"http://example.org/{id}\" ] .\n")
    out = subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--query", str(good), "--mapping", str(own),
                          "--out", str(tmp_path / "out.trig")], capture_output=True, text=True)
    assert out.returncode == 2 and "mapping rejected" in out.stderr and "XPath" in out.stderr, out.stderr
    assert not (tmp_path / "out.trig").exists()
