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
from reference_data import reference_data_dir, where  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent

# Every JVM a test starts (Spark's driver, a standalone master and worker) lives for seconds
# to minutes over a few thousand rows, where the JIT's optimising compiler, the parallel
# collector and the verification of Spark's own jars cost more CPU than they save: the
# quick compiler, the serial collector and no verification of those trusted jars run the
# same job on under half the CPU. Set before any test forks one; an operator's own setting wins.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions "
                                           "-XX:-BytecodeVerificationRemote -XX:-UsePerfData")


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


# The files that take longest on four workers sharing two cores, longest first (measured
# with pytest --durations=0; docs/testing.md).
LONGEST_FIRST = ["test_network_faults.py", "test_end_to_end_faults.py", "test_cloud_recovery.py",
                 "test_cloud_job_batches.py", "test_cloud_scale_out.py", "test_engine_vs_reference.py",
                 "test_fleet_acl.py", "test_dashboard_history.py", "test_fuzz_decoders.py"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.reference_data)
    # The longest files first, then the other files holding slow tests (a stable sort keeps
    # each file's own order): on parallel workers the longest files then start at once
    # instead of ending the run alone. LONGEST_FIRST is a scheduling hint only.
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: (item.path not in slow_files, rank.get(item.path.name, len(rank))))


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
