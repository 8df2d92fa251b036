"""Events from the Parquet history, for matches and ranges SQLite no longer holds.

The Spark job writes every micro-batch's de-duplicated events to
``<spark.history>/events/batch_id=N/part-*.parquet`` and marks the folder done with
``_SUCCESS``; the live feed and the alarms keep only recent events. When an
operator opens a match the dashboard no longer has, or a time range older than the
live feed reaches, the events are read from there: read-only, only finished batch
folders (a batch being written or replaced is skipped, its files come and go), and
on one thread, so the reads take a core at most away from ingest and Spark.

To stay fast over a long history:

- every file's footer statistics (the range of ``windowEnd`` and of ``id``) are
  read once and kept per file; a file whose ranges cannot hold what is asked for
  is never opened again;
- the rest is read with the asked-for filter pushed down to the row groups and
  only the columns needed (the range listing leaves out the triples and their
  entailment: the evidence page reads those for one event);
- a file written before a column existed (``expected``, ``derivedFrom``: the event
  format grows at its end) is read for the columns it has, the others as None;
- a range is read newest file first and stops when the rows it has are newer
  than anything the remaining files can hold.

A history on a cluster's object store or HDFS (``s3a://``, ``hdfs://``) is not
read here: the dashboard says so instead.
"""
from __future__ import annotations

import heapq
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import urlparse

from .alarms import match_time

log = logging.getLogger("edgewave.cloud.dashboard.history")

DONE_MARKER = "_SUCCESS"
TIME_COLUMN = "windowEnd"
LISTING_COLUMNS = ["id", "gateway", "kind", "pattern", "windowStart", "windowEnd", "emittedAt", "ingestTime",
                   "sensor", "property", "result", "bindings", "expected", "derivedFrom"]
"""What a range listing reads: no triples and no entailment (the heavy columns); an absence's expected
patterns and a chained match's links are a few short strings, null in most rows, and mark the row."""
EVIDENCE_COLUMNS = LISTING_COLUMNS + ["triples", "entailed"]
FEED_NAMES = {"windowStart": "window_start", "windowEnd": "window_end", "emittedAt": "emitted_at",
              "ingestTime": "ingest_ms", "derivedFrom": "derived_from"}
"""Parquet column -> the live feed's name for it: history rows look like feed rows to the pages."""


@dataclass(frozen=True)
class FileStats:
    """What a Parquet file's footer says: its rows, its columns and the ranges of match time and event id
    (None: unknown)."""

    path: str
    rows: int
    time_min: int | None
    time_max: int | None
    id_min: str | None
    id_max: str | None
    columns: frozenset[str]

    def may_hold_time(self, start_ms: int, end_ms: int) -> bool:
        return self.time_min is None or self.time_max is None or (self.time_min < end_ms and self.time_max >= start_ms)

    def may_hold_id(self, event_id: str) -> bool:
        return self.id_min is None or self.id_max is None or self.id_min <= event_id <= self.id_max


@dataclass
class _Batch:
    mtime_ns: int
    files: list[FileStats] = field(default_factory=list)


def local_history(location: str) -> Path | None:
    """The history folder on this machine, or None for a URI the dashboard does not read (s3a://, hdfs://)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else location)
    return None


def _feed_row(record: dict[str, Any], missing: list[str]) -> dict[str, Any]:
    """A Parquet row as a live-feed row (the evidence views and exports take those); ``missing``, the columns
    its file was written without, as None."""
    row = {FEED_NAMES.get(name, name): value for name, value in record.items()}
    row.update((FEED_NAMES.get(name, name), None) for name in missing)
    return row


class History:
    """Read-only access to the Spark job's Parquet history at ``location`` (``spark.history``)."""

    def __init__(self, location: str) -> None:
        self.location = location
        root = local_history(location)
        self.events_dir = None if root is None else root / "events"
        self._batches: dict[str, _Batch] = {}
        self._lock = threading.Lock()

    @property
    def readable(self) -> bool:
        """Whether the history is a folder on this machine (it may still be empty or not exist yet)."""
        return self.events_dir is not None

    # -- which files ------------------------------------------------------------------------

    def files(self) -> list[FileStats]:
        """Every file of every finished batch, with its footer statistics (read once per file)."""
        if self.events_dir is None:
            return []
        try:
            entries = [e for e in os.scandir(self.events_dir) if e.name.startswith("batch_id=") and e.is_dir()]
        except FileNotFoundError:
            return []
        out: list[FileStats] = []
        with self._lock:
            seen = set()
            for entry in entries:
                seen.add(entry.name)
                try:
                    mtime = entry.stat().st_mtime_ns
                except FileNotFoundError:
                    continue
                batch = self._batches.get(entry.name)
                if batch is None or batch.mtime_ns != mtime:
                    batch = self._read_batch(Path(entry.path), mtime)
                    if batch is None:
                        self._batches.pop(entry.name, None)
                        continue
                    self._batches[entry.name] = batch
                out.extend(batch.files)
            for gone in set(self._batches) - seen:
                del self._batches[gone]
        return out

    @staticmethod
    def _read_batch(folder: Path, mtime_ns: int) -> _Batch | None:
        """A finished batch folder's files and their statistics; None while it is being written or replaced."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not (folder / DONE_MARKER).exists():
            return None
        batch = _Batch(mtime_ns)
        try:
            for path in sorted(folder.glob("*.parquet")):
                if path.name.startswith((".", "_")):
                    continue
                batch.files.append(_stats(str(path), pq.ParquetFile(path).metadata))
        except (OSError, pa.ArrowException) as exc:   # replaced under us, or damaged: looked at again next time
            log.info("history batch=%s skipped reason=%r", folder.name, str(exc))
            return None
        return batch

    def forget(self) -> None:
        """Drop the cached statistics (a file went away between listing and reading)."""
        with self._lock:
            self._batches.clear()

    # -- reads ------------------------------------------------------------------------------

    def _read(self, stats: FileStats, columns: list[str], condition: Any) -> list[dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        present = [c for c in columns if c in stats.columns]
        missing = [c for c in columns if c not in stats.columns]
        try:
            table = pq.read_table(stats.path, columns=present, filters=condition, use_threads=False,
                                  pre_buffer=False)
        except (OSError, pa.ArrowException) as exc:
            log.warning("history unreadable path=%s reason=%r: skipped, listing read again", stats.path, str(exc))
            self.forget()
            return []
        return [_feed_row(record, missing) for record in table.to_pylist()]

    def event(self, event_id: str, at_ms: int | None = None) -> dict[str, Any] | None:
        """One event with its triples and entailment (``at_ms``: its match time, when the link knows it)."""
        import pyarrow.dataset as ds

        condition = ds.field("id") == event_id
        if at_ms is not None:
            condition = condition & (ds.field(TIME_COLUMN) == at_ms)
        for stats in self.files():
            if not stats.may_hold_id(event_id) or (at_ms is not None and not stats.may_hold_time(at_ms, at_ms + 1)):
                continue
            rows = self._read(stats, EVIDENCE_COLUMNS, condition)
            if rows:
                return rows[0]
        return None

    def events(self, start_ms: int, end_ms: int, *, gateway: str | None = None, pattern: str | None = None,
               limit: int = 500, known: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` events with match time in [start_ms, end_ms), newest first, without triples.

        ``known`` are rows already at hand (the live feed's): they count towards the
        newest ``limit``, so files holding only older events are not read.
        """
        import pyarrow.dataset as ds

        condition = (ds.field(TIME_COLUMN) >= start_ms) & (ds.field(TIME_COLUMN) < end_ms)
        for name, value in (("gateway", gateway), ("pattern", pattern)):
            if value:
                condition = condition & (ds.field(name) == value)
        candidates = sorted((s for s in self.files() if s.may_hold_time(start_ms, end_ms)),
                            key=lambda s: s.time_max if s.time_max is not None else 2 ** 62, reverse=True)
        newest: dict[str, dict[str, Any]] = {}
        top: list[int] = []          # the newest ``limit`` match times so far, a min-heap

        def add(items: Iterable[dict[str, Any]]) -> None:
            for item in items:
                if item["id"] in newest:
                    continue
                newest[item["id"]] = item
                (heapq.heappush if len(top) < limit else heapq.heappushpop)(top, match_time(item))

        add(known or [])
        for stats in candidates:
            if len(top) >= limit and stats.time_max is not None and top[0] > stats.time_max:
                break                # every row still unread is older than the newest ``limit`` at hand
            add(self._read(stats, LISTING_COLUMNS, condition))
        return sorted(newest.values(), key=lambda i: (match_time(i), i["id"]), reverse=True)[:limit]


def _stats(path: str, metadata: Any) -> FileStats:
    """The file's columns, and the ranges of match time and id over every row group (unknown when a row group
    has no statistics)."""
    names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    ranges: dict[str, list[Any]] = {}
    for column in ("id", TIME_COLUMN):
        if column not in names:
            ranges[column] = [None, None]
            continue
        index = names.index(column)
        lows, highs = [], []
        for g in range(metadata.num_row_groups):
            s = metadata.row_group(g).column(index).statistics
            if metadata.row_group(g).num_rows == 0:
                continue
            if s is None or not s.has_min_max:
                lows, highs = [None], [None]
                break
            lows.append(s.min)
            highs.append(s.max)
        known = None not in lows and lows
        ranges[column] = [min(lows) if known else None, max(highs) if known else None]
    return FileStats(path, metadata.num_rows, ranges[TIME_COLUMN][0], ranges[TIME_COLUMN][1], ranges["id"][0],
                     ranges["id"][1], frozenset(metadata.schema.to_arrow_schema().names))
