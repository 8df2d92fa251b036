"""Outbox checkpoints: the WAL copied into the database file on a thread of their own, never in a commit.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the
thread that writes, with two fsyncs: 6-16 ms on the agent's network thread, and most of
its latency tail (bench_agent at 1,000 completing msg/s: p99 2.9-4.1 ms with the durable
windows' journal, whose rows add a page or so to each commit and so crossed the threshold
sooner, against 1.9-2.5 ms without; with no checkpoint on that thread, 1.8 against 1.7).

So the ``Checkpointer`` does it, PASSIVE (it never waits for a writer), on its own
connection and thread, woken by the writers' ``CHECKPOINT_COMMITS``-th commit since the
last one (a commit appends two to five pages: an event, a journal row, a delete of
acknowledged events), or ``CHECKPOINT_EVERY_S`` after the last one if anything was
written. SQLite's own checkpoint stays as the backstop, at ``AUTOCHECKPOINT_PAGES``,
should this thread fall far behind.

The thread runs at the lowest priority there is (Linux ``SCHED_IDLE``: only on a core
that would otherwise idle). At normal priority, the few milliseconds a checkpoint takes
(copying some 300 pages) were a core taken from the brokers and the agent on a two-core
gateway: the messages that arrived meanwhile took twice as long (bench_agent at 1,000
msg/s: p50 0.87 ms against 0.37; at idle priority 0.46), a third of the agent's slowest
percent, and more with the durable windows' journal, whose rows are most of the pages
copied. Such a thread must never hold what a writer waits for, so it does not finish the
WAL itself (below).

Why not more often: a checkpoint copies every page the WAL holds into the file (and syncs
both), and the pages that change most (the journal's last leaves, the file's header, the
events' leaf) change again right after: fewer checkpoints copy each of them fewer times. A
quiet gateway checkpoints every ``outbox.checkpoint_interval_s`` (900 s; at 30 s the copies
were about a third of what the demo's pace wrote). The journal's pages are reused once
their rows expired, so what one copies is bounded by the longest window, not by the
interval: at the demo's pace a checkpoint copied about 30 file blocks of 4 kB whether it
came after 300 s or 900 s, so 900 s writes a third as much (1.4 against 0.5 MB an hour);
the WAL then holds up to about 2,500 pages (1.3 MB), which a restart after a crash reads
once. Measured at 1,000 commits/s the WAL stays under 3,100 pages, and under 13,000
with writers that never pause.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable

from edgewave.shared.sqlite_files import open_read_write

log = logging.getLogger("edgewave.agent.outbox")

CHECKPOINT_COMMITS = 1000
CHECKPOINT_EVERY_S = 900.0
AUTOCHECKPOINT_PAGES = 16_000     # SQLite's, in the commit: only if this thread falls far behind
# The WAL starts over only once a checkpoint has copied every page in it, but a PASSIVE one
# copies those that were there when it began: what writers append meanwhile is copied by
# short further passes, until one finds nothing new (at most this many). Writers that never
# pause that long (a thousand commits a second) would keep the WAL growing to SQLite's
# threshold; past WRITER_FINISHES_AT pages the next writer copies the few pages left
# itself, right after its commit (``committed``), which is what SQLite's own would do
# after copying everything in the commit.
CATCH_UP_PASSES = 4
WRITER_FINISHES_AT = 8000


class Checkpointer:
    """Checkpoints one outbox file; ``committed`` is called after each of its writers' commits."""

    def __init__(self, path: Path, synchronous: str, every_s: float = CHECKPOINT_EVERY_S) -> None:
        self.path = path
        self.synchronous = synchronous
        self.every_s = every_s
        self._conn: sqlite3.Connection | None = None
        self._generation = -1
        self._commits = 0                          # since the last checkpoint
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._finish = False                       # the next writer copies what is left
        self.checkpoints = 0
        self.finished_by_writer = 0

    def committed(self, conn: sqlite3.Connection) -> None:
        """A writer committed on ``conn`` (under the outbox's lock): wake the thread once the
        WAL is due, or copy the few pages it left (``WRITER_FINISHES_AT``)."""
        self._commits += 1
        if self._commits == CHECKPOINT_COMMITS:
            self._wake.set()
        if self._finish:
            self._finish = False
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:
                log.warning("outbox event=checkpoint_failed error=%r", str(exc))
                return
            if busy:
                self._finish = True                # the thread is copying: the next commit
            else:
                self.finished_by_writer += 1

    def start(self, generation_of: Callable[[], int]) -> None:
        """Run checkpoints on a thread from now on (the agent; a bare ``Outbox`` relies on
        SQLite's). ``generation_of`` says which outbox file is current (outbox.py)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(generation_of,), name="checkpoint", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, generation_of: Callable[[], int]) -> None:
        background_priority()
        while True:
            woken = self._wake.wait(self.every_s)
            if self._stopping:
                return
            self._wake.clear()
            if woken or self._commits:
                try:
                    self.checkpoint(generation_of())
                except Exception:      # never end the thread: SQLite's backstop would do it all, in commits
                    log.exception("outbox event=checkpoint_failed action='tried again at the next wake-up'")

    def checkpoint(self, generation: int) -> tuple[int, int] | None:
        """Copy what the WAL holds into the file, PASSIVE; returns (pages in the WAL, pages
        copied), or None if it could not run (SQLite's backstop still does). One caller at a time."""
        try:
            if self._conn is None or self._generation != generation:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                self._conn = open_read_write(self.path, synchronous=self.synchronous, busy_timeout_s=10)
                self._generation = generation
            self._commits = 0
            frames, copied = self._pass()
            caught_up = False
            for _ in range(CATCH_UP_PASSES):
                now, copied_now = self._pass()
                caught_up = now <= frames   # nothing came while the last pass ran: the WAL can start over
                if caught_up:
                    break
                frames, copied = now, copied_now
            self._finish = not caught_up and frames >= WRITER_FINISHES_AT
        except sqlite3.Error as exc:
            log.warning("outbox event=checkpoint_failed error=%r", str(exc))
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            return None
        self.checkpoints += 1
        return frames, copied

    def _pass(self) -> tuple[int, int]:
        assert self._conn is not None
        _, frames, copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames), int(copied)


def background_priority() -> None:
    """Let the calling thread run only when a core would otherwise idle (Linux
    ``SCHED_IDLE``; on Linux the call applies to the thread, not the process). Elsewhere,
    or refused, it keeps its priority: checkpoints then cost latency, nothing else."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError) as exc:
        log.info("outbox event=checkpoint_priority_unchanged reason=%r", str(exc))
