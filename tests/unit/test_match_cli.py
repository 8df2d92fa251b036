"""`edgewave match` end to end, as a user runs it: a subprocess over files."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

EX = "http://ex.org/"
SCHEMA_TTL = """
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix ex: <http://ex.org/> .
ex:TempSensor rdfs:subClassOf ex:Sensor .
ex:celsius rdfs:subPropertyOf ex:reading .
"""
QUERY = """
PREFIX ex: <http://ex.org/>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
REGISTER RSTREAM <hot> AS
SELECT ?sensor ?value ?room
FROM NAMED WINDOW <w> ON <http://ex.org/sensors> [RANGE PT10S STEP PT1S]
WHERE {
  WINDOW <w> { ?sensor rdf:type ex:Sensor . ?sensor ex:reading ?value . }
  ?sensor ex:in ?room .
}
"""
STATIC_NT = f"<{EX}s1> <{EX}in> <{EX}kitchen> .\n<{EX}s2> <{EX}in> <{EX}hall> .\n"
TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"


def edgewave_cmd() -> list[str]:
    script = Path(sys.executable).parent / "edgewave"
    return [str(script)] if script.exists() else [sys.executable, "-m", "edgewave.agent.match_cli"]


def run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*edgewave_cmd(), "match", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "schema.ttl").write_text(SCHEMA_TTL)
    (tmp_path / "static.nt").write_text(STATIC_NT)
    (tmp_path / "q.rq").write_text(QUERY)
    lines = [
        f"1000\t<{EX}s1> {TYPE} <{EX}TempSensor> .",
        f"1500\t<{EX}s1> <{EX}celsius> \"21\" .",
        "not a line at all",  # line 3
        f"2000\t<{EX}s2> {TYPE} <{EX}TempSensor> .",
        f"2100\t<{EX}s2> <{EX}celsius> \"bad literal .",  # line 5
        "",
        "# a comment",
        f"1900\t<{EX}s2> <{EX}celsius> \"19\" .",  # line 8: time goes back
        f"2500\t<{EX}s2> <{EX}celsius> \"23\" .",
        f"30000\t<{EX}s1> <{EX}celsius> \"25\" .",  # too late for s1's type triple
    ]
    (tmp_path / "stream.tsv").write_text("\n".join(lines) + "\n")
    return {name: tmp_path / name for name in ("schema.ttl", "static.nt", "q.rq", "stream.tsv")}


def test_matches_as_json_lines_with_malformed_lines_reported(files):
    result = run(["--schema", str(files["schema.ttl"]), "--static", str(files["static.nt"]),
                  "--query", str(files["q.rq"]), "--stream", str(files["stream.tsv"])])
    assert result.returncode == 0, result.stderr
    matches = [json.loads(line) for line in result.stdout.splitlines()]
    assert matches == [
        {"pattern": "hot", "bindings": {"sensor": f"<{EX}s1>", "value": '"21"', "room": f"<{EX}kitchen>"},
         "start": 1000, "end": 1500},
        {"pattern": "hot", "bindings": {"sensor": f"<{EX}s2>", "value": '"23"', "room": f"<{EX}hall>"},
         "start": 2000, "end": 2500},
    ]
    err = result.stderr
    assert re.search(r"\bmalformed=3\b", err)
    for line_no in (3, 5, 8):
        assert re.search(rf"stream\.tsv:line {line_no}\b", err), err
    summary = dict(re.findall(r"(\w+)=([\w.]+)", err.strip().splitlines()[-1]))
    assert summary["triples_in"] == "5"
    assert summary["matches"] == "2"
    assert int(summary["entailed"]) >= 4
    assert float(summary["peak_memory_mb"]) > 0
    assert "triples_per_s" in summary


def test_no_entailment_finds_nothing_here(files):
    result = run(["--schema", str(files["schema.ttl"]), "--static", str(files["static.nt"]),
                  "--query", str(files["q.rq"]), "--stream", str(files["stream.tsv"]), "--no-entailment"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "entailment=off" in result.stderr


def test_stream_from_standard_input(files):
    result = run(["--schema", str(files["schema.ttl"]), "--static", str(files["static.nt"]),
                  "--query", str(files["q.rq"]), "--stream", "-"], stdin=files["stream.tsv"].read_text())
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2


def test_many_malformed_lines_report_the_first_ten_and_the_count(tmp_path, files):
    bad = tmp_path / "bad.tsv"
    bad.write_text("".join(f"x{i}\tnothing\n" for i in range(25)) + f"5\t<{EX}a> <{EX}b> <{EX}c> .\n")
    result = run(["--query", str(files["q.rq"]), "--stream", str(bad)])
    assert result.returncode == 0
    assert "malformed=25" in result.stderr
    assert "bad.tsv:line 10" in result.stderr and "bad.tsv:line 11" not in result.stderr
    assert "and 15 more" in result.stderr
    assert "triples_in=1" in result.stderr


def test_several_streams_by_iri_are_merged_by_timestamp(tmp_path):
    query = tmp_path / "q.rq"
    query.write_text("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <pair> AS SELECT ?d ?room
        FROM NAMED WINDOW <a> ON <http://ex.org/alarms> [RANGE PT1S STEP PT1S]
        FROM NAMED WINDOW <l> ON <http://ex.org/locations> [RANGE PT1M STEP PT1S]
        WHERE { WINDOW <a> { ?d ex:alarm ?v } WINDOW <l> { ?d ex:in ?room } }
    """)
    alarms = tmp_path / "alarms.tsv"
    alarms.write_text(f"5000\t<{EX}d1> <{EX}alarm> \"1\" .\n9000\t<{EX}d2> <{EX}alarm> \"1\" .\n")
    locations = tmp_path / "locations.tsv"
    # d2's location arrives on the alarm-less stream only: d2 must not match through it.
    locations.write_text(f"1000\t<{EX}d1> <{EX}in> <{EX}r1> .\n8000\t<{EX}d2> <{EX}alarm> \"1\" .\n")
    result = run(["--query", str(query), "--stream", f"http://ex.org/alarms={alarms}",
                  "--stream", f"<http://ex.org/locations>={locations}"])
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"pattern": "pair", "bindings": {"d": f"<{EX}d1>", "room": f"<{EX}r1>"}, "start": 1000, "end": 5000}
    ]
    assert "triples_in=4" in result.stderr
    assert "warning" not in result.stderr

    # A slip in a stream IRI: the run goes on, and says why it may match nothing.
    result = run(["--query", str(query), "--stream", f"http://ex.org/alarms={alarms}",
                  "--stream", f"http://ex.org/location={locations}"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert f"warning: stream <http://ex.org/location> ({locations}) is read by no query" in result.stderr
    assert "warning: no --stream feeds <http://ex.org/locations>, which query pair reads" in result.stderr
    assert "alarms" not in "".join(line for line in result.stderr.splitlines() if "warning" in line)


def test_a_bad_query_names_file_line_and_column(tmp_path, files):
    bad = tmp_path / "bad.rq"
    bad.write_text("SELECT ?x\nWHERE { ?x ?y }\n")
    result = run(["--query", str(bad), "--stream", str(files["stream.tsv"])])
    assert result.returncode == 2
    assert "bad.rq" in result.stderr and re.search(r"line 2, column \d+", result.stderr), result.stderr
    assert result.stdout == ""


def test_a_missing_file_is_a_clear_error(tmp_path, files):
    result = run(["--query", str(files["q.rq"]), "--stream", str(tmp_path / "nope.tsv")])
    assert result.returncode == 2
    assert "nope.tsv" in result.stderr


def test_files_that_start_with_a_byte_order_mark_read_as_without(tmp_path, files):
    """Editors on Windows start UTF-8 files with a BOM: the query, the schema (Turtle, read
    by rdflib), the static data (N-Triples) and the stream may each carry one. A BOM that
    is not at the start of a file stays an error of its line."""
    def with_bom(path: Path, extra: bytes = b"") -> Path:
        out = tmp_path / "bom" / path.name
        out.parent.mkdir(exist_ok=True)
        out.write_bytes(b"\xef\xbb\xbf" + path.read_bytes() + extra)
        return out

    def args(f: dict[str, Path], stream: str) -> list[str]:
        return ["--schema", str(f["schema.ttl"]), "--static", str(f["static.nt"]),
                "--query", str(f["q.rq"]), "--stream", stream]

    plain = run(args(files, str(files["stream.tsv"])))
    assert plain.returncode == 0 and len(plain.stdout.splitlines()) == 2, plain.stderr
    bom = {name: with_bom(path) for name, path in files.items()}
    bom["stream.tsv"] = with_bom(files["stream.tsv"], f"\ufeff40000\t<{EX}s3> {TYPE} <{EX}Sensor> .\n".encode())
    result = run(args(bom, str(bom["stream.tsv"])))
    assert result.returncode == 0, result.stderr
    assert result.stdout == plain.stdout
    assert re.search(r"\bmalformed=4\b", result.stderr), result.stderr   # the fixture's 3 and line 11
    assert "stream.tsv:line 11" in result.stderr and "stream.tsv:line 1," not in result.stderr

    piped = run(args(bom, "-"), stdin=with_bom(files["stream.tsv"]).read_text(encoding="utf-8"))
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == plain.stdout


def test_static_turtle_keeps_literals_as_written_so_they_join_the_stream(tmp_path):
    """rdflib would rewrite "007"^^xsd:integer to "7" and "1"^^xsd:boolean to "true" (other
    terms than the stream's, which stay as written), and print a traceback for the ill-typed
    "n/a"^^xsd:integer; the static Turtle must keep each term as written."""
    xsd = "http://www.w3.org/2001/XMLSchema#"
    (tmp_path / "static.ttl").write_text(
        "@prefix ex: <http://ex.org/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n"
        'ex:s1 ex:code "007"^^xsd:integer . ex:s2 ex:code "n/a"^^xsd:integer .\n'
        'ex:s3 ex:flag "1"^^xsd:boolean . ex:s4 ex:flag "true"^^xsd:boolean .\n')
    (tmp_path / "q.rq").write_text(
        "PREFIX ex: <http://ex.org/>\nREGISTER RSTREAM <codes> AS SELECT ?s ?code FROM NAMED WINDOW <w> ON <http://ex.org/in> [RANGE PT10S]\n"
        "WHERE { WINDOW <w> { ?obs ex:code ?code } ?s ex:code ?code }\n")
    (tmp_path / "flags.rq").write_text(
        "PREFIX ex: <http://ex.org/>\nREGISTER RSTREAM <flags> AS SELECT ?s FROM NAMED WINDOW <w> ON <http://ex.org/in> [RANGE PT10S]\n"
        "WHERE { WINDOW <w> { ?obs ex:seen ?s } ?s ex:flag ?f }\n")
    stream = (f'1000\t<{EX}o1> <{EX}code> "007"^^<{xsd}integer> .\n'
              f'1001\t<{EX}o2> <{EX}code> "n/a"^^<{xsd}integer> .\n'
              f"1002\t<{EX}o3> <{EX}seen> <{EX}s3> .\n1003\t<{EX}o4> <{EX}seen> <{EX}s4> .\n")
    result = run(["--static", str(tmp_path / "static.ttl"), "--query", str(tmp_path / "q.rq"),
                  "--query", str(tmp_path / "flags.rq"), "--stream", "-"], stdin=stream)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    found = sorted((m["pattern"], tuple(sorted(m["bindings"].items())))
                   for m in map(json.loads, result.stdout.splitlines()))
    assert found == [
        ("codes", (("code", f'"007"^^<{xsd}integer>'), ("s", f"<{EX}s1>"))),
        ("codes", (("code", f'"n/a"^^<{xsd}integer>'), ("s", f"<{EX}s2>"))),
        ("flags", (("s", f"<{EX}s3>"),)),   # two distinct triples, not merged into one
        ("flags", (("s", f"<{EX}s4>"),)),
    ]


def test_non_ascii_lines_match_and_invalid_utf8_is_reported(tmp_path):
    query = tmp_path / "q.rq"
    query.write_text("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <names> AS SELECT ?s ?n
        FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT1S STEP PT1S]
        WHERE { WINDOW <w> { ?s ex:name ?n } }
    """)
    stream = tmp_path / "s.tsv"
    stream.write_bytes(
        f"1\t<{EX}a> <{EX}name> \"caf\u00e9\" .\n".encode()
        + f"2\t<{EX}b> <{EX}name> \"".encode() + b"\xff\xfe" + b"\" .\n"
        + f"3\t<{EX}c> <{EX}name> \"ok\" .\n".encode()
    )
    result = run(["--query", str(query), "--stream", str(stream)])
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["bindings"]["n"] for line in result.stdout.splitlines()] == ['"caf\u00e9"', '"ok"']
    assert "malformed=1" in result.stderr and "s.tsv:line 2" in result.stderr


# -- the lean reader against the shared one ------------------------------------------------

_STATEMENTS = [
    f"<{EX}s1> <{EX}celsius> \"21\" .",
    f"<{EX}s1> {TYPE} <{EX}TempSensor> .",
    f"<{EX}s2> <{EX}celsius> \"a b\"^^<{EX}T> .",
    f"<{EX}s2> <{EX}name> \"caf\u00e9\"@fr .",
    f"<{EX}s3> <{EX}name> \"\\u00e9\\t\" .",
    f"_:b1 <{EX}celsius> \"19\" .",
    f"<{EX}s1> <{EX}in> <{EX}hall>.",
]


@st.composite
def recorded_lines(draw) -> list[str]:
    """Recorded lines, mostly well formed, with the faults a recording has: time going
    back, edits (a character dropped or changed; often near the end, where the statement's
    dot is), CRLF, blank and comment lines."""
    lines, ts = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(1, 12))):
        ts = max(0, ts + draw(st.integers(-2, 3)))
        line = f"{ts}\t{draw(st.sampled_from(_STATEMENTS))}"
        kind = draw(st.sampled_from(["ok", "ok", "ok", "edit", "end", "crlf", "blank", "comment"]))
        if kind in ("edit", "end"):
            i = draw(st.integers(0, len(line) - 1) if kind == "edit" else st.integers(len(line) - 3, len(line) - 1))
            line = line[:i] + draw(st.sampled_from(["", " ", "<", '"', "\t", "x", "\u00e9", "9"])) + line[i + 1:]
        elif kind == "crlf":
            line += "\r"
        elif kind == "blank":
            line = draw(st.sampled_from(["", "  ", "\t"]))
        elif kind == "comment":
            line = "# a comment"
        lines.append(line + "\n")
    return lines


@settings(deadline=None, max_examples=400)
@given(recorded_lines())
def test_the_lean_reader_agrees_with_the_shared_reader(lines) -> None:
    """`edgewave match` reads the usual line its own way (fast); items and errors (line,
    column, reason) must be exactly those of edgewave.shared.recorded.read_recorded."""
    from edgewave.shared.recorded import read_recorded

    ours, theirs = [], []
    items = list(read_recorded(iter(lines), ours))
    assert items == list(read_recorded(lines, theirs))
    assert [(e.line, e.column, e.reason) for e in ours] == [(e.line, e.column, e.reason) for e in theirs]


def test_peak_memory_is_the_commands_own_not_its_parents(files):
    """A parent holding 300 MB when it starts `edgewave match` must not show in the
    command's peak (Linux's ru_maxrss keeps the parent's size from before exec)."""
    ballast = bytearray(300 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):  # make the pages resident
        ballast[i] = 1
    result = run(["--schema", str(files["schema.ttl"]), "--query", str(files["q.rq"]),
                  "--stream", str(files["stream.tsv"])])
    del ballast
    assert result.returncode == 0, result.stderr
    peak = float(re.search(r"peak_memory_mb=([\d.]+)", result.stderr).group(1))
    assert 5 < peak < 150, result.stderr


FUZZ_REGRESSIONS = Path(__file__).resolve().parent.parent / "fuzz" / "regressions" / "ntriples"


@pytest.mark.parametrize("name, reason", [
    ("lean-huge-timestamp.tsv", "beyond a signed 64-bit integer"),
    ("lean-beyond-64-bit-timestamp.tsv", "beyond a signed 64-bit integer"),
])
def test_the_match_clis_reader_refuses_timestamps_beyond_64_bits_as_read_recorded_does(name, reason):
    """Found by fuzzing: the fast reader took them (or raised ValueError from int())."""
    from edgewave.shared.recorded import read_recorded

    lines = (FUZZ_REGRESSIONS / name).read_text().splitlines(keepends=True)
    ours, theirs = [], []
    assert list(read_recorded(iter(lines), ours)) == list(read_recorded(lines, theirs))
    assert [(e.line, e.column, e.reason) for e in ours] == [(e.line, e.column, e.reason) for e in theirs]
    assert any(reason in e.reason for e in ours)
