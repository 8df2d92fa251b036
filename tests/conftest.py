"""Fixtures shared by every test: real Mosquitto brokers on loopback."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from broker_process import MosquittoBroker  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


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
    """The reference data directory beside the checkout; tests skip when it is absent.

    An honest skip: these public data sets are not in the repository (CityBench is GPL-3.0
    and may not be copied into this Apache-2.0 one; the others are large), so a checkout
    without the directory cannot run these tests. docs/testing.md lists their sources.
    """
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (it lives beside the checkout)")
    return SHARED_DATA
