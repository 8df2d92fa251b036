"""Store-and-forward: every uplink event is on disk before it is published.

An SQLite file (WAL) holds the events in the order they were made. A row is deleted
only when ingest said it landed the event (shared/landed_acks.py; with a cloud that does
not acknowledge, when the cloud broker did: PUBACK), never when it was merely handed to
the socket, and nothing wipes the table on reconnect: both are how other gateways
lost data (AWS Greengrass spooler and ThingsBoard gateway storage issues). Rows sent and
not yet landed count towards the bounds like any other. The outbox
is bounded by bytes and by age; when full, ``drop_oldest`` or ``refuse_newest``
applies, and every drop is counted (kept in the file, so a restart does not hide it)
and logged.

A file SQLite cannot read (at start, or found damaged by a write) is moved aside with a
timestamp and a fresh one created (shared/sqlite_files.py): the agent keeps running and the
operator gets a loud log line, never a crash loop.
"""
from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import zstandard

from edgewave.shared import clock
from edgewave.agent.outbox_checkpoint import AUTOCHECKPOINT_PAGES, CHECKPOINT_EVERY_S, Checkpointer
from edgewave.shared.sqlite_files import move_aside, open_checked

log = logging.getLogger("edgewave.agent.outbox")

T = TypeVar("T")

DROP_OLDEST = "drop_oldest"
REFUSE_NEWEST = "refuse_newest"


@dataclass(frozen=True)
class OutboxRow:
    seq: int
    event_id: str
    kind: str
    created_ms: int
    payload: bytes


@dataclass(frozen=True)
class OutboxStats:
    depth: int
    bytes: int
    oldest_age_ms: int | None
    dropped: int
    dropped_full: int
    dropped_expired: int
    refused: int


# A new file's page size. Every commit appends each page it changed to the WAL, whole: the
# leaf a journal row went into (window_journal.py), the journal's interior page and the
# file's header when a leaf is added, the events' leaf and their sequence numbers. Most of
# these pages change by a few hundred bytes a commit, so smaller pages write less: at the
# demo's pace 512-byte pages wrote a fifth less than 1 kB ones (which wrote a quarter of
# SQLite's default 4 kB). A journal row (about 230 bytes) and a packed significant event
# (about 300) fit a leaf; a match with its evidence continues on overflow pages. Existing
# files keep the page size they were made with.
PAGE_SIZE = 512
# Debian's SQLite overwrites deleted content with zeros (SECURE_DELETE), so deleting the
# acknowledged events wrote every page they had freed again: 1.4 ms at the median and 10 ms
# at p99 for a PUBACK batch of about 200 events, on the network thread (bench_agent at
# 1,000 events/s). FAST zeroes only inside pages written anyway: 0.6 and 0.9 ms. Deleted
# events may stay readable in free pages until reused; they were the sensors' data, on the
# gateway's own card, and were sent to the cloud.
SECURE_DELETE = "FAST"

# Landed events (``delete_soon``) leave depth, bytes and every read at once, and the file with
# the next write's transaction: at the demo's pace a landed acknowledgement (one to three
# events, a fraction of a second after their commit) was a commit of its own appending the
# file's header, the events' leaf and the freelist's page to the WAL, a fifth of the commits
# and a tenth of the bytes the agent wrote; in the next group commit those pages are written
# anyway. A quiet gateway deletes them after DELETE_WAIT_S (``delete_due``); more than
# DELETE_SOON_ROWS waiting (a busy gateway's acknowledgements cover tens of events) go at once,
# in a transaction of their own as before, so no message's commit carries a large delete. A
# crash before the delete sends them again with the same ids (the cloud drops them).
DELETE_WAIT_S = 10.0
DELETE_SOON_ROWS = 32

_INSERT = "INSERT INTO events (event_id, kind, created_ms, size, payload) VALUES (?, ?, ?, ?, ?)"

# Event payloads are stored compressed (zstd against a dictionary of what events repeat: the
# JSON-LD @context, field names, SOSA terms). A significant observation's 1.3 kB of JSON took
# two overflow pages, so every event allocated pages on insert and freed them on delete, each
# time rewriting the file's header page and the freelist's: on a card, about 11 pages (each
# appended whole to the WAL) per event stored and landed, against 3 for the ~300 bytes it now
# takes in its leaf. A stored payload starts with PACKED_V1; JSON (older files) with "{".
# The dictionary is part of that tag: a new one needs a new tag, and the old one stays to read.
PACKED_V1 = b"\x01"
PACK_LEVEL = 3
_EVENT_DICTIONARY = (   # frozen with PACKED_V1; never change it
    '{"@context":{"ew":"https://edgewave.dev/ns#","xsd":"http://www.w3.org/2001/XMLSchema#","id":"@id","t'
    'ype":"@type","Match":"ew:Match","Significant":"ew:Significant","Instance":"ew:InstanceResult","gatew'
    'ay":"ew:gateway","pattern":"ew:pattern","kind":"ew:kind","windowStart":{"@id":"ew:windowStart","@typ'
    'e":"xsd:long"},"windowEnd":{"@id":"ew:windowEnd","@type":"xsd:long"},"emittedAt":{"@id":"ew:emittedA'
    't","@type":"xsd:long"},"bindings":{"@id":"ew:binding","@container":"@set"},"variable":"ew:variable",'
    '"value":"ew:value","triples":{"@id":"ew:triple","@container":"@list"},"sensor":"ew:sensor","property'
    '":"ew:property","result":"ew:result","entailed":{"@id":"ew:entailed","@container":"@set"},"triple":"'
    'ew:statement","from":"ew:entailedFrom","axioms":{"@id":"ew:axiom","@container":"@list"},"operator":"'
    'ew:streamOperator","rows":{"@id":"ew:row","@container":"@list"},"expected":{"@id":"ew:expected","@co'
    'ntainer":"@list"},"derivedFrom":{"@id":"ew:derivedFrom","@type":"@id","@container":"@set"}},"id":"ur'
    'n:edgewave:event:","type":"Significant","gateway":"","pattern":"","kind":"significant","windowStart"'
    ':,"windowEnd":,"emittedAt":,"bindings":[{"variable":"","value":"<http://example.org/"}],"triples":["'
    '<http://www.w3.org/ns/sosa/Observation> <http://www.w3.org/ns/sosa/madeBySensor> '
    '<http://www.w3.org/ns/sosa/observedProperty> <http://www.w3.org/ns/sosa/hasFeatureOfInterest> '
    '<http://www.w3.org/ns/sosa/hasSimpleResult> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> '
    '\\"^^<http://www.w3.org/2001/XMLSchema#decimal> ."],"sensor":"<","property":"<https://edgewave.dev/ns'
    '#","result":"\\"^^<http://www.w3.org/2001/XMLSchema#decimal>","entailed":[{"triple":"","from":"","axi'
    'oms":["<http://www.w3.org/2000/01/rdf-schema#subClassOf> '
    '<http://www.w3.org/2000/01/rdf-schema#subPropertyOf> '
    '"]}],"expected":null,"derivedFrom":null,"Match","match"}'
).encode()


class PayloadPacker:
    """Packs event payloads as the outbox stores them and unpacks them (stored JSON as is).
    One caller at a time (the outbox's lock): zstd contexts are not thread-safe."""

    def __init__(self) -> None:
        dictionary = zstandard.ZstdCompressionDict(_EVENT_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        params = zstandard.ZstdCompressionParameters.from_level(
            PACK_LEVEL, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=True,
            write_checksum=False, write_dict_id=False)
        self._compress = zstandard.ZstdCompressor(dict_data=dictionary, compression_params=params).compress
        self._decompress = zstandard.ZstdDecompressor(dict_data=dictionary,
                                                      format=zstandard.FORMAT_ZSTD1_MAGICLESS).decompress

    def pack(self, payload: bytes) -> bytes:
        """What the outbox stores: packed, unless that is no smaller (and cannot be misread)."""
        packed = PACKED_V1 + self._compress(payload)
        return packed if len(packed) < len(payload) or payload[:1] == PACKED_V1 else payload

    def unpack(self, stored: bytes) -> bytes:
        if stored[:1] == PACKED_V1:
            return self._decompress(stored[1:])
        return stored


class Outbox:
    """The on-disk queue of events waiting for the cloud broker's PUBACK."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int, max_age_s: float,
                 policy: str = DROP_OLDEST, synchronous: str = "NORMAL",
                 checkpoint_every_s: float = CHECKPOINT_EVERY_S) -> None:
        if policy not in (DROP_OLDEST, REFUSE_NEWEST):
            raise ValueError(f"unknown outbox policy {policy!r}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.max_age_ms = int(max_age_s * 1000)
        self.policy = policy
        self.synchronous = synchronous.upper()
        self._lock = threading.Lock()
        self._expiry_checked_ms = 0
        self.moved_aside: Path | None = None
        self.generation = 0      # bumped when the file was replaced: positions in it are void
        self.checkpoints = Checkpointer(self.path, self.synchronous, checkpoint_every_s)   # outbox_checkpoint.py
        self._packer = PayloadPacker()
        self._landed: list[tuple[int, int]] = []     # seq ranges landed, not yet deleted (``delete_soon``)
        self._landed_rows = 0
        self._landed_since = 0.0
        self._open()

    # -- opening and recovery --------------------------------------------------------------
    def _open(self) -> None:
        def prepare(conn: sqlite3.Connection) -> None:
            # AUTOINCREMENT: a sequence number is never reused, even after the table emptied,
            # so "everything after seq N" stays a correct position for the uplink.
            conn.execute("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "event_id TEXT NOT NULL, kind TEXT NOT NULL, created_ms INTEGER NOT NULL, "
                         "size INTEGER NOT NULL, payload BLOB NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER)")
            # A random id per file: the keys of uplink messages name it, so an acknowledgement
            # meant for a file since moved aside cannot delete the new file's rows.
            conn.execute("INSERT OR IGNORE INTO counters (name, value) VALUES ('outbox_id', ?)",
                         (secrets.randbits(48) + 1,))
            conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM events").fetchone()

        self._landed, self._landed_rows = [], 0      # positions in another file are void
        conn, moved = open_checked(self.path, prepare, "outbox", synchronous=self.synchronous, page_size=PAGE_SIZE)
        if moved is not None:
            self.moved_aside = moved
            self.generation += 1
        conn.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA secure_delete={SECURE_DELETE}")
        self._conn = conn
        totals = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM events").fetchone()
        self._depth, self._bytes = int(totals[0]), int(totals[1])
        self._counters = {row[0]: row[1] for row in conn.execute("SELECT name, value FROM counters")}
        self.outbox_id = int(self._counters["outbox_id"])
        if self._depth:
            log.info("outbox event=opened path=%s pending=%d bytes=%d", self.path, self._depth, self._bytes)

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """The file went bad while running: move it aside, start a fresh one (caller holds the lock)."""
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        self.moved_aside = move_aside(self.path, exc, "outbox")
        self.generation += 1
        self._open()

    def start_checkpoints(self) -> None:
        """Checkpoint on a thread of its own from now on, never inside a commit (outbox_checkpoint.py)."""
        self.checkpoints.start(lambda: self.generation)

    def checkpoint(self) -> tuple[int, int] | None:
        """Copy what the WAL holds into the database file now, without holding up writers;
        (pages in the WAL, pages copied), or None if it could not run."""
        return self.checkpoints.checkpoint(self.generation)

    def close(self) -> None:
        self.checkpoints.stop()
        with self._lock:
            try:
                self._delete_landed()
            except sqlite3.Error as exc:
                log.warning("outbox event=delete_failed rows=%d error=%r consequence='sent again at the next start, "
                            "dropped by the cloud'", self._landed_rows, str(exc))
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                pass
            self._conn.close()

    # -- writing ---------------------------------------------------------------------------
    def append_batch(self, rows: Sequence[tuple[str, str, bytes]], also: Callable[[sqlite3.Connection], None] | None,
                     now_ms: int | None = None) -> list[int | None]:
        """Store ``rows`` (event id, kind, payload) and run ``also`` on the connection in ONE
        transaction: either all of it is on disk or none of it. The one way in, so that the
        recovery from a damaged file below is written once: the outbox writer stores a
        message's events this way, and the window journal its row with them (window_journal.py).
        Returns each row's sequence number, or None where the policy refused it. A refusal
        of the disk (``sqlite3.OperationalError``) is raised with nothing written."""
        now_ms = clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            for attempt in (1, 2):
                kept = (self._depth, self._bytes, dict(self._counters), self._expiry_checked_ms)
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                    landed = self._delete_landed_statements()
                    seqs = [self._insert(event_id, kind, payload, now_ms) for event_id, kind, payload in rows]
                    if also is not None:
                        also(self._conn)
                    self._conn.execute("COMMIT")
                    if landed:
                        self._landed, self._landed_rows = [], 0
                    self.checkpoints.committed(self._conn)
                    return seqs
                except BaseException as exc:     # a RecursionError too: never leave the transaction open
                    if self._conn.in_transaction:
                        try:
                            self._conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    self._depth, self._bytes, self._counters, self._expiry_checked_ms = kept
                    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError) \
                            or attempt == 2:
                        raise        # disk full, I/O: the caller keeps the batch and retries
                    self._recover(exc)
        raise AssertionError("unreachable")

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the outbox's connection under its lock (autocommit: ``fn`` opens its own
        transaction where statements must commit together). Errors are the caller's."""
        with self._lock:
            return fn(self._conn)

    def _delete_landed_statements(self) -> bool:
        """Inside the caller's transaction: delete the landed rows (``delete_soon``); whether
        there were any. They left depth and bytes already."""
        for low, high in self._landed:
            self._conn.execute("DELETE FROM events WHERE seq BETWEEN ? AND ?", (low, high))
        return bool(self._landed)

    def _delete_landed(self) -> None:
        """The landed rows, deleted now in a transaction of their own (caller holds the lock)."""
        if not self._landed:
            return
        try:
            self._conn.execute("BEGIN")
            self._delete_landed_statements()
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
        self._landed, self._landed_rows = [], 0
        self.checkpoints.committed(self._conn)

    def _insert(self, event_id: str, kind: str, payload: bytes, now_ms: int) -> int | None:
        """One event inside the caller's transaction: the age and size bounds, then the policy."""
        size = len(payload)          # the event's own bytes, packed or not: what max_bytes counts
        payload = self._packer.pack(payload)
        self._expire(now_ms)
        if self._bytes + size > self.max_bytes:
            if self.policy == REFUSE_NEWEST or size > self.max_bytes:
                self._count("refused", 1)
                log.error("outbox event=refused id=%s bytes=%d outbox_bytes=%d max_bytes=%d",
                          event_id, size, self._bytes, self.max_bytes)
                return None
            self._drop_oldest_until(self.max_bytes - size)
        cur = self._conn.execute(_INSERT, (event_id, kind, now_ms, size, payload))
        self._depth += 1
        self._bytes += size
        return int(cur.lastrowid)

    def _drop_oldest_until(self, budget: int) -> None:
        dropped = 0
        while self._bytes > budget and self._depth:
            rows = self._conn.execute("SELECT seq, size FROM events ORDER BY seq LIMIT 100").fetchall()
            take = []
            freed = 0
            for seq, size in rows:
                if self._bytes - freed <= budget:
                    break
                take.append(seq)
                freed += size
            self._conn.executemany("DELETE FROM events WHERE seq = ?", [(s,) for s in take])
            self._bytes -= freed          # only once deleted: a failed delete (disk full) changes nothing
            self._depth -= len(take)
            dropped += len(take)
        if dropped:
            self._count("dropped_full", dropped)
            log.error("outbox event=dropped_oldest count=%d reason=full max_bytes=%d", dropped, self.max_bytes)

    def expire(self, now_ms: int | None = None) -> None:
        """Drop (and count) events older than max_age_s; also runs on every append."""
        with self._lock:
            self._expire(clock.now_ms() if now_ms is None else now_ms)

    def _expire(self, now_ms: int) -> None:
        if not self._depth or not self.max_age_ms:
            return
        if now_ms - self._expiry_checked_ms < 1000:
            return
        self._expiry_checked_ms = now_ms
        cutoff = now_ms - self.max_age_ms
        oldest = self._oldest_created_ms()
        if oldest is None or oldest >= cutoff:
            return
        if self._landed and not self._conn.in_transaction:
            self._delete_landed()          # landed rows are not the outbox's to expire
        row = self._conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM events WHERE created_ms < ?",
                                 (cutoff,)).fetchone()
        self._conn.execute("DELETE FROM events WHERE created_ms < ?", (cutoff,))
        self._depth -= row[0]
        self._bytes -= row[1]
        self._count("dropped_expired", row[0])
        log.error("outbox event=dropped_expired count=%d max_age_s=%d", row[0], self.max_age_ms // 1000)

    def _count(self, name: str, n: int) -> None:
        self._conn.execute("INSERT INTO counters (name, value) VALUES (?, ?) "
                           "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value", (name, n))
        self._counters[name] = self._counters.get(name, 0) + n

    def _oldest_created_ms(self) -> int | None:
        """When the oldest row not landed was made (caller holds the lock)."""
        landed = self._landed
        rows = self._conn.execute("SELECT seq, created_ms FROM events ORDER BY seq LIMIT ?",
                                  (self._landed_rows + 1,)).fetchall()
        for seq, created_ms in rows:
            if not any(low <= seq <= high for low, high in landed):
                return int(created_ms)
        return None

    def _before_reading(self, low: int, high: int) -> None:
        """Landed rows between ``low`` and ``high`` are deleted before a read that would see
        them (an uplink going back after a reconnect; the common reads are past them)."""
        if any(l_low <= high and low <= l_high for l_low, l_high in self._landed):
            self._delete_landed()

    # -- reading and acknowledging ---------------------------------------------------------
    def pending_after(self, seq: int, limit: int) -> list[OutboxRow]:
        """Up to ``limit`` events after ``seq``, oldest first."""
        with self._lock:
            try:
                self._before_reading(seq + 1, 1 << 62)
                rows = self._conn.execute(
                    "SELECT seq, event_id, kind, created_ms, payload FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                    (seq, limit)).fetchall()
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                return []
            return self._rows(rows)

    def _rows(self, rows: list[tuple]) -> list[OutboxRow]:
        """Rows as read, payloads unpacked (under the lock: the packer is not thread-safe)."""
        unpack = self._packer.unpack
        return [OutboxRow(r[0], r[1], r[2], r[3], unpack(bytes(r[4]))) for r in rows]

    def get(self, seqs: list[int]) -> list[OutboxRow]:
        """The rows still present among ``seqs``, oldest first."""
        if not seqs:
            return []
        with self._lock:
            self._before_reading(min(seqs), max(seqs))
            marks = ",".join("?" * len(seqs))
            rows = self._conn.execute(
                f"SELECT seq, event_id, kind, created_ms, payload FROM events WHERE seq IN ({marks}) ORDER BY seq",
                seqs).fetchall()
            return self._rows(rows)

    def delete(self, seqs: list[int]) -> int:
        """Remove acknowledged events; already-gone rows are ignored. Returns how many went.
        Consecutive seqs (the usual batch) go as one range."""
        runs: list[tuple[int, int]] = []
        for seq in sorted(set(seqs)):
            if runs and runs[-1][1] == seq - 1:
                runs[-1] = (runs[-1][0], seq)
            else:
                runs.append((seq, seq))
        return self.delete_ranges(runs)

    def delete_ranges(self, ranges: Sequence[tuple[int, int]]) -> int:
        """Remove the rows of each inclusive seq range (the rows of landed messages) in one
        transaction; rows already gone are ignored. Returns how many went."""
        if not ranges:
            return 0
        with self._lock:
            try:
                self._conn.execute("BEGIN")
                landed = self._delete_landed_statements()      # already out of depth and bytes
                sizes = [size for low, high in ranges for (size,) in self._conn.execute(
                    "DELETE FROM events WHERE seq BETWEEN ? AND ? RETURNING size", (low, high))]
                self._conn.execute("COMMIT")
                if landed:
                    self._landed, self._landed_rows = [], 0
                self.checkpoints.committed(self._conn)
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                if isinstance(exc, sqlite3.OperationalError):
                    raise       # e.g. disk full: the rows stay, the uplink tries again
                self._recover(exc)
                return 0
            self._depth -= len(sizes)
            self._bytes -= sum(sizes)
            return len(sizes)

    def delete_soon(self, ranges: Sequence[tuple[int, int]]) -> None:
        """Rows that landed (inclusive seq ranges): gone from depth, bytes and reads now, from
        the file with the next transaction that writes (see ``DELETE_WAIT_S``), or now when
        more than ``DELETE_SOON_ROWS`` wait. A disk that refuses the delete leaves them landed,
        deleted with a later write."""
        if not ranges:
            return
        merged: list[tuple[int, int]] = []       # the same rows may come twice (PUBACK and landed)
        for low, high in sorted(ranges):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        ranges = merged
        with self._lock:
            if any(low <= l_high and l_low <= high for low, high in ranges for l_low, l_high in self._landed):
                self._delete_now()               # the same rows landed twice: count them once
                ranges = [(low, high) for low, high in ranges
                          if not any(low <= l_high and l_low <= high for l_low, l_high in self._landed)]
            rows = total = 0
            found = []
            try:
                for low, high in ranges:
                    count, size = self._conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM events "
                                                     "WHERE seq BETWEEN ? AND ?", (low, high)).fetchone()
                    if count:
                        rows, total = rows + count, total + size
                        found.append((low, high))
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                return
            self._landed += found
            if not rows:
                return
            if not self._landed_rows:
                self._landed_since = time.monotonic()
            self._depth -= rows
            self._bytes -= total
            self._landed_rows += rows
            if self._landed_rows > DELETE_SOON_ROWS:
                self._delete_now()

    def delete_due(self) -> None:
        """A quiet gateway's landed rows, once the oldest waited ``DELETE_WAIT_S`` for a write
        to take them along (the uplink's thread calls it)."""
        if self._landed_rows and time.monotonic() - self._landed_since >= DELETE_WAIT_S:
            with self._lock:
                self._delete_now()

    def _delete_now(self) -> None:
        """``_delete_landed``; a refusing disk leaves them for later, a damaged file is moved
        aside (caller holds the lock)."""
        try:
            self._delete_landed()
        except sqlite3.OperationalError as exc:      # e.g. disk full: tried again with a later write
            self._landed_since = time.monotonic()
            log.warning("outbox event=delete_failed rows=%d error=%r action='deleted with a later write'",
                        self._landed_rows, str(exc))
        except sqlite3.DatabaseError as exc:
            self._recover(exc)

    def holds_between(self, low: int, high: int) -> bool:
        """Whether any row with a seq in ``low``..``high`` is still here."""
        with self._lock:
            self._before_reading(low, high)
            return self._conn.execute("SELECT 1 FROM events WHERE seq BETWEEN ? AND ? LIMIT 1",
                                      (low, high)).fetchone() is not None

    def flag(self, name: str) -> bool:
        """A fact about the uplink kept in the file (e.g. that the cloud acknowledges landed events)."""
        with self._lock:
            return bool(self._counters.get(name))

    def set_flag(self, name: str) -> None:
        with self._lock:
            if not self._counters.get(name):
                self._conn.execute("INSERT OR REPLACE INTO counters (name, value) VALUES (?, 1)", (name,))
                self._counters[name] = 1

    def stats(self, now_ms: int | None = None) -> OutboxStats:
        now_ms = clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            oldest = self._oldest_created_ms()
            c = self._counters
            full, expired, refused = c.get("dropped_full", 0), c.get("dropped_expired", 0), c.get("refused", 0)
            return OutboxStats(depth=self._depth, bytes=self._bytes,
                               oldest_age_ms=None if oldest is None else max(0, now_ms - oldest),
                               dropped=full + expired + refused, dropped_full=full,
                               dropped_expired=expired, refused=refused)
