"""Recorded streams: timestamped N-Triples(-star), for replay, tests and benchmarks.

One statement per line, ``<milliseconds>\\t<N-Triples statement>`` (docs/ARCHITECTURE.md), for example::

    1700000000000\t<http://ex.org/s1> <http://ex.org/temp> "21.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .

Blank lines and lines starting with ``#`` are skipped, and so is a byte-order mark at the
start of a file (``open_recorded``). The timestamp is a non-negative integer (ASCII digits
only) no larger than a signed 64-bit integer (``MAX_TIMESTAMP``, as uplink events carry
it) and timestamps never decrease: the engine's clock is stream time, so a line from the
past would be silently wrong, not merely late. A line that goes
back in time is therefore an error like any malformed line: strict readers raise, readers
given an ``errors`` list skip it, record why, and go on (the clock stays where it was).
"""
from __future__ import annotations

import codecs
import io
import os
import re
import sys
from contextlib import contextmanager
from itertools import chain
from typing import IO, Callable, Iterable, Iterator

from .ntriples import (NTriplesError, Triple, fast_object, fast_predicate, fast_subject, fast_tail, object_cache,
                       parse_line, serialize, subject_cache)

__all__ = [
    "RecordedStreamError",
    "format_recorded_line",
    "open_recorded",
    "parse_recorded_line",
    "read_recorded",
    "write_recorded",
]


MAX_TIMESTAMP = 2 ** 63 - 1
READ_CHUNK = 1 << 16  # bytes a recorded stream's text file reads and decodes at a time (text_chunks)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class RecordedStreamError(NTriplesError):
    """A bad line in a recorded stream (bad timestamp, bad statement, time going back)."""


def read_recorded(
    lines: Iterable[str | bytes], errors: list[NTriplesError] | None = None,
    only_time: Callable[[str], bool] | None = None,
) -> Iterator[tuple[int, Triple]]:
    """Yield ``(timestamp_ms, triple)`` for each statement line, numbering lines from 1.

    ``lines`` may be text or UTF-8 bytes (a file opened in binary mode, or in text mode with
    ``errors="surrogateescape"`` as ``open_recorded`` does: invalid UTF-8 is then reported
    against its line instead of failing the whole file). Strict by default: the first bad
    line raises RecordedStreamError. With ``errors`` given, bad lines are skipped and their
    errors appended there. Columns in errors count from the start of the recorded line,
    timestamp included.

    The usual text line (ASCII, ``<ms>\\t<s> <p> <o> .`` with terms the N-Triples fast
    path takes, time not going back) is read in this loop: reading is a third of an
    ``edgewave match`` run, and the loop reads a BSBM stream about 1.5 times as fast as
    ``parse_recorded_line`` does. Consecutive lines usually share their timestamp and subject
    (the triples of one observation arrive together), so the head ``<ms>\\t<s>`` is read
    only when it changes. Every other line, and every line given as bytes, goes through
    ``parse_recorded_line``, which decides and words the error: the two paths give the same
    items and errors (property-tested, bytes against text).

    ``only_time``: for a consumer that needs only the timestamps of the triples of some
    predicates (a per-instance query's window keeps just a timestamp for a triple no
    pattern reads), says of a predicate (canonical) whether that is all it needs of its
    triples whose subject and object differ. Such lines of one timestamp then come as one
    item ``(timestamp_ms, n)``, ``n`` the number of lines (an int where a triple would be),
    after the same checks as every line: terms read without building the triple, and one
    item for the run instead of one per line. The run's item comes when time moves on or
    a line the shortcut does not take arrives, so after the triples of its timestamp read
    meanwhile: the consumer needs only its time, which those triples already hold. A line
    the loop's shortcut does not take (a literal with spaces, CRLF, an escape, bytes) still
    comes as its triple, so the consumer takes both forms. ``_read_times`` is that loop
    (``tests/unit/test_recorded.py`` holds it to the same triples, in the same order, the
    same number of lines timed per timestamp, and the same errors as this one).
    """
    if only_time is not None:
        return _read_times(lines, errors, only_time)
    return _read(lines, errors)


def _first_line(lines: Iterable[str | bytes]) -> tuple[str | bytes, Iterator[str | bytes]] | None:
    """The first line, to tell text from bytes, and all the lines again; None when there is none."""
    rest = iter(lines)
    for first in rest:
        return first, chain((first,), rest)
    return None


def _read(lines: Iterable[str | bytes], errors: list[NTriplesError] | None) -> Iterator[tuple[int, Triple]]:
    """``read_recorded`` without ``only_time``."""
    peeked = _first_line(lines)
    if peeked is None:
        return
    first, lines = peeked
    if isinstance(first, bytes):
        last = -1
        for line_no, line in enumerate(lines, 1):
            item = _checked(line, line_no, last, errors)
            if item is not None:
                last = item[0]
                yield item
        return
    subject, tail, checked = fast_subject, fast_tail, _checked  # locals: looked up once, not per line
    known_subject = subject_cache().get  # looked up here first: a subject is mostly one seen before
    last = -1
    last_head = None
    last_ts = 0
    ts_read = None  # the timestamp's text last_ts was read from (the next head often has the same time)
    last_s = ""
    for line_no, line in enumerate(lines, 1):
        if line.isascii():
            parts = line.split(" ", 3)
            if len(parts) == 4:
                head, p, o, dot = parts
                if head != last_head:
                    ts_text, tab, s = head.partition("\t")
                    # 18 digits always fit in 64 bits; parse_recorded_line refuses what does not
                    if tab and (ts_text == ts_read or ts_text.isdigit() and len(ts_text) <= 18):
                        s = known_subject(s) or subject(s)
                        if s:
                            if ts_text != ts_read:
                                ts_read, last_ts = ts_text, int(ts_text)
                            last_head, last_s = head, s
                if head == last_head and last_ts >= last:
                    po = tail(p, o, dot)
                    if po:
                        last = last_ts
                        yield last, (last_s, po[0], po[1])
                        continue
        item = checked(line, line_no, last, errors)
        if item is not None:
            last = item[0]
            yield item


ONLY_TIME_MEMO = 4096  # predicate tokens whose answer ``_read_times`` remembers (then forgets them all)
TAIL_MEMO = 16384  # line tails ``_read_times`` remembers (then forgets them all)
TAIL_MAX = 512  # a longer tail is read every time, not remembered
_objects_seen = object_cache()


def _read_times(lines: Iterable[str | bytes], errors: list[NTriplesError] | None,
                only_time: Callable[[str], bool]) -> Iterator[tuple[int, Triple | int]]:
    """``_read``'s loop, with the lines ``only_time`` takes read as runs (``read_recorded``).
    Keep in step with ``_read``: the lines its loop takes are the lines this one takes,
    read as the same triples (``tests/unit/test_recorded.py`` holds them to it).

    A line is cut once, at its first space, into its head ``<ms>\\t<s>`` and its tail
    ``<p> <o> .``: a stream repeats its tails (a predicate with the few values it takes),
    so what a tail reads as is remembered (``_tail``), and a line whose head is the line
    before's and whose tail was seen before costs a string comparison, a dictionary lookup
    and no term check. Where the head changes, the time is checked against the last line's
    once for all the lines of the head, and the run of the time before ends there; a line
    only timed then adds one to the run and nothing else (the time of its run counts as
    the last line's once the run ends or the head changes). A text file is read as it is
    (its lines are text); other lines are looked at first for bytes."""
    if not isinstance(lines, io.TextIOBase):
        peeked = _first_line(lines)
        if peeked is None:
            return
        first, lines = peeked
        if isinstance(first, bytes):  # decoded line by line: the strict path, runs not worth it
            yield from _read(lines, errors)
            return
    subject, checked = fast_subject, _checked
    known_subject = subject_cache().get  # looked up here first: a subject is mostly one seen before
    memo: dict[str, bool] = {}  # predicate token -> whether only its time is needed
    # tail as read -> _tail's answer: the object of a line only timed, (predicate, object), or
    # False for a line the shortcut does not take
    tails: dict[str, str | tuple[str, str] | bool] = {}
    tail_of = tails.get
    last = -1  # the time of the last line taken (a run's lines count once the run ends or a head changes)
    last_head = None
    ok = False  # whether the lines of last_head are taken: it reads, and its time is not before last
    last_ts = 0
    ts_read = None  # the timestamp's text last_ts was read from (the next head often has the same time)
    last_s = ""
    run_ts = run_n = 0  # the run of time-only lines not yet yielded, all of the current head's time
    done = 0  # lines read and not in that run: numbered here, not per line
    for line in lines:
        head, _, rest = line.partition(" ")
        if head != last_head:
            if run_n and run_ts > last:
                last = run_ts
            last_head = None  # until this head reads (then compared once a line, not twice)
            ok = False
            # ASCII: the head here, the tail in _tail, both only when not seen before
            ts_text, tab, s = head.partition("\t")
            # 18 digits always fit in 64 bits; parse_recorded_line refuses what does not
            if tab and head.isascii() and (ts_text == ts_read or ts_text.isdigit() and len(ts_text) <= 18):
                s = known_subject(s) or subject(s)
                if s:
                    if ts_text != ts_read:
                        ts_read, last_ts = ts_text, int(ts_text)
                    last_head, last_s = head, s
                    ok = last_ts >= last
                    if run_n and run_ts != last_ts:  # time moves on: the run ends
                        yield run_ts, run_n
                        done += run_n
                        run_n = 0
                    run_ts = last_ts
        if ok:
            known = tail_of(rest)
            if known is None:
                known = _tail(rest, tails, memo, only_time)
            if known.__class__ is str:  # a line only timed
                if known != last_s:
                    run_n += 1
                    continue
                known = fast_predicate(rest.partition(" ")[0]), known  # a self-loop: its triple
            if known:
                last = last_ts
                done += 1
                yield last, (last_s, known[0], known[1])
                continue
        if run_n:
            if run_ts > last:
                last = run_ts
            yield run_ts, run_n
            done += run_n
            run_n = 0
        done += 1
        item = checked(line, done, last, errors)
        if item is not None:
            last = item[0]
            triple = item[1]
            if triple[0] != triple[2] and only_time(triple[1]):
                yield last, 1
            else:
                yield item
    if run_n:
        yield run_ts, run_n


def _tail(rest: str, tails: dict, memo: dict[str, bool],
          only_time: Callable[[str], bool]) -> str | tuple[str, str] | bool:
    """What ``_read_times`` makes of a line's tail ``<p> <o> .`` (after its head and a
    space): the object (canonical) when only the line's time is needed, else ``(predicate,
    object)``, both canonical, or False when the fast path does not take it (the line's
    checks then decide). Only the time is needed when ``only_time`` says so of the
    predicate and the tail is one the fast path reads without rejoining (``.`` right after
    the object); the subject is the caller's to compare with the object.

    The answer is remembered in ``tails`` when the object was seen before: a tail whose
    object is new (a price, a web page of its own) rarely comes again, and would only
    push out the tails that do."""
    if not rest.isascii():
        return False
    parts = rest.split(" ", 2)
    if len(parts) != 3:
        return False
    p, o, dot = parts
    seen = o in _objects_seen  # before the checks below learn it
    quiet = memo.get(p)
    if quiet is None:
        canonical = fast_predicate(p)
        quiet = bool(canonical) and only_time(canonical)
        if len(memo) >= ONLY_TIME_MEMO:
            memo.clear()
        memo[p] = quiet
    known = None
    if quiet and (dot == ".\n" or dot == "."):
        known = fast_object(o)
    if not known:
        known = fast_tail(p, o, dot) or False
    if seen and len(rest) <= TAIL_MAX:
        if len(tails) >= TAIL_MEMO:
            tails.clear()
        tails[rest] = known
    return known


def _checked(line: str | bytes, line_no: int, last: int,
             errors: list[NTriplesError] | None) -> tuple[int, Triple] | None:
    """``parse_recorded_line`` and the order check; a bad line raises or goes to ``errors``."""
    try:
        item = parse_recorded_line(line, line_no)
        if item is None:
            return None
        ts, _, triple = item
        if ts < last:
            raise RecordedStreamError(
                line_no, 1, f"timestamp {ts} is before the previous one ({last}); timestamps must not decrease"
            )
    except RecordedStreamError as exc:
        if errors is None:
            raise
        errors.append(exc)
        return None
    return ts, triple


def parse_recorded_line(line: str | bytes, line_no: int = 0) -> tuple[int, str, Triple] | None:
    """``(timestamp_ms, statement as written, triple)`` of one recorded-stream line, None for a
    blank or comment line; a bad line raises RecordedStreamError. Whether time goes back is
    the reader's to check (``read_recorded``; the simulator's replay keeps the statement text).

    ``line`` may end in ``\\n`` or ``\\r\\n`` (left out of the statement returned). A text
    line holding lone surrogates (undecodable bytes read with ``errors="surrogateescape"``)
    is reported as the invalid UTF-8 it came from.
    """
    if isinstance(line, bytes):
        line = _decode(line, line_no)
    elif not line.isascii() and _SURROGATE_RE.search(line):
        try:
            raw = line.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise RecordedStreamError(line_no, exc.start + 1, "a lone surrogate, not a character") from None
        line = _decode(raw, line_no)
    ts_text, tab, statement = line.partition("\t")
    if not tab:
        content = line.strip(" \t\r\n")
        if not content or content[0] == "#":
            return None
        if _is_timestamp(content):
            raise RecordedStreamError(line_no, len(content) + 1, "expected a tab and a statement after the timestamp")
        raise RecordedStreamError(line_no, 1, "expected '<milliseconds><TAB><N-Triples statement>'")
    if not _is_timestamp(ts_text):
        if ts_text.lstrip(" ")[:1] == "#":
            return None
        raise RecordedStreamError(line_no, 1, f"bad timestamp {ts_text[:30]!r}: expected milliseconds as ASCII digits")
    # the length test first: int() of thousands of digits is slow, then refused
    ts = int(ts_text) if len(ts_text) <= 19 else MAX_TIMESTAMP + 1
    if ts > MAX_TIMESTAMP:
        raise RecordedStreamError(
            line_no, 1, f"timestamp {ts_text[:30]}{'...' if len(ts_text) > 30 else ''} is beyond "
            f"a signed 64-bit integer ({MAX_TIMESTAMP} ms)"
        )
    try:
        triple = parse_line(statement, line_no)
    except NTriplesError as exc:
        raise RecordedStreamError(line_no, exc.column + len(ts_text) + 1, exc.reason) from None
    if triple is None:
        raise RecordedStreamError(line_no, len(ts_text) + 2, "no statement after the timestamp")
    if statement.endswith("\n"):
        statement = statement[:-2] if statement.endswith("\r\n") else statement[:-1]
    return ts, statement, triple


def _is_timestamp(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _decode(raw: bytes, line_no: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", "replace")) + 1
        raise RecordedStreamError(line_no, column, f"invalid UTF-8 ({exc.reason})") from None


def format_recorded_line(ts: int, triple: Triple) -> str:
    """One recorded-stream line, ``<ms>\\t<statement>``, without the newline."""
    return f"{ts}\t{serialize(triple)}"


def write_recorded(fh: IO[str], items: Iterable[tuple[int, Triple]]) -> int:
    """Write ``(timestamp_ms, triple)`` items as recorded-stream lines; return how many.

    Raises ValueError, before writing the offending line, on a negative or decreasing
    timestamp: such a file could not be read back.
    """
    last = 0  # so that a negative first timestamp is refused too
    count = 0
    for ts, triple in items:
        if not isinstance(ts, int) or ts < last:
            raise ValueError(
                f"bad timestamp {ts!r} (previous {last}): recorded timestamps are non-negative, "
                "non-decreasing integers"
            )
        fh.write(f"{ts}\t{serialize(triple)}\n")
        last = ts
        count += 1
    return count


@contextmanager
def open_recorded(
    path: str | os.PathLike[str], errors: list[NTriplesError] | None = None
) -> Iterator[Iterator[tuple[int, Triple]]]:
    """Open a recorded stream file (``-`` for standard input) and read it lazily::

        with open_recorded("stream.tsv") as stream:
            for ts, triple in stream:
                ...

    The file is read as UTF-8 whatever the locale (as text, undecodable bytes kept as lone
    surrogates so that they are reported against their line, and ``read_recorded`` takes
    its fast loop); standard input is read as bytes and not closed.
    """
    if os.fspath(path) == "-":
        source = getattr(sys.stdin, "buffer", sys.stdin)
        yield read_recorded(_without_bom(source), errors)
        return
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as fh:
        yield read_recorded(text_chunks(fh), errors)


def text_chunks(fh: io.TextIOWrapper) -> io.TextIOWrapper:
    """A text file read ``READ_CHUNK`` bytes at a time, its lines as before: the
    ``utf-8-sig`` decoder (which drops a byte-order mark) is Python code, called once a
    chunk, and at TextIOWrapper's default of 8 KiB (about 48 BSBM lines) its calls cost
    about a sixth of iterating the lines."""
    fh._CHUNK_SIZE = READ_CHUNK  # TextIOWrapper's own setting (the C and the pure-Python io)
    return fh


def _without_bom(lines: IO[bytes] | IO[str]) -> Iterator[bytes | str]:
    """A file's lines less the byte-order mark at its start, as editors on Windows write one
    (anywhere else a BOM stays an error of its line). Lazy: nothing is read before the
    first line is asked for."""
    lines = iter(lines)
    for first in lines:
        mark = codecs.BOM_UTF8 if isinstance(first, bytes) else "\ufeff"
        yield first[len(mark):] if first.startswith(mark) else first
        break
    yield from lines
