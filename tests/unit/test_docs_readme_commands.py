"""Every command README.md shows is run by a test.

The commands are read from README.md's ```sh blocks (a trailing backslash continues a
line, ``  #`` starts a comment). Cheap ones run here, as written, from a directory
that sees the checkout's configs/ and tests/ (as after ``source .venv/bin/activate``);
the others are listed in COVERED with the tests that run them. A command that is in
neither fails, as does a listed test that does not exist or never names the command.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BIN = Path(sys.executable).parent


def readme_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


RUN_HERE = {   # command as README shows it -> the test in this file that runs it
    r"edgewave-sim record --config configs/sim\.yaml --scenario configs/scenarios/fire-room3\.yaml .*":
        "test_the_engine_alone_tour_gives_the_five_fires",
    r"edgewave match --schema configs/schema/building\.ttl --static configs/static/site\.nt "
    r"--query configs/patterns/fire\.rq --stream fire\.tsv": "test_the_engine_alone_tour_gives_the_five_fires",
}
# command (regex) -> tests that run it: (file, test function, a string the file must contain)
COVERED: dict[str, list[tuple[str, str, str]]] = {
    r"make demo": [("tests/integration/test_demo.py", "test_make_demo_sees_exactly_the_ground_truth", "demo.py"),
                   ("tests/unit/test_docs_readme_commands.py", "test_make_targets_run_what_the_readme_says",
                    "make")],
    r"make test": [("tests/unit/test_docs_readme_commands.py", "test_make_targets_run_what_the_readme_says",
                    "make")],
    r"python3 -m venv \S+ && \S+/bin/pip install '\.\[agent\]'": [
        ("tests/integration/test_packaging.py", "test_agent_extra_installs_without_pyspark", "[agent]")],
    r"\S+/bin/edgewave-agent install --bundle gw1\.tar\.gz": [
        ("tests/integration/test_fleet_gateway.py", "test_install_into_a_root_writes_what_systemd_and_the_agent_accept",
         "--bundle"),
        ("tests/integration/test_operations_doc.py", "test_the_documented_steps_run", "edgewave-agent")],
    r"apt-get install mosquitto openjdk-17-jre-headless && pip install '\.\[cloud\]'": [
        ("tests/unit/test_docs_readme_commands.py", "test_the_cloud_packages_are_what_setup_installs", "apt-get")],
    r"edgewave-cloud run --config configs/cloud\.yaml": [
        ("tests/unit/test_cloud_settings.py", "", "configs\" / \"cloud.yaml"),
        ("tests/integration/test_cloud_pipeline.py", "test_10000_events_with_duplicates_and_disorder_give_exact_counts",
         "cloud_harness")],
    r"edgewave-cloud gateway add gw1 --config configs/cloud\.yaml": [
        ("tests/integration/test_operations_doc.py", "test_the_documented_steps_run", "edgewave-cloud"),
        ("tests/integration/test_fleet_gateway.py", "test_install_into_a_root_writes_what_systemd_and_the_agent_accept",
         "fleet")],
    r"edgewave-cloud push-config --config configs/cloud\.yaml --gateway gw1 configs/gateway-config\.trig": [
        ("tests/integration/test_cloud_push.py", "test_push_to_running_agent_prints_applied_with_the_new_version",
         "push-config")],
}


def test_every_readme_command_is_run_by_a_test() -> None:
    commands = readme_commands()
    assert len(commands) >= 8, commands
    uncovered = [c for c in commands
                 if not any(re.fullmatch(p, c) for p in [*RUN_HERE, *COVERED])]
    assert not uncovered, f"README commands no test runs (run them here or list them in COVERED): {uncovered}"
    unused = [p for p in [*RUN_HERE, *COVERED] if not any(re.fullmatch(p, c) for c in commands)]
    assert not unused, f"listed but no longer in README.md: {unused}"


@pytest.mark.parametrize("pattern", sorted(COVERED))
def test_the_tests_listed_for_a_command_exist(pattern: str) -> None:
    for path, function, evidence in COVERED[pattern]:
        source = (REPO / path).read_text(encoding="utf-8")
        assert not function or re.search(rf"^def {function}\(", source, re.M), f"{path}::{function} is gone"
        assert evidence in source, f"{path} does not mention {evidence!r}"
    for function in set(RUN_HERE.values()):
        assert function in globals(), function


def test_readme_stays_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 150


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


@pytest.fixture
def checkout_view(tmp_path: Path) -> Path:
    """A directory that sees configs/ and tests/ as the checkout does, for relative paths."""
    for name in ("configs", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def test_the_engine_alone_tour_gives_the_five_fires(checkout_view: Path) -> None:
    record, match = [c for c in readme_commands() if c.startswith(("edgewave-sim record", "edgewave match"))]
    done = _shell(record, checkout_view)
    assert done.returncode == 0, done.stderr
    assert (checkout_view / "fire.tsv").stat().st_size > 0
    truth = (checkout_view / "fire.truth.jsonl").read_text().splitlines()
    assert sum('"fire"' in line for line in truth) == 5, truth
    found = _shell(match, checkout_view)
    assert found.returncode == 0, found.stderr
    assert found.stderr.rstrip().endswith("matches[fire]=5"), found.stderr[-500:]
    assert len(found.stdout.splitlines()) == 5
    # "with --no-entailment, 1: four come from ACME sensors"
    plain = _shell(match + " --no-entailment", checkout_view)
    assert plain.returncode == 0 and plain.stderr.rstrip().endswith("matches[fire]=1"), plain.stderr[-500:]


def test_the_real_stream_example_runs(checkout_view: Path) -> None:
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"`(gunzip -c tests/data/csrbench/stream\.tsv\.gz \| edgewave match [^`]+)`", text)
    assert len(commands) == 2, commands  # continuous matching, and an aggregate per window instance
    for command in commands:
        done = _shell("set -o pipefail; " + command, checkout_view)
        assert done.returncode == 0, done.stderr
        assert "triples_in=15188 " in done.stderr and done.stdout.strip(), done.stderr


def test_make_targets_run_what_the_readme_says() -> None:
    """`make test` installs the system packages, then runs pytest over the suite; `make demo` runs
    scripts/demo.py after the same setup (tests/integration/test_demo.py runs the demo itself)."""
    for target, expected in (("test", "-m pytest -q -p no:cacheprovider"), ("demo", "scripts/demo.py")):
        shown = subprocess.run(["make", "-n", "-B", target, "PYTHON=" + sys.executable], cwd=REPO,
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "scripts/install-system-packages.sh" in shown.stdout, shown.stdout
        assert "pip install -q -e '.[dev]'" in shown.stdout, shown.stdout
        assert expected in shown.stdout, shown.stdout


def test_the_cloud_packages_are_what_setup_installs() -> None:
    """README's cloud install: mosquitto and a Java 17+ runtime (which make setup installs too),
    and the cloud extra, which the test environment has installed."""
    from importlib.metadata import requires, version

    script = (REPO / "scripts" / "install-system-packages.sh").read_text()
    assert "mosquitto" in script and re.search(r"openjdk-1[7-9]|openjdk-2\d|jre", script), "setup installs no Java"
    cloud = [r.split(";")[0] for r in requires("edgewave") or [] if 'extra == "cloud"' in r]
    assert cloud, "no cloud extra"
    for requirement in cloud:
        name, _, pinned = requirement.partition("==")
        assert version(name.strip()) == pinned.strip(), requirement
