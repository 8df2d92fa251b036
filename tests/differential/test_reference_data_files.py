"""The reference data directory holds exactly the bytes scripts/fetch-reference-data.py pins,
and the script fetches, checks and links as it says (against file:// copies: this test
needs no network)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reference_data import REPO_ROOT, reference_data_dir

SCRIPT = REPO_ROOT / "scripts" / "fetch-reference-data.py"
_spec = importlib.util.spec_from_file_location("fetch_reference_data", SCRIPT)
fetch = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = fetch   # dataclasses look their module up
_spec.loader.exec_module(fetch)


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_the_manifest_covers_every_source_and_what_the_tests_read() -> None:
    entries = fetch.read_manifest()
    assert {e.source for e in entries} == set(fetch.SOURCES)
    dests = {e.dest for e in entries}
    assert len(dests) == len(entries), "a file listed twice"
    for needed in ("citybench/static/SensorRepository.n3", "citybench/static/trafficMetaData.csv",
                   "citybench/queries/csparql/Q1.txt", "citybench/streams/AarhusTrafficData158505.stream",
                   "w3c-rdf-tests/sparql/sparql11/entailment/manifest.ttl",
                   "w3c-rdf-tests/sparql/sparql11/syntax-query/manifest.ttl",
                   "uci-occupancy/datatest.txt", "uci-airquality/AirQualityUCI.csv",
                   "csrbench/stream/data_33.ttl", "csrbench/comparative-study-2022/answers/rdfox-answer-7.json",
                   "csrbench/queries/csrbench-aligned-2022-srbench-queries.properties"):
        assert needed in dests, needed
    for entry in entries:
        repo, commit, _ = fetch.SOURCES[entry.source]
        assert entry.url() == f"https://raw.githubusercontent.com/{repo}/{commit}/{entry.path}"


def _mirror(tmp_path: Path, files: dict[tuple[str, str], bytes]) -> Path:
    """A directory laid out as raw.githubusercontent.com: OWNER/REPO/COMMIT/PATH."""
    root = tmp_path / "mirror"
    for (source, path), data in files.items():
        repo, commit, _ = fetch.SOURCES[source]
        target = root / repo / commit / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def _manifest(tmp_path: Path, rows: list[tuple[bytes, str, str, str]]) -> Path:
    path = tmp_path / "manifest"
    path.write_text("# test\n" + "".join(f"{hashlib.sha256(data).hexdigest()}  {len(data)}  {dest}  {source}  {src}\n"
                                          for data, dest, source, src in rows))
    return path


def test_fetch_checks_every_file_and_keeps_only_what_matches(tmp_path: Path) -> None:
    good, bad = b"<a> <b> <c> .\n", b"tampered\n"
    manifest = _manifest(tmp_path, [(good, "w3c-rdf-tests/x/good.ttl", "w3c", "sparql/x/good.ttl"),
                                    (b"the published bytes\n", "citybench/static/bad.n3", "citybench", "dataset/bad.n3"),
                                    (b"never published\n", "uci-occupancy/absent.txt", "uci-occupancy", "absent.txt")])
    mirror = _mirror(tmp_path, {("w3c", "sparql/x/good.ttl"): good, ("citybench", "dataset/bad.n3"): bad})
    dest = tmp_path / "data"
    done = run("--manifest", str(manifest), "--dest", str(dest), "--mirror", mirror.as_uri())
    assert done.returncode == 1, done.stderr
    assert (dest / "w3c-rdf-tests/x/good.ttl").read_bytes() == good
    assert not (dest / "citybench/static/bad.n3").exists(), "a file that fails its checksum must not be kept"
    assert "citybench/static/bad.n3" in done.stderr and "expected" in done.stderr
    assert "uci-occupancy/absent.txt" in done.stderr and "cannot fetch" in done.stderr
    assert not list(dest.rglob("*.part")), "no partial download left behind"
    assert "1 of 3 files present and verified" in done.stdout

    # --only: just the sources named; a present, correct file is not fetched again
    (mirror / "w3c").rename(tmp_path / "gone")
    again = run("--manifest", str(manifest), "--dest", str(dest), "--mirror", str(mirror), "--only", "w3c")
    assert again.returncode == 0, again.stderr
    assert "1 of 1 files" in again.stdout

    # --verify names what is missing or altered
    (dest / "w3c-rdf-tests/x/good.ttl").write_bytes(b"<a> <b> <d> .\n")
    verify = run("--manifest", str(manifest), "--dest", str(dest), "--verify")
    assert verify.returncode == 1
    assert "mismatch:" in verify.stderr and "good.ttl" in verify.stderr
    assert verify.stderr.count("missing:") == 2


def test_link_checks_an_existing_copy_then_points_the_data_directory_at_it(tmp_path: Path) -> None:
    data = b"Date,Temperature\n"
    manifest = _manifest(tmp_path, [(data, "uci-occupancy/datatest.txt", "uci-occupancy", "datatest.txt")])
    copy = tmp_path / "copy"
    (copy / "uci-occupancy").mkdir(parents=True)
    (copy / "uci-occupancy" / "datatest.txt").write_bytes(b"Date,Temperature,altered\n")
    dest = tmp_path / "var" / "reference-data"
    refused = run("--manifest", str(manifest), "--link", str(copy), env={"EDGEWAVE_REFERENCE_DATA": str(dest)})
    assert refused.returncode == 1 and "mismatch:" in refused.stderr
    assert not dest.exists() and not dest.is_symlink()

    (copy / "uci-occupancy" / "datatest.txt").write_bytes(data)
    linked = run("--manifest", str(manifest), "--link", str(copy), env={"EDGEWAVE_REFERENCE_DATA": str(dest)})
    assert linked.returncode == 0, linked.stderr
    assert dest.is_symlink() and (dest / "uci-occupancy" / "datatest.txt").read_bytes() == data
    verify = run("--manifest", str(manifest), "--verify", env={"EDGEWAVE_REFERENCE_DATA": str(dest)})
    assert verify.returncode == 0, verify.stderr


@pytest.mark.reference_data
def test_the_reference_data_directory_holds_every_file_with_its_published_checksum(tmp_path: Path) -> None:
    root = reference_data_dir()
    if root is None:
        pytest.skip("no reference data directory (scripts/fetch-reference-data.py fetches it)")
    entries = fetch.read_manifest()
    problems = fetch.check(root, entries)
    assert problems == {"missing": [], "mismatch": []}, problems
    # and the script fetches from a copy laid out as the sources publish it, one file per source
    picks = {e.source: e for e in entries}
    mirror = _mirror(tmp_path, {(e.source, e.path): (root / e.dest).read_bytes() for e in picks.values()})
    dest = tmp_path / "fetched"
    for entry in picks.values():
        assert fetch.fetch_one(entry, dest, mirror.as_uri(), 10) is None
    assert fetch.check(dest, list(picks.values())) == {"missing": [], "mismatch": []}
