"""Each gateway's ``Naming`` (terms.py), from the config document it applied.

The labels, prefixes, units and alert texts a page shows a gateway's events with come
from that gateway's document as push-config recorded it (``config_pushes``). Reading a
document costs about 80 ms (rdflib), so a naming is kept per distinct document (a fleet
that runs one document reads it once), and each gateway's applied version is looked up
at most every ``CHECK_S``. A gateway with no document on record, or one that no longer
reads, is shown with the common prefixes and last segments only.

The overview's figures span every gateway: they are named by the gateways' namings
merged (``fleet``), which reads at most ``FLEET_READS`` documents not read yet per call, so
a page is never held up by a whole fleet's documents; the merge is complete a few page
loads after a start or a fleet-wide push.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
import time

from edgewave.shared.configdoc import load_config_document

from . import configs
from .queries import Query, Reader
from .terms import Naming

log = logging.getLogger("edgewave.cloud.dashboard.terms")

CHECK_S = 10.0
MAX_FLEET = 200
"""Gateways whose namings the fleet's merges (the first by name): enough for a site, bounded for a fleet."""
FLEET_READS = 2
"""Documents the fleet's merge reads per call beyond those already read."""
MAX_DOCUMENTS = 256
"""Distinct documents whose namings are kept (the least recently read dropped first)."""
PLAIN = Naming.of((), ())
"""The naming of a gateway without a document: common prefixes, last segments, no units."""
_REGISTERED = re.compile(r"REGISTER\s+\w+\s+<([^<>\s]*)>", re.IGNORECASE)


class _Budget:
    """How many documents one call may still read, and whether it had to leave one unread."""

    def __init__(self, left: int) -> None:
        self.left = left
        self.skipped = False


class GatewayTerms:
    """The naming of each gateway's events, kept per applied config document."""

    def __init__(self, reader: Reader, check_s: float = CHECK_S) -> None:
        self._reader = reader
        self._check_s = check_s
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[int | None, float, Naming]] = {}   # gateway -> (version, checked, naming)
        self._documents: dict[str, Naming] = {}                        # sha-256 of a document's text -> naming
        self._fleet: tuple[float, Naming] | None = None

    def of(self, gateway: str) -> Naming:
        return self._of(gateway, reads=None)

    def _of(self, gateway: str, reads: _Budget | None) -> Naming:
        """``reads``: the documents this call may still read (None: any); a gateway whose
        document it may not read keeps its previous naming (PLAIN at first), checked again later."""
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
                found = self._read(q, gateway, version, reads)
                if found is None:                       # over the budget: not now
                    return kept[2] if kept is not None else PLAIN
                naming = found
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
        reads = _Budget(FLEET_READS)
        for gateway in gateways[:MAX_FLEET]:
            naming = self._of(gateway, reads)
            for mine, theirs in ((merged.prefixes, naming.prefixes), (merged.labels, naming.labels),
                                 (merged.units, naming.units)):
                for key, value in theirs.items():
                    mine.setdefault(key, value)
        with self._lock:
            self._fleet = (now - self._check_s if reads.skipped else now, merged)   # incomplete: again next time
        return merged

    def _read(self, q: Query, gateway: str, version: int | None, reads: _Budget | None) -> Naming | None:
        found = configs.document(q, gateway, version) if version is not None else None
        if found is None:
            return PLAIN
        text, fmt = found
        sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            naming = self._documents.get(sha)
        if naming is not None:
            return naming
        if reads is not None:
            if reads.left <= 0:
                reads.skipped = True
                return None
            reads.left -= 1
        naming = self._naming_of(text, fmt, gateway, version)
        with self._lock:
            if len(self._documents) >= MAX_DOCUMENTS:
                self._documents.pop(next(iter(self._documents)))
            self._documents[sha] = naming
        return naming

    @staticmethod
    def _naming_of(text: str, fmt: str, gateway: str, version: int | None) -> Naming:
        try:
            doc = load_config_document(text, fmt, None)
        except Exception as exc:                     # a document from an older format, or damaged
            log.warning("config document unreadable for naming gateway=%s version=%s reason=%r",
                        gateway, version, str(exc)[:200])
            return PLAIN
        # Events name a pattern by what it registers; the document keys its alert text by ew:name.
        alerts = {}
        for label, alert in doc.alerts.items():
            registered = _REGISTERED.search(doc.patterns.get(label, ""))
            alerts[registered[1] if registered else label] = alert
        return Naming.of([text, *doc.patterns.values()], [*doc.schema, *doc.static], alerts)
