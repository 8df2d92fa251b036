"""Ingest workers: several ingest processes sharing the gateways' events.

The workers take events through one MQTT 5 shared subscription, so the broker
hands each event to one of them. Each has its own persistent session, landing
files and in-flight marker (see docs/cloud.md, "Ingest workers").
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from edgewave.shared import topics

log = logging.getLogger("edgewave.cloud.ingest")


def subscriptions(worker: int, share_group: str) -> list[str]:
    """What one ingest worker subscribes to.

    Events go through an MQTT 5 shared subscription, so the broker hands each
    event to one worker of the group and adding a worker adds capacity. Status
    messages and config acks (few, retained status included, which a shared
    subscription would not deliver) go to worker 0 alone, the one writer of the
    registry.
    """
    events = f"$share/{share_group}/{topics.ALL_EVENTS}"
    return [events, topics.ALL_STATUS, topics.ALL_CONFIG_ACKS] if worker == 0 else [events]


class WorkerRoster:
    """How many ingest workers have sessions on the broker, kept in ``<landing_zone>/ingest-workers.json``.

    Each worker's persistent session belongs to the shared subscription, so the
    broker keeps handing it its share of the events while it is stopped. When
    ``run`` starts fewer workers than before, the others must retire: land what
    their sessions hold and end them, or their share would wait there until the
    session expires.
    """

    def __init__(self, landing_zone: str | Path) -> None:
        self.path = Path(landing_zone) / "ingest-workers.json"

    def count(self) -> int:
        try:
            return max(1, int(json.loads(self.path.read_text())["workers"]))
        except (OSError, ValueError, KeyError, TypeError):
            return 1

    def start(self, workers: int) -> list[int]:
        """Record ``workers`` starting; returns the workers of an earlier run that must retire."""
        before = self.count()
        self._write(max(before, workers))
        return list(range(workers, before))

    def retired(self, workers: int) -> None:
        """Every retiring worker has ended its session: only ``workers`` remain."""
        self._write(workers)
        log.info("ingest workers=%d recorded", workers)

    def _write(self, workers: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"workers": workers}))
        os.replace(tmp, self.path)


def worker_client_id(client_id: str, worker: int) -> str:
    """Worker 0 keeps the configured id (and so an existing session's queue); worker i adds ``-i``."""
    return client_id if worker == 0 else f"{client_id}-{worker}"
