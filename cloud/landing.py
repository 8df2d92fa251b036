"""The landing zone: append-only JSON-lines files the Spark job reads.

Ingest appends records to one open file per partition, ``<root>/date=YYYY-MM-DD/
part-<ms>-<n>-<random>-<writer>.jsonl.inprogress``, and makes them durable with ``sync()``
(flush + fsync) before it acknowledges them to the broker. A file is closed by
fsync and an atomic rename to ``*.jsonl`` when it reaches ``roll_bytes``, when it
is ``roll_seconds`` old, or when the date changes; the Spark job only reads
closed (``*.jsonl``) files, so it never sees a half-written one. A closed file is
never written again.

After a crash, ``recover()`` closes what the crashed process left open: it cuts
a torn last line (never acknowledged, so the broker redelivers it) and renames
the file, so records that were acknowledged are not lost. Several ingest workers
write into one landing zone, each under its own ``writer`` name, and each
recovers only its own files: another worker's open file is alive, not left over.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

IN_PROGRESS = ".inprogress"
CLOSED = ".jsonl"
DEFAULT_WRITER = "w0"
# Files written before writers had names (``part-<ms>-<n>-<random>.jsonl.inprogress``): the default writer
# recovers them.
_UNNAMED_WRITER = re.compile(r"^part-\d+-\d+-[0-9a-f]{8}\.jsonl\.inprogress$")
_WRITER_NAME = re.compile(r"^[A-Za-z0-9_]{1,32}\Z")


def partition_for(ms: int) -> str:
    """The date partition (UTC) a record ingested at ``ms`` goes to."""
    return "date=" + dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LandingZone:
    """One writer's append-only, size- and time-rolled JSON-lines files under ``root``."""

    def __init__(self, root: str | Path, *, roll_bytes: int = 16 * 1024 * 1024, roll_seconds: float = 30.0,
                 clock: Callable[[], float] = time.time, writer: str = DEFAULT_WRITER) -> None:
        if not _WRITER_NAME.match(writer):
            raise ValueError(f"landing zone writer name {writer!r}: letters, digits and _ only")
        self.root = Path(root)
        self.writer = writer
        self.roll_bytes = roll_bytes
        self.roll_seconds = roll_seconds
        self.clock = clock
        self.root.mkdir(parents=True, exist_ok=True)
        self._file: Any = None
        self._path: Path | None = None
        self._partition: str | None = None
        self._opened_at = 0.0
        self._bytes = 0
        self._seq = 0
        self._dirty = False
        self.files_closed = 0
        self.records_written = 0

    # -- writing ----------------------------------------------------------------------

    def append(self, record: dict[str, Any], ingest_ms: int) -> None:
        """Append one record (buffered; durable only after ``sync()``)."""
        partition = partition_for(ingest_ms)
        if self._file is not None and partition != self._partition:
            self.close_file()
        if self._file is None:
            self._open(partition)
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
        data = line.encode("utf-8")
        self._file.write(data)
        self._bytes += len(data)
        self._dirty = True
        self.records_written += 1

    def sync(self) -> None:
        """Flush and fsync the open file: everything appended so far survives a crash."""
        if self._file is not None and self._dirty:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._dirty = False

    def roll_if_due(self) -> bool:
        """Close the open file if it is big or old enough; True if it did."""
        if self._file is None:
            return False
        if self._bytes >= self.roll_bytes or self.clock() - self._opened_at >= self.roll_seconds:
            self.close_file()
            return True
        return False

    def close_file(self) -> Path | None:
        """fsync and rename the open file to ``*.jsonl``; returns the closed path."""
        if self._file is None:
            return None
        assert self._path is not None
        self.sync()
        self._file.close()
        self._file = None
        closed = self._path.with_name(self._path.name[: -len(IN_PROGRESS)])
        if self._bytes == 0:
            self._path.unlink()
            return None
        os.rename(self._path, closed)
        _fsync_dir(closed.parent)
        self.files_closed += 1
        log.debug("landing file closed path=%s bytes=%d", closed, self._bytes)
        return closed

    def close(self) -> None:
        self.close_file()

    def _open(self, partition: str) -> None:
        directory = self.root / partition
        new_dir = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        if new_dir:
            _fsync_dir(self.root)
        self._seq += 1
        name = (f"part-{int(self.clock() * 1000)}-{self._seq:06d}-{uuid.uuid4().hex[:8]}-{self.writer}"
                f"{CLOSED}{IN_PROGRESS}")
        self._path = directory / name
        self._file = open(self._path, "xb")
        _fsync_dir(directory)
        self._partition = partition
        self._opened_at = self.clock()
        self._bytes = 0

    # -- recovery ---------------------------------------------------------------------

    def recover(self) -> int:
        """Close the files this writer left open when it crashed; returns how many records they held."""
        records = 0
        for path in sorted(self.root.glob(f"date=*/*{CLOSED}{IN_PROGRESS}")):
            if not (path.name.endswith(f"-{self.writer}{CLOSED}{IN_PROGRESS}")
                    or (self.writer == DEFAULT_WRITER and _UNNAMED_WRITER.match(path.name))):
                continue
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                log.warning("landing recovery cut torn line path=%s bytes=%d", path, len(data) - keep)
                with open(path, "r+b") as fh:
                    fh.truncate(keep)
                    fh.flush()
                    os.fsync(fh.fileno())
            if keep == 0:
                path.unlink()
                continue
            closed = path.with_name(path.name[: -len(IN_PROGRESS)])
            os.rename(path, closed)
            _fsync_dir(path.parent)
            count = data[:keep].count(b"\n")
            records += count
            log.warning("landing recovery closed path=%s records=%d", closed, count)
        return records


def read_records(root: str | Path) -> list[dict[str, Any]]:
    """Every record in the closed files under ``root`` (for tests and inspection)."""
    out: list[dict[str, Any]] = []
    for path in sorted(Path(root).glob(f"date=*/*{CLOSED}")):
        with open(path, encoding="utf-8") as fh:
            out.extend(json.loads(line) for line in fh if line.strip())
    return out
