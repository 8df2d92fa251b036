"""Durable windows: what entered the engine, journaled with the events it made, replayed at start.

The engine's windows live in memory. Without this journal a crash (``kill -9``, power, OOM)
loses them: a fire whose smoke alarm arrived before the crash and whose hot reading arrived
after it never matches, because the smoke message was acknowledged to the local broker
once handled and is not delivered again.

What makes it exact:

- **One durable step.** A sensor message's journal entry (topic, arrival time, payload) is
  written in the same SQLite transaction as the events it made, in the outbox's file
  (``Outbox.append_batch``), and its acknowledgement goes only after that commit. So a
  message is either journaled *and* its events stored, or neither (and then unacknowledged:
  the local broker delivers it again). A separate file could not give that: SQLite
  transactions across attached WAL databases are not atomic. Several messages that made no
  event may share one commit (outbox_writer.py, *group commit*): each still waits for it.
- **One row per commit, small on the card.** The messages a commit journals are packed
  together into one row (``Packer.pack_block``: zstd against a dictionary of the vocabulary
  sensors use), so each message's repeated structure (the sensor's IRIs, the property, the
  datatypes) is stored once per commit: a demo observation of 950 bytes took about 205
  bytes in a row of its own and takes about 90 in a group's (at the demo's pace a group
  holds about 14). One row instead of fourteen is also one B-tree cell where there were
  fourteen, two to a 512-byte leaf: a group commit appended about 9 journal leaves and an
  interior page or two to the WAL, and now appends a leaf or two and the row's overflow
  pages, and the journal a checkpoint copies went from about 500 pages to 220. The group is
  packed when it commits, outside the outbox's lock: about 30 us for 16 observations, less
  than packing them one by one took.
- **Replay without re-sending.** At start, before any connection, the journal's rows are
  pushed into the fresh engine with their arrival times; the matches they complete were
  stored with those very rows, so they are dropped (counted as ``state_replayed_matches``),
  never stored again. The cloud's dedup by event id stays the second line.
- **Redeliveries are recognised.** A message handled and journaled whose acknowledgement
  had not reached the broker at the crash is delivered again (MQTT DUP) first thing on the
  resumed session. Its triples are already in the restored windows: handling it again
  would make its matches twice, with new ids (arrival times differ). The digests of the
  journal's messages are kept from the restore until the first message that is not one of
  them (redeliveries come first, in order); such a message is acknowledged and skipped
  (``redelivered_skipped``).
- **Bounded, in small pieces.** Rows whose messages are all older than the longest window
  of the running config are deleted in the transaction of a later message, a few pages at
  a time (a row with one message still in a window stays whole, and a restore skips the
  others): once
  ``PRUNE_ROWS`` of them are due, or the oldest has waited ``PRUNE_WAIT_MS``; never more
  than ``PRUNE_MAX_ROWS`` at once. An idle gateway deletes them in a transaction of its
  own (``upkeep_due``, outbox_writer.py). Deleting every 100 ms instead (100 rows at 1,000
  msg/s) put 0.2 ms on every hundredth message inside its transaction, and 0.5 ms in a
  transaction of its own, which the next message waited for: either way, the agent's
  p99. Beyond ``state.max_bytes`` the oldest rows go at once, in the transaction that
  would pass it (``state_truncated``). Messages on streams no window reads are not journaled.
- **One config.** The journal belongs to one config version and engine: a config change
  (push, rollback, a failed swap's rebuild) empties it. The running engine keeps its windows
  across a swap as before (by difference); only after a crash are the windows from before
  the last config change gone.
- **Bad state never stops the gateway.** A journal from another format, agent version or
  config version, with a row that does not decode, or whose clock cannot be trusted is
  discarded with one log line and ``state_discarded``; a damaged file is moved aside with
  the outbox (outbox.py).
- **Time** (agent_clock.py). On the same boot, restored windows age by the true time the
  agent was down (the boot clock), whatever the wall clock did: the restored rows are moved
  onto the current wall clock keeping their age, so stream time keeps following the wall
  clock (events are compared with the cloud's clock) and never goes back in the engine. On
  another boot the wall clock is all there is: the windows age by it, and if it is earlier
  than the journal's last row (no battery-backed clock) the windows are discarded.
"""
from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections import Counter, deque
from functools import cache
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

import zstandard

from edgewave.agent.agent_clock import CLOCK, AgentClock
from edgewave.agent.engine import parse_query
from edgewave.agent.intake import Rejection

if TYPE_CHECKING:
    from edgewave.agent.config import AgentSettings
    from edgewave.agent.intake import SensorEvent
    from edgewave.agent.mqtt_link import Ack
    from edgewave.agent.outbox import Outbox
    from edgewave.agent.pipeline import Pipeline
    from edgewave.agent.reconfigure import CompiledConfig
    from edgewave.agent.status import Counters

log = logging.getLogger("edgewave.agent.journal")

JOURNAL_FORMAT = "6"          # the tables' layout and the meaning of their columns (6: a commit's messages in one row)
CLOCK_TOLERANCE_MS = 1000     # wall and boot clocks drift apart by less; smaller shifts are left alone
# Expired rows are deleted in whole marks (``_marks``): a mark holds up to MARK_ROWS rows
# that arrived within MARK_EVERY_MS. A transaction deletes them once PRUNE_ROWS are due (a
# dozen pages of rows), or once the oldest has waited PRUNE_WAIT_MS (a quiet gateway:
# fewer, larger deletions write less; a deletion rewrites the file's header and freelist pages
# too, and at the demo's pace one a second was a sixth of the journal's commits; a row kept
# past its window costs only its bytes, and a restore skips it), at most PRUNE_MAX_ROWS at
# once (a clock that jumped forward expires everything at once: the rest goes with the next
# transactions).
MARK_ROWS = 32
MARK_EVERY_MS = 100
PRUNE_ROWS = 32
PRUNE_WAIT_MS = 30_000
PRUNE_MAX_ROWS = 256

# A row holds the messages one commit journaled (``Packer.pack_block``): ``arrival_ms`` and
# ``boot_ms`` are those of its last message, whose offsets from it are in the packed block
# (so a restore's shift of the clock is one UPDATE of the column). The stream is not stored:
# the topic names it (``ew/in/<stream>/<sensor>``, mapped by the settings as at intake), and
# each message is stored as ``topic NUL payload`` (MQTT topics hold no NUL), where the topic
# shares the sensor's name with the observation's IRIs.
_TABLES = ("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, arrival_ms INTEGER NOT NULL, "
           "boot_ms INTEGER NOT NULL, payload BLOB NOT NULL)",
           "CREATE TABLE IF NOT EXISTS journal_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
_INSERT = "INSERT INTO journal (seq, arrival_ms, boot_ms, payload) VALUES (?, ?, ?, ?)"

TOPIC_MAX_BYTES = 65_536       # what a packed topic adds at most (MQTT's limit on a topic)
BLOCK_MESSAGES = 32           # messages in one row at most (a group holds 16; a longer list is split)
PACK_LEVEL = 4                # zstd's: level 3 stored 15 % more bytes, level 5 took a quarter more time

# What sensor payloads repeat (SSN/SOSA terms, datatypes, N-Triples punctuation): the
# compressor refers back into it from a message's first byte. Part of JOURNAL_FORMAT:
# changing it makes older journals unreadable, so it changes only with the format.
_DICTIONARY = (
    b'\0ew/in/ <https://edgewave.dev/ns#'
    b'<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/ns/sosa/Observation> .\n'
    b' <http://www.w3.org/ns/sosa/madeBySensor> <http://www.w3.org/ns/sosa/observedProperty> '
    b'<http://www.w3.org/ns/sosa/hasFeatureOfInterest> <http://www.w3.org/ns/sosa/resultTime> '
    b'"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"^^<http://www.w3.org/2001/XMLSchema#boolean> .\n'
    b'"^^<http://www.w3.org/2001/XMLSchema#decimal> .\n<http://www.w3.org/ns/sosa/hasSimpleResult> "')


class JournalEntry(NamedTuple):
    """One sensor message as it entered the engine, waiting for its commit."""

    arrival_ms: int
    boot_ms: int
    message: bytes        # ``topic NUL payload``
    size: int             # the payload's own bytes: what ``state.max_bytes`` counts


class JournalBlock(NamedTuple):
    """The messages of one commit, packed: one row of the journal."""

    arrival_ms: int       # its last message's
    boot_ms: int          # its last message's
    payload: bytes        # ``Packer.pack_block``
    size: int             # its messages' payload bytes
    messages: int


class Packer:
    """Packs a commit's messages into one row as the journal stores it and unpacks it (zstd,
    magic-less frames, no checksum: SQLite keeps the rows, and a damaged one fails to unpack
    or to parse), never past ``max_bytes`` a message. One caller at a time: zstd contexts are
    not thread-safe.

    Unpacked, a row is its messages' count, then for each its arrival time less the row's
    (zigzag) and its length, all as varints, then the messages one after the other: the
    numbers together and the messages together compress best."""

    def __init__(self, max_bytes: int) -> None:
        dictionary = zstandard.ZstdCompressionDict(_DICTIONARY, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        params = zstandard.ZstdCompressionParameters.from_level(
            PACK_LEVEL, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=False,
            write_checksum=False, write_dict_id=False)
        self._compress = zstandard.ZstdCompressor(dict_data=dictionary, compression_params=params).compress
        self._decompressor = zstandard.ZstdDecompressor(dict_data=dictionary,
                                                        format=zstandard.FORMAT_ZSTD1_MAGICLESS)
        self.max_bytes = max_bytes

    def pack_block(self, entries: Sequence[JournalEntry]) -> JournalBlock:
        """One row for ``entries`` (in arrival order, at most ``BLOCK_MESSAGES``)."""
        last = entries[-1]
        if len(entries) == 1:          # a match's message alone: the latency path
            message = last.message
            return JournalBlock(last.arrival_ms, last.boot_ms,
                                self._compress(b"\x01\x00" + _varint(len(message)) + message), last.size, 1)
        head = bytearray(_varint(len(entries)))
        for entry in entries:
            offset = entry.arrival_ms - last.arrival_ms
            head += _varint(offset * -2 - 1 if offset < 0 else offset * 2)
            head += _varint(len(entry.message))
        head += b"".join(entry.message for entry in entries)
        return JournalBlock(last.arrival_ms, last.boot_ms, self._compress(bytes(head)),
                            sum(entry.size for entry in entries), len(entries))

    def unpack_block(self, packed: bytes, arrival_ms: int) -> list[tuple[int, bytes]]:
        """The ``(arrival_ms, topic NUL payload)`` of the messages in a row ``pack_block``
        made; raises ``ValueError`` (or ``zstandard.ZstdError``) on anything else."""
        data = self._decompressor.decompress(
            packed, max_output_size=BLOCK_MESSAGES * (self.max_bytes + TOPIC_MAX_BYTES + 16))
        count, at = _read_varint(data, 0)
        if not 0 < count <= BLOCK_MESSAGES:
            raise ValueError(f"{count} messages")
        heads = []
        for _ in range(count):
            zigzag, at = _read_varint(data, at)
            length, at = _read_varint(data, at)
            heads.append((arrival_ms + (-(zigzag + 1) // 2 if zigzag & 1 else zigzag // 2), length))
        messages = []
        for arrival, length in heads:
            if at + length > len(data):
                raise ValueError("truncated")
            messages.append((arrival, data[at:at + length]))
            at += length
        if at != len(data):
            raise ValueError(f"{len(data) - at} bytes after the messages")
        return messages


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


@cache
def engine_version() -> str:
    """The agent's version: a journal written by another one is not replayed. Read once, and
    importlib.metadata only then: importing it (email, zipfile, csv) is about 4 MB resident."""
    from importlib import metadata
    try:
        return metadata.version("edgewave")
    except metadata.PackageNotFoundError:
        return "unknown"


def message_digest(topic: str, payload: bytes) -> bytes:
    """What recognises a message delivered again: its topic and payload, 8 bytes."""
    digest = hashlib.blake2b(topic.encode(), digest_size=8)
    digest.update(b"\0")
    digest.update(payload)
    return digest.digest()


class Discarded(Exception):
    """The journal cannot be replayed; the reason is logged and counted."""


class WindowJournal:
    """The journal of one agent, in ``outbox``'s file (its rows commit with the events);
    one caller at a time (the engine lock), and ``restore`` at start. ``stream_ms`` is the
    engine's clock (``Pipeline.stream_ms``): rows expire by stream time, not the wall clock."""

    def __init__(self, outbox: Outbox, settings: AgentSettings, counters: Counters, *,
                 stream_ms: Callable[[], int], clock: AgentClock = CLOCK) -> None:
        self.outbox = outbox
        self.enabled = settings.state.durable_windows
        self.max_bytes = settings.state.max_bytes
        self._packer = Packer(settings.input.max_message_bytes)
        self.counters = counters
        self.clock = clock
        self._stream_ms = stream_ms
        self.config_version: int | None = None
        self._applied: CompiledConfig | None = None
        self._engine: object | None = None
        self._streams: frozenset[str] | None = frozenset()    # streams windows read; None: every one
        self._width_ms = 0
        self._generation = -1          # the outbox file the tables were made in
        self._reset = True             # empty the journal and write its meta with the next transaction
        self._next_seq = 1
        self._bytes = 0                # payload bytes in the table
        self._written = 0              # payload bytes ever written (marks count in it)
        # (first seq, last seq, first arrival_ms, last arrival_ms, _written after the last row)
        self._marks: deque[tuple[int, int, int, int, int]] = deque()
        self._pruned: tuple[int, int, bool] | None = None   # (last seq, bytes, truncated) the open transaction deletes
        self._redelivered: Counter[bytes] | None = None
        self.epoch = 0                 # bumped when the journal starts afresh: older entries are void
        self._writing: Sequence[JournalBlock] = ()   # the rows the open transaction inserts
        # How far window instances were reported (instance_queries.py): what the meta holds, and
        # the value the next transaction writes there.
        self._reported_written = self._reported = -1
        # How far the absences' deadlines were fired by the clock (absence.py), the same way.
        self._fired_written = self._fired = -1

    # -- the running agent (engine lock) ---------------------------------------------------------
    def entry(self, topic: str, payload: bytes, entered: SensorEvent | None) -> JournalEntry | None:
        """The entry for a message the engine took, or None (off, rejected, or a stream no
        window reads); packed with the others of its commit (``pack``)."""
        if entered is None or not self.enabled:
            return None
        streams = self._streams
        if streams is not None and entered.stream not in streams:
            return None
        return JournalEntry(entered.arrival_ms, self.clock.boot_ms(), topic.encode() + b"\0" + payload, len(payload))

    def pack(self, entries: Sequence[JournalEntry]) -> list[JournalBlock]:
        """The rows that journal ``entries`` (one commit's, in order): one, or one per
        ``BLOCK_MESSAGES``. The writer packs them before the transaction, outside the
        outbox's lock, and keeps them packed while the disk refuses them."""
        return [self._packer.pack_block(entries[at:at + BLOCK_MESSAGES])
                for at in range(0, len(entries), BLOCK_MESSAGES)]

    def redelivered(self, topic: str, payload: bytes, ack: Ack | None) -> bool:
        """True for a message delivered again after a crash that the restored windows already
        hold (see the module docstring); its acknowledgement may go at once."""
        waiting = self._redelivered
        if waiting is None or ack is None:
            return False
        digest = message_digest(topic, payload)
        if not waiting.get(digest):
            self._redelivered = None       # past the redeliveries: nothing more to recognise
            return False
        waiting[digest] -= 1
        self.counters.add("redelivered_skipped")
        return True

    def note_reported(self, end_ms: int) -> None:
        """Window instances ending by ``end_ms`` are reported by the events the next
        transaction stores (those the clock closed on an idle gateway): written with them, so
        that after a crash they are not reported again (the journal's rows cannot tell)."""
        self._reported = max(self._reported, end_ms)

    def note_fired(self, deadline_ms: int) -> None:
        """Absences whose deadlines are at most ``deadline_ms`` are reported by the events the
        next transaction stores (the clock fired them on an idle gateway): after a crash the
        replayed timers up to there are dropped, not fired again."""
        self._fired = max(self._fired, deadline_ms)

    def statement(self, blocks: Sequence[JournalBlock], epoch: int) -> Callable[[sqlite3.Connection], None] | None:
        """What to run inside the outbox transaction that stores ``blocks`` (``pack``ed while
        ``epoch`` was current, in order), or None if it has nothing to do. Rows of an older
        epoch (the config changed since) are left out: the journal starts afresh. Expired
        rows go with it when enough are due (see ``PRUNE_ROWS``)."""
        if not self.enabled:
            return None
        if epoch != self.epoch:
            blocks = ()
        self._writing, self._pruned = blocks, None
        if self._marks and not self._reset and self._generation == self.outbox.generation:
            now = blocks[-1].arrival_ms if blocks else self._stream_ms()
            self._pruned = self._expired(now, sum(b.size for b in blocks))
        if not blocks and not self._reset and self._pruned is None and self._reported == self._reported_written \
                and self._fired == self._fired_written:
            return None
        return self._write

    def upkeep_due(self) -> bool:
        """An idle gateway's expired rows: the oldest has waited ``PRUNE_WAIT_MS`` (the
        writer's ``upkeep`` then runs ``statement`` with no entries). While messages come,
        their transactions delete them first."""
        return self.enabled and bool(self._marks) and self._waited(self._stream_ms() - self._width_ms)

    def _waited(self, cutoff_ms: int) -> bool:
        """The oldest mark has been out of every window for ``PRUNE_WAIT_MS``."""
        return self._marks[0][3] <= cutoff_ms - PRUNE_WAIT_MS

    def _write(self, conn: sqlite3.Connection) -> None:
        """Inside the transaction: what the last ``statement`` decided."""
        if self._generation != self.outbox.generation or self._reset:
            self._prepare(conn)
        blocks = self._writing
        if len(blocks) == 1:               # the usual case: one commit, one row
            conn.execute(_INSERT, (self._next_seq, *blocks[0][:3]))
        elif blocks:
            seq = self._next_seq
            conn.executemany(_INSERT, [(seq + i, *b[:3]) for i, b in enumerate(blocks)])
        if self._pruned is not None:
            conn.execute("DELETE FROM journal WHERE seq <= ?", (self._pruned[0],))
        if self._reported != self._reported_written:
            conn.execute("INSERT OR REPLACE INTO journal_meta (name, value) VALUES ('reported_through', ?)",
                         (str(self._reported),))
        if self._fired != self._fired_written:
            conn.execute("INSERT OR REPLACE INTO journal_meta (name, value) VALUES ('timers_through', ?)",
                         (str(self._fired),))

    def committed(self) -> None:
        """The transaction that ran the last ``statement`` committed."""
        self._reported_written = self._reported
        self._fired_written = self._fired
        pruned, self._pruned = self._pruned, None
        blocks, self._writing = self._writing, ()
        if self._generation != self.outbox.generation or self._reset:
            self._generation, self._reset = self.outbox.generation, False
            self._bytes = self._written = 0
            self._marks.clear()
            pruned = None
        if pruned is not None:
            upto, freed, truncated = pruned
            if truncated:
                self.counters.add("state_truncated")
            while self._marks and self._marks[0][1] <= upto:
                self._marks.popleft()
            self._bytes -= freed
        for block in blocks:
            self._bytes += block.size
            self._mark(self._next_seq, block.arrival_ms, block.size)
            self._next_seq += 1

    def _mark(self, seq: int, arrival_ms: int, size: int) -> None:
        """Row ``seq`` is in the table: into the last mark, or a new one."""
        self._written += size
        marks = self._marks
        if marks:
            first, _, first_ms, _, _ = marks[-1]
            if seq - first < MARK_ROWS and arrival_ms - first_ms < MARK_EVERY_MS:
                marks[-1] = (first, seq, first_ms, arrival_ms, self._written)
                return
        marks.append((seq, seq, arrival_ms, arrival_ms, self._written))

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Dropped, not emptied: a journal of another format may have other columns.
        conn.execute("DROP TABLE IF EXISTS journal")
        conn.execute("DROP TABLE IF EXISTS journal_meta")
        for sql in _TABLES:
            conn.execute(sql)
        conn.executemany("INSERT INTO journal_meta (name, value) VALUES (?, ?)", self._meta().items())

    def _meta(self) -> dict[str, str]:
        return {"format": JOURNAL_FORMAT, "engine": engine_version(),
                "config_version": str(self.config_version), "boot_id": self.clock.boot_id,
                "reported_through": str(self._reported), "timers_through": str(self._fired)}

    def _expired(self, now_ms: int, adding: int) -> tuple[int, int, bool] | None:
        """The rows to delete at stream time ``now_ms`` as (last seq, bytes, truncated), if
        any are due (see ``PRUNE_ROWS``): those no window can hold any more (older than the
        longest window), and the oldest beyond ``max_bytes`` once ``adding`` more are
        written. Whole marks, so one range delete. Usually looks at one mark."""
        marks = self._marks
        cutoff = now_ms - self._width_ms
        over = self._bytes + adding - self.max_bytes
        if marks[0][3] > cutoff and over <= 0:
            return None                                 # the usual case: nothing expired yet
        base = self._written - self._bytes              # bytes written before the table's first row
        upto = freed = rows = 0
        truncated = False
        for first, last, _, last_ms, written in marks:
            expired = last_ms <= cutoff                 # every row of the mark is out of every window
            if expired and (rows + last - first < PRUNE_MAX_ROWS or not rows):
                pass
            elif freed < over:
                truncated = truncated or not expired    # still in a window, but the journal is full
            else:
                break
            upto, freed, rows = last, written - base, rows + last - first + 1
        if truncated or rows >= PRUNE_ROWS or self._waited(cutoff):
            return upto, freed, truncated
        return None

    def failed(self) -> None:
        """The transaction did not commit: nothing it did happened."""
        self._pruned, self._writing = None, ()

    def follow(self, applied: CompiledConfig | None, engine: object | None) -> None:
        """The config and engine now running. A config change (push, rollback) or a rebuilt
        engine (a failed swap) starts an empty journal, written with the next transaction:
        the journal holds one config's windows. The agent calls it after every config work
        item, whatever its outcome, and before ``restore``."""
        if applied is self._applied and engine is self._engine:
            return
        version = applied.version if applied else None
        changed = version != self.config_version or engine is not self._engine
        self._applied, self._engine, self.config_version = applied, engine, version
        self._streams, self._width_ms = windows_of(applied)
        if changed:
            self._reset = True
            self._redelivered = None
            self.epoch += 1
            self._reported = -1        # the new config's queries report from their start
            self._fired = -1

    # -- start-up ---------------------------------------------------------------------------
    def restore(self, pipeline: Pipeline) -> None:
        """Replay the journal into ``pipeline``'s fresh engine (before any connection). What
        cannot be replayed, or read, is discarded, logged and counted: start-up goes on."""
        outbox = self.outbox
        if outbox.moved_aside is not None:
            self._discard(f"the outbox file was damaged and moved aside to {outbox.moved_aside}", 0)
        if not self.enabled:
            outbox.run(lambda conn: [conn.execute(f"DROP TABLE IF EXISTS {t}") for t in ("journal", "journal_meta")])
            return
        try:
            rows, meta = outbox.run(self._read)
        except sqlite3.Error as exc:
            self._discard(f"unreadable: {exc}", 0)
            return
        if not rows and not meta:
            return                              # a fresh file: the first write makes the tables
        try:
            self._check(meta)
            self._replay(rows, meta, pipeline)
        except Discarded as why:
            self._discard(str(why), len(rows))
        except sqlite3.Error as exc:           # rewriting it failed: the next write starts afresh
            self._discard(f"cannot be rewritten: {exc}", len(rows))

    @staticmethod
    def _read(conn: sqlite3.Connection) -> tuple[list[tuple], dict[str, str]]:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "journal" not in tables or "journal_meta" not in tables:
            return [], {}
        meta = {str(k): str(v) for k, v in conn.execute("SELECT name, value FROM journal_meta")}
        if meta.get("format") != JOURNAL_FORMAT:
            return [], meta or {"format": "none"}     # discarded on its meta: its rows may not be ours to read
        rows = conn.execute("SELECT seq, arrival_ms, boot_ms, payload FROM journal ORDER BY seq").fetchall()
        return rows, meta

    def _check(self, meta: dict[str, str]) -> None:
        mine = self._meta()
        for name in ("format", "engine", "config_version"):
            if meta.get(name) != mine[name]:
                raise Discarded(f"{name} {meta.get(name)!r} is not this agent's {mine[name]!r}")

    def _replay(self, rows: list[tuple], meta: dict[str, str], pipeline: Pipeline) -> None:
        if not rows:
            return
        decoded = []                   # one per message: (row's seq, arrival_ms, stream, digest, triples)
        sizes: dict[int, int] = {}     # each row's payload bytes
        last_arrival = -1
        for seq, arrival, boot, packed in rows:
            if not (isinstance(seq, int) and isinstance(arrival, int) and isinstance(boot, int)
                    and isinstance(packed, bytes)):
                raise Discarded(f"row {seq!r} has columns of the wrong type")
            try:
                messages = self._packer.unpack_block(packed, arrival)
            except (zstandard.ZstdError, ValueError) as exc:
                raise Discarded(f"row {seq} does not decode: {exc}") from None
            sizes[seq] = 0
            for at, message in messages:
                if at < last_arrival:
                    raise Discarded(f"row {seq} goes back in time ({at} < {last_arrival})")
                last_arrival = at
                packed_topic, nul, payload = message.partition(b"\0")
                try:
                    topic = packed_topic.decode("utf-8")
                except ValueError as exc:
                    raise Discarded(f"row {seq} does not decode: {exc}") from None
                if not nul:
                    raise Discarded(f"row {seq} does not decode: no topic")
                # The same intake as when it arrived (N-Triples, or the mapping of its topic): the
                # journal is kept for one config version (``_check``), so the same mappings.
                entered = pipeline.decode_again(topic, payload, at)
                if isinstance(entered, Rejection):
                    raise Discarded(f"row {seq} does not decode: {entered.reason}: {entered.detail}")
                decoded.append((seq, at, entered.stream, message_digest(topic, payload), list(entered.triples)))
                sizes[seq] += len(payload)
        wall, boot_now = self.clock.wall_ms(), self.clock.boot_ms()
        last_boot = rows[-1][2]
        same_boot = bool(meta.get("boot_id")) and meta.get("boot_id") == self.clock.boot_id
        if same_boot and boot_now >= last_boot:
            elapsed = boot_now - last_boot
            shift = wall - elapsed - last_arrival
            if abs(shift) <= CLOCK_TOLERANCE_MS:
                shift = 0
        else:
            elapsed = wall - last_arrival
            if elapsed < -CLOCK_TOLERANCE_MS:
                self.counters.add("state_clock_unknown")
                raise Discarded(f"another boot, and the wall clock ({wall}) is {-elapsed} ms earlier than the "
                                "journal's last row: the time the agent was down is unknown")
            shift = 0
        now = max(wall, last_arrival + shift)
        # Per-instance queries need what their instances still to be reported hold: those
        # that end after the last row, closed by the clock now (or already, by the meta); an
        # absence, the matches whose deadlines passed while the agent was down.
        from_last = pipeline.instances.evaluators or pipeline.engine.waits()
        cutoff = (last_arrival + shift if from_last else now) - self._width_ms
        kept = [row for row in decoded if row[1] + shift >= cutoff]
        replayed = len(kept)
        try:
            reported = int(meta.get("reported_through", "-1"))
            fired = int(meta.get("timers_through", "-1"))
        except ValueError:
            raise Discarded(f"reported_through {meta.get('reported_through')!r} or timers_through "
                            f"{meta.get('timers_through')!r} is not a number") from None
        self._reported = self._reported_written = reported
        pipeline.instances.reported_through = max(last_arrival, reported) + shift
        matches = pipeline.replay([(arrival + shift, stream, triples)
                                   for seq, arrival, stream, digest, triples in kept])
        self._fired = self._fired_written = fired
        if fired >= 0:
            pipeline.engine.forget_deadlines(fired + shift)   # fired by the clock before the crash
        first_kept = kept[0][0] if kept else rows[-1][0] + 1
        boot_offset = boot_now - wall

        def rewrite(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM journal WHERE seq < ?", (first_kept,))
            if shift or not same_boot:
                conn.execute("UPDATE journal SET arrival_ms = arrival_ms + ?, boot_ms = arrival_ms + ? + ?",
                             (shift, shift, boot_offset))
            conn.execute("INSERT OR REPLACE INTO journal_meta (name, value) VALUES ('boot_id', ?)",
                         (self.clock.boot_id,))

        self.outbox.append_batch([], rewrite)
        self._generation, self._reset = self.outbox.generation, False
        self._next_seq = rows[-1][0] + 1
        for seq, arrival, _, _ in rows:
            if seq >= first_kept:           # a row with a message still in a window stays whole
                self._mark(seq, arrival + shift, sizes[seq])
        self._bytes = self._written
        self._redelivered = Counter(row[3] for row in decoded)
        self.counters.add("state_restored", replayed)
        self.counters.add("state_replayed_matches", matches)
        log.info("journal event=restored messages=%d expired=%d replayed_matches=%d boot=%s down_ms=%d shift_ms=%d",
                 replayed, len(decoded) - replayed, matches, "same" if same_boot else "other", elapsed, shift)

    def _discard(self, reason: str, rows: int) -> None:
        """One log line and a count; the journal starts empty with the next write."""
        self.counters.add("state_discarded")
        self._reset = True
        self.epoch += 1
        log.error("journal event=state_discarded rows=%d reason=%r consequence=%r", rows, reason,
                  "windows start empty; events already stored are still sent")


def windows_of(config: CompiledConfig | None) -> tuple[frozenset[str] | None, int]:
    """The streams the config's windows read (None: every stream) and how long a row is
    needed (ms): the longest window of a continuous pattern (plus the WITHIN of an absence: a
    match waits that long for its deadline); RANGE + STEP of a per-instance query (its last
    reported instance, which ISTREAM, DSTREAM and on-change compare with)."""
    if config is None:
        return frozenset(), 0
    streams: set[str | None] = set()
    width = 0
    for name, text in config.patterns.items():
        instance_query = config.instance_queries.get(name)
        query = instance_query or parse_query(text)
        within = query.absence.within_ms if not instance_query and query.absence is not None else 0
        for window in query.windows.values():
            needed = window.width_ms + (window.step_ms or window.width_ms if instance_query else 0) + within
            width = max(width, needed)
            streams.update(window.streams())
    return (None if None in streams else frozenset(s for s in streams if s is not None)), width
