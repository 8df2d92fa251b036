"""The in-flight marker: which message ingest was handling when its process died.

Should ingest die on a message despite every handler (a crash inside C code, the
kernel's OOM killer), the broker would redeliver that message to the persistent
session into a crash loop. Before each message is handled its SHA-256 is written
to a small file (one ``pwrite``, no fsync: it must outlive the process, not the
machine). A digest found there on start names the message in flight at the death;
one that was in flight at ``STRIKES_TO_QUARANTINE`` deaths is quarantined unread
when it comes again. One death alone could be a coincidence (a kill, a power
cut), and quarantining a good event would take it out of the aggregates.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger("edgewave.cloud.ingest")

STRIKES_TO_QUARANTINE = 2     # deaths with a message in flight before it is quarantined unread
MAX_SUSPECTS = 100


class InFlightMarker:
    """The digest of the message being handled, in a file that outlives the process.

    ``suspects`` maps the digest of a message that was in flight when an earlier
    ingest process died to how many deaths it was in flight at (kept in
    ``<marker>.suspects`` until that message comes again).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.suspects_path = path.with_name(path.name + ".suspects")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.suspects: dict[str, int] = {}
        if self.suspects_path.exists():
            try:
                loaded = json.loads(self.suspects_path.read_text())
                self.suspects = {str(k): int(v) for k, v in loaded.items()}
            except (ValueError, TypeError, AttributeError):
                log.warning("ingest in-flight suspects file unreadable path=%s action=ignored", self.suspects_path)
        left = path.read_text(errors="replace").split() if path.exists() else []
        if left:
            digest = left[0]
            self.suspects[digest] = self.suspects.get(digest, 0) + 1
            log.warning("ingest died while handling a message sha256=%s deaths_in_flight=%d action=%s", digest,
                        self.suspects[digest], "quarantine on redelivery"
                        if self.suspects[digest] >= STRIKES_TO_QUARANTINE else "retry once more")
            self._save_suspects()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.clear()

    def strikes(self, digest: str) -> int:
        return self.suspects.get(digest, 0)

    def mark(self, digest: str) -> None:
        """This message is being handled now."""
        os.pwrite(self._fd, digest.encode("ascii") + b"\n", 0)

    def clear(self) -> None:
        """No message is being handled."""
        os.pwrite(self._fd, b" " * 65, 0)

    def resolve(self, digest: str) -> None:
        """A suspect came again and was handled (stored or quarantined): forget it."""
        if self.suspects.pop(digest, None) is not None:
            self._save_suspects()

    def _save_suspects(self) -> None:
        while len(self.suspects) > MAX_SUSPECTS:
            del self.suspects[next(iter(self.suspects))]
        tmp = self.suspects_path.with_name(self.suspects_path.name + ".tmp")
        tmp.write_text(json.dumps(self.suspects))
        os.replace(tmp, self.suspects_path)

    def close(self) -> None:
        self.clear()
        os.close(self._fd)
