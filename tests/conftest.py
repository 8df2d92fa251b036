"""Fixtures shared by every test: real Mosquitto brokers on loopback."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from broker_process import MosquittoBroker  # noqa: E402
import spark_cds  # noqa: E402
from reference_data import reference_data_dir, where  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent

# Where PYTHONDONTWRITEBYTECODE is set, as on our machines, no Python process writes
# bytecode. The tests start some thousand (agents, CLIs, simulators), each of which would
# compile the edgewave modules it imports again (installed editable), and each of make
# test's eight pytest processes would rewrite and compile every test module again (5 s of
# CPU): compile edgewave's modules once, as a wheel install would, and let pytest keep its
# rewritten test modules, both in the __pycache__ folders git ignores.
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    sys.dont_write_bytecode = False
    if "PYTEST_XDIST_WORKER" not in os.environ:
        import compileall

        for package in ("agent", "shared", "cloud", "firmware-sim"):
            compileall.compile_dir(REPO_ROOT / package, quiet=2)

# Every JVM a test starts (Spark's driver, a standalone master and worker) lives for seconds
# to minutes over a few thousand rows, where the JIT's optimising compiler, the parallel
# collector and the verification of Spark's own jars cost more CPU than they save: the
# quick compiler, the serial collector and no verification of those trusted jars run the
# same job on under half the CPU. Set before any test forks one; an operator's own setting wins.
JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
                "-XX:-BytecodeVerificationRemote -XX:-UsePerfData")
# With our options, Spark's drivers also map their classes from a class-data-sharing archive
# once it is made (tests/spark_cds.py: made in the background when the first slow test starts).
# (xdist's workers and the later parts of ``make test`` inherit what this process set.)
SPARK_ARCHIVE = spark_cds.archive_path(JAVA_OPTIONS)
if SPARK_ARCHIVE is not None and os.environ.get("JAVA_TOOL_OPTIONS") not in (
        None, JAVA_OPTIONS, spark_cds.with_archive(JAVA_OPTIONS, SPARK_ARCHIVE)):
    SPARK_ARCHIVE = None
os.environ.setdefault("JAVA_TOOL_OPTIONS", JAVA_OPTIONS)
_archive_state = {"started": False, "used": False}


def _use_spark_archive() -> None:
    if SPARK_ARCHIVE is not None and not _archive_state["used"] and SPARK_ARCHIVE.exists():
        os.environ["JAVA_TOOL_OPTIONS"] = spark_cds.with_archive(JAVA_OPTIONS, SPARK_ARCHIVE)
        _archive_state["used"] = True


_use_spark_archive()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test's fixtures: the Spark archive into JAVA_TOOL_OPTIONS once it is there."""
    if SPARK_ARCHIVE is None or _archive_state["used"]:
        return
    if not _archive_state["started"] and item.get_closest_marker("slow") is not None:
        _archive_state["started"] = True
        spark_cds.start_making(JAVA_OPTIONS)
    _use_spark_archive()


@pytest.fixture(autouse=True)
def root_logger_restored() -> Iterator[None]:
    """The root logger as it was before the test. A CLI's ``main`` run in-process installs a
    handler on the ``sys.stderr`` of that moment, pytest's capture file, closed once the test
    ends: left there, it made py4j's last log line at interpreter exit a traceback."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def mqtt_broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A fresh anonymous broker with persistence, stopped after the test."""
    broker = MosquittoBroker(tmp_path / "broker").start()
    yield broker
    broker.kill()


@pytest.fixture
def mqtt_broker2(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A second independent broker (e.g. the cloud side when mqtt_broker is the local one)."""
    broker = MosquittoBroker(tmp_path / "broker2").start()
    yield broker
    broker.kill()


@pytest.fixture
def mqtt_broker_auth(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A broker that refuses anonymous clients; credentials in .username/.password."""
    broker = MosquittoBroker(tmp_path / "broker-auth", username="edge", password="s3cret-pw").start()
    yield broker
    broker.kill()


@pytest.fixture
def shared_data() -> Path:
    """The reference data directory (tests/reference_data.py); tests skip when there is none.

    An honest skip: these public data sets are not in the repository (CityBench is GPL-3.0
    and may not be copied into this Apache-2.0 one; the others are large), so a checkout
    without them cannot run these tests. scripts/fetch-reference-data.py fetches them;
    docs/testing.md lists their sources. A test using this fixture is marked
    ``reference_data``: once the directory exists, its skips are failures.
    """
    root = reference_data_dir()
    if root is None:
        pytest.skip(f"reference data not found ({where()})")
    return root


# The files that take longest, longest first (wall time of their tests on four workers
# sharing two cores; docs/testing.md): started first, they do not end the run alone. The list
# holds the files of both of make test's sessions; each session takes its own in this order.
# A Spark file that starts before the Spark archive (tests/spark_cds.py) is made waits for it.
LONGEST_FIRST = ["test_network_faults.py", "test_end_to_end_faults.py", "test_engine_vs_reference.py",
                 "test_device_formats_pipeline.py", "test_cloud_job_batches.py", "test_dashboard_pipeline.py",
                 "test_sim_scenarios.py", "test_demo.py", "test_cloud_scale_out.py", "test_fuzz_decoders.py",
                 "test_cloud_recovery.py", "test_cloud_instances.py", "test_packaging.py", "test_agent_crash.py",
                 "test_cloud_pipeline.py", "test_dashboard_browser.py", "test_fleet_rotation.py",
                 "test_agent_demo_uplink.py", "test_cloud_cluster.py", "test_fleet_acl.py"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.reference_data)
    # The longest files first, then the other files holding slow tests (a stable sort keeps
    # each file's own order): on parallel workers the longest files then start at once
    # instead of ending the run alone (make test keeps this order: --no-loadscope-reorder).
    # LONGEST_FIRST is a scheduling hint only.
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), item.path not in slow_files))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """With the reference data present, a reference-data test may not skip: a skip then
    means a file is missing or a test no longer finds its data, which must be seen."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or item.get_closest_marker("reference_data") is None:
        return
    root = reference_data_dir()
    if root is None:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"skipped although the reference data directory {root} is there: {reason}\n"
                       "(python3 scripts/fetch-reference-data.py --verify names what is missing)")
