"""Each gateway's ``Naming`` (terms.py), from the config document it applied.

The labels, prefixes, units and alert texts a page shows a gateway's events with come
from that gateway's document as push-config recorded it (``config_pushes``). Reading and
checking a document costs tens of milliseconds, so each gateway's naming is kept until
its applied version changes, which is looked up at most every ``CHECK_S`` per gateway. A
gateway with no document on record, or one that no longer reads (an older format), is
shown with the common prefixes and local names only.
"""
from __future__ import annotations

import logging
import threading
import time
from edgewave.agent.engine.config_check import check_config_document

from . import configs
from .queries import Query, Reader
from .terms import Naming

log = logging.getLogger("edgewave.cloud.dashboard.terms")

CHECK_S = 10.0
MAX_FLEET = 200
"""Gateways whose namings the fleet's merges (the first by name): enough for a site, bounded for a fleet."""
PLAIN = Naming.of((), ())
"""The naming of a gateway without a document: common prefixes, local names, no units."""


class GatewayTerms:
    """The naming of each gateway's events, kept per applied config version."""

    def __init__(self, reader: Reader, check_s: float = CHECK_S) -> None:
        self._reader = reader
        self._check_s = check_s
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[int | None, float, Naming]] = {}   # gateway -> (version, checked, naming)
        self._fleet: tuple[float, Naming] | None = None

    def of(self, gateway: str) -> Naming:
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(gateway)
        if kept is not None and now - kept[1] < self._check_s:
            return kept[2]
        with self._reader.query() as q:
            version = configs.applied_version(q, gateway)
            if kept is not None and kept[0] == version:
                naming = kept[2]
            else:
                naming = self._read(q, gateway, version)
        with self._lock:
            self._kept[gateway] = (version, now, naming)
        return naming

    def fleet(self) -> Naming:
        """One naming for figures over every gateway (the overview's tables): the gateways'
        namings merged, the first gateway's (by name) where two name one term differently."""
        now = time.monotonic()
        with self._lock:
            kept = self._fleet
        if kept is not None and now - kept[0] < self._check_s:
            return kept[1]
        with self._reader.query() as q:
            gateways = sorted(str(row[0]) for row in q.rows("SELECT gateway FROM gateways"))
        merged = Naming.of((), ())
        for gateway in gateways[:MAX_FLEET]:
            naming = self.of(gateway)
            for mine, theirs in ((merged.prefixes, naming.prefixes), (merged.labels, naming.labels),
                                 (merged.units, naming.units)):
                for key, value in theirs.items():
                    mine.setdefault(key, value)
        with self._lock:
            self._fleet = (now, merged)
        return merged

    @staticmethod
    def _read(q: Query, gateway: str, version: int | None) -> Naming:
        found = configs.document(q, gateway, version) if version is not None else None
        if found is None:
            return PLAIN
        text, fmt = found
        try:
            checked = check_config_document(text, fmt, limits=None)
        except Exception as exc:                     # a document from an older format, or damaged
            log.warning("config document unreadable for naming gateway=%s version=%s reason=%r",
                        gateway, version, str(exc)[:200])
            return PLAIN
        doc = checked.document
        return Naming.of([text, *checked.patterns.values()], [*doc.schema, *doc.static], checked.alerts)
