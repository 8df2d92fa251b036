"""The dashboard's one reader of ingest's live feed: it folds matches into alarms and fans new rows out.

A thread in the dashboard process reads the feed (read-only, ``read_feed``)
after the last seq it handled, every ``poll_s``; each batch goes into the alarm
store together with its last seq (one transaction, so a restart resumes where it
stopped and folds nothing twice), then into an in-memory buffer of the newest
rows. Open live pages and alarm pages wait on that buffer and the store's
revision instead of each polling the feed file, so fifty open pages cost what
one does.

If the feed was deleted and made again (its seq starts over below ours), the
follower starts from its beginning; matches it already folded are recognised by
their event id. If the dashboard was down for longer than the feed keeps rows,
the rows in between are gone: it logs how many it missed.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from edgewave.cloud.live_feed import read_feed

from .alarms import AlarmStore

log = logging.getLogger("edgewave.cloud.dashboard.follower")

BATCH = 500
BUFFER_ROWS = 5000
RESET_CHECK_S = 5.0


class FeedFollower:
    """Follows the live feed at ``feed_path`` into ``store``; ``items_after`` serves the newest rows from memory."""

    def __init__(self, feed_path: str | Path, store: AlarmStore, poll_s: float = 0.2,
                 buffer_rows: int = BUFFER_ROWS) -> None:
        self.feed_path = Path(feed_path)
        self.store = store
        self.poll_s = poll_s
        self._buffer: deque[dict[str, Any]] = deque(maxlen=buffer_rows)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.after = store.last_seq()
        self.floor = self.after       # the buffer holds every row with floor < seq <= newest_seq
        self.newest_seq = self.after
        self.errors = 0

    def start(self) -> "FeedFollower":
        log.info("follower starting feed=%s state=%s after_seq=%d", self.feed_path, self.store.path, self.after)
        self._thread = threading.Thread(target=self._run, name="live-feed-follower", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        last_reset_check = time.monotonic()
        while not self._stop.is_set():
            try:
                got = self.step()
                if not got and time.monotonic() - last_reset_check > RESET_CHECK_S:
                    last_reset_check = time.monotonic()
                    self._check_reset()
            except Exception as exc:   # a locked or damaged file: logged, retried; the pages go on
                self.errors += 1
                if self.errors == 1 or self.errors % 100 == 0:
                    log.error("follower error=%r errors=%d", str(exc), self.errors)
                got = 0
            if got < BATCH:
                self._stop.wait(self.poll_s)

    def step(self) -> int:
        """Read and fold what the feed has after our seq; returns how many rows it read."""
        items = read_feed(self.feed_path, self.after, BATCH)
        if not items:
            return 0
        first = items[0]["seq"]
        if self.after and first > self.after + 1:
            log.warning("follower missed rows=%d from_seq=%d to_seq=%d reason='the feed dropped them before the "
                        "dashboard read them'", first - self.after - 1, self.after + 1, first - 1)
        last = items[-1]["seq"]
        changed = self.store.apply(items, last)
        with self._lock:
            if first > self.newest_seq + 1:
                self._buffer.clear()
                self.floor = first - 1
            self._buffer.extend(items)
            if len(self._buffer) == self._buffer.maxlen:
                self.floor = self._buffer[0]["seq"] - 1
            self.newest_seq = last
        self.after = last
        if changed:
            log.debug("follower rows=%d last_seq=%d alarms_changed=%d", len(items), last, len(changed))
        return len(items)

    def _check_reset(self) -> None:
        newest = read_feed(self.feed_path, 0, 1, newest_first=True)
        if newest and newest[0]["seq"] < self.after:
            log.warning("follower feed_restarted newest_seq=%d our_seq=%d: reading it from the start",
                        newest[0]["seq"], self.after)
            with self._lock:
                self._buffer.clear()
                self.after = self.floor = self.newest_seq = 0

    def items_after(self, seq: int, limit: int = BATCH) -> list[dict[str, Any]] | None:
        """Buffered rows after ``seq`` (oldest first); None when ``seq`` is older than the buffer holds."""
        with self._lock:
            if seq < self.floor:
                return None
            if seq >= self.newest_seq:
                return []
            out = []
            for item in reversed(self._buffer):     # the new rows are at the right end
                if item["seq"] <= seq:
                    break
                out.append(item)
        out.reverse()
        return out[:limit]
