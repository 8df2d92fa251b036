"""Recorded streams (``<ms>\\t<statement>`` per line): round trips, errors, stdin."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.shared.ntriples import NTriplesError, make_iri, make_literal, make_quoted
from edgewave.shared.recorded import (
    READ_CHUNK,
    RecordedStreamError,
    format_recorded_line,
    open_recorded,
    parse_recorded_line,
    read_recorded,
    text_chunks,
    write_recorded,
)

EX = "http://example.org/"
S, P = make_iri(EX + "sensor1"), make_iri(EX + "temperature")
XSD_DECIMAL = "http://www.w3.org/2001/XMLSchema#decimal"


def reading(value: str) -> tuple[str, str, str]:
    return (S, P, make_literal(value, datatype=XSD_DECIMAL))


ITEMS = [
    (1_700_000_000_000, reading("21.5")),
    (1_700_000_000_000, (S, make_iri(EX + "label"), make_literal("line\nbreak, tab\t, U+2028 \u2028 and \"quotes\"", lang="en"))),
    (1_700_000_000_250, (make_quoted(reading("21.5")), make_iri(EX + "confidence"), make_literal("0.9"))),
    (1_700_000_001_000, ("_:b0", P, make_iri(EX + "caf\u00e9 \u65e5"))),
]


def test_format_recorded_line() -> None:
    assert format_recorded_line(12, reading("1.5")) == (
        f'12\t<{EX}sensor1> <{EX}temperature> "1.5"^^<{XSD_DECIMAL}> .'
    )


def test_write_then_open_gives_the_same_items(tmp_path: Path) -> None:
    path = tmp_path / "stream.tsv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        assert write_recorded(fh, ITEMS) == len(ITEMS)
    assert path.read_text(encoding="utf-8").count("\n") == len(ITEMS)
    with open_recorded(path) as stream:
        assert list(stream) == ITEMS
    with open_recorded(str(path)) as stream:  # a str path too
        assert list(stream) == ITEMS


@settings(deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.text(max_size=15),
            st.sampled_from([None, "en", "de-CH"]),
        ),
        max_size=20,
    )
)
def test_any_stream_round_trips(rows) -> None:
    ts, items = 0, []
    for step, value, lang in rows:
        ts += step
        items.append((ts, (S, P, make_literal(value, lang=lang))))
    buffer = io.StringIO()
    write_recorded(buffer, items)
    assert list(read_recorded(io.StringIO(buffer.getvalue()))) == items
    # and from bytes, as files opened in binary mode give them
    raw = buffer.getvalue().encode("utf-8")
    assert list(read_recorded(io.BytesIO(raw))) == items


def test_blank_and_comment_lines_are_skipped() -> None:
    lines = ["# recorded 2024-01-01\n", "\n", "   \n", f"5\t{S} {P} <{EX}o> .\n", "# end\twith a tab\n"]
    assert list(read_recorded(lines)) == [(5, (S, P, f"<{EX}o>"))]


def test_crlf_lines_are_read() -> None:
    assert list(read_recorded([f"5\t{S} {P} <{EX}o> .\r\n"])) == [(5, (S, P, f"<{EX}o>"))]


BAD_LINES = [
    # (line, expected column, phrase in the reason)
    (f"12a\t{S} {P} <{EX}o> .\n", 1, "bad timestamp '12a'"),
    (f"-5\t{S} {P} <{EX}o> .\n", 1, "bad timestamp '-5'"),
    (f" 5\t{S} {P} <{EX}o> .\n", 1, "bad timestamp ' 5'"),
    (f"\u0665\t{S} {P} <{EX}o> .\n", 1, "bad timestamp"),  # an Arabic-Indic digit is not ASCII
    (f"{S} {P} <{EX}o> .\n", 1, "expected '<milliseconds><TAB><N-Triples statement>'"),
    ("1700000000000\n", 14, "expected a tab and a statement after the timestamp"),
    ("17\t# only a comment\n", 4, "no statement after the timestamp"),
    (f"17\t{S} {P} <{EX}o>\n", len(f"17\t{S} {P} <{EX}o>") + 1, "expected '.' to end the statement"),
    (f'17\t{S} {P} "a\\qb" .\n', len(f'17\t{S} {P} "a') + 1, "bad escape '\\q'"),
]


@pytest.mark.parametrize("line,column,phrase", BAD_LINES)
def test_bad_line_is_an_error_naming_line_and_column(line: str, column: int, phrase: str) -> None:
    good = f"1\t{S} {P} <{EX}o> .\n"
    with pytest.raises(RecordedStreamError) as caught:
        list(read_recorded([good, line]))
    error = caught.value
    assert (error.line, error.column) == (2, column), error
    assert phrase in error.reason
    assert str(error).startswith(f"line 2, column {column}: ")
    assert isinstance(error, NTriplesError)


def test_bad_lines_are_skipped_and_counted_with_an_error_list() -> None:
    lines = [f"{ts}\t{S} {P} <{EX}o{ts}> .\n" for ts in (10, 20, 30)]
    lines.insert(1, "x\tnot a statement\n")
    lines.insert(3, f"25\t{S} {P} <{EX}broken .\n")
    errors: list[NTriplesError] = []
    items = list(read_recorded(lines, errors))
    assert [ts for ts, _ in items] == [10, 20, 30]
    assert [(e.line, e.column) for e in errors] == [(2, 1), (4, len(f"25\t{S} {P} <{EX}broken") + 1)]
    assert "expected '>' to close IRI" in errors[1].reason


def test_time_going_back_is_an_error_strictly_and_skipped_with_an_error_list() -> None:
    lines = [f"{ts}\t{S} {P} <{EX}o{i}> .\n" for i, ts in enumerate((100, 200, 150, 200, 300))]
    with pytest.raises(RecordedStreamError) as caught:
        list(read_recorded(lines))
    assert caught.value.line == 3
    assert "timestamp 150 is before the previous one (200)" in caught.value.reason

    errors: list[NTriplesError] = []
    items = list(read_recorded(lines, errors))
    assert [ts for ts, _ in items] == [100, 200, 200, 300]  # equal timestamps are fine
    assert [e.line for e in errors] == [3]


def test_invalid_utf8_is_reported_against_its_line(tmp_path: Path) -> None:
    path = tmp_path / "stream.tsv"
    path.write_bytes(
        f"1\t{S} {P} \"ok\" .\n".encode()
        + f"2\t{S} {P} \"".encode() + b"caf\xe9" + b'" .\n'
        + f"3\t{S} {P} \"ok too\" .\n".encode()
    )
    errors: list[NTriplesError] = []
    with open_recorded(path, errors) as stream:
        assert [ts for ts, _ in stream] == [1, 3]
    column = len(f'2\t{S} {P} "caf') + 1
    assert [(e.line, e.column) for e in errors] == [(2, column)]
    assert "invalid UTF-8" in errors[0].reason
    with open_recorded(path) as stream, pytest.raises(RecordedStreamError, match=f"line 2, column {column}: invalid UTF-8"):
        list(stream)


def test_a_file_read_in_large_chunks_gives_what_the_default_chunks_give(tmp_path: Path) -> None:
    """open_recorded reads READ_CHUNK bytes at a time (text_chunks): lines, characters of
    several bytes and an invalid byte falling across two chunks read as with TextIOWrapper's
    default chunk size, errors included."""
    word = "caf\u00e9 \u65e5"  # two and three bytes in UTF-8
    # lengths vary, so that chunk ends fall anywhere in a line
    lines = [format_recorded_line(i, (S, P, make_literal(word * (i % 13) + str(i)))) + "\n"
             for i in range(4 * READ_CHUNK // 60)]
    raw = "".join(lines).encode()
    at = raw.index(b"\n", READ_CHUNK - 20) + 1  # a line with an invalid byte across the first chunk's end
    raw = raw[:at] + f'{len(lines)}\t{S} {P} "'.encode() + b"x" * (READ_CHUNK - at) + b'\xe9" .\n' + raw[at:]
    path = tmp_path / "stream.tsv"
    path.write_bytes(raw)
    expected_errors: list[NTriplesError] = []
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as fh:
        expected = list(read_recorded(fh, expected_errors))
    errors: list[NTriplesError] = []
    with open_recorded(path, errors) as stream:
        assert list(stream) == expected
    assert len(expected) == len(lines) and len(errors) == 1 and "invalid UTF-8" in errors[0].reason
    assert [(e.line, e.column, e.reason) for e in errors] == [(e.line, e.column, e.reason) for e in expected_errors]
    with open(path, encoding="utf-8") as fh:
        assert text_chunks(fh)._CHUNK_SIZE == READ_CHUNK


def test_a_byte_order_mark_is_dropped_at_the_start_only(tmp_path: Path) -> None:
    """Editors on Windows start UTF-8 files with a BOM; anywhere else it is an error of its line."""
    lines = [f"{format_recorded_line(ts, t)}\n" for ts, t in ITEMS]
    path = tmp_path / "stream.tsv"
    path.write_bytes(("\ufeff" + "".join(lines)).encode("utf-8"))
    with open_recorded(path) as stream:
        assert list(stream) == ITEMS
    path.write_bytes((lines[0] + "\ufeff" + "".join(lines[1:])).encode("utf-8"))
    errors: list[NTriplesError] = []
    with open_recorded(path, errors) as stream:
        assert list(stream) == [ITEMS[0], *ITEMS[2:]]
    assert [(e.line, e.column) for e in errors] == [(2, 1)]


def test_write_refuses_a_stream_that_could_not_be_read_back() -> None:
    buffer = io.StringIO()
    with pytest.raises(ValueError, match="non-decreasing"):
        write_recorded(buffer, [(5, reading("1")), (4, reading("2"))])
    assert buffer.getvalue().count("\n") == 1  # the good line before it was written
    with pytest.raises(ValueError):
        write_recorded(io.StringIO(), [(-1, reading("1"))])


def test_open_recorded_dash_reads_standard_input(tmp_path: Path) -> None:
    stream_text = "".join(f"{format_recorded_line(ts, t)}\n" for ts, t in ITEMS) + "oops\n"
    program = (
        "import json, sys\n"
        "from edgewave.shared.recorded import open_recorded\n"
        "errors = []\n"
        "with open_recorded('-', errors) as stream:\n"
        "    items = [[ts, list(t)] for ts, t in stream]\n"
        "print(json.dumps({'items': items, 'errors': [str(e) for e in errors], 'stdin_open': not sys.stdin.closed}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        input=stream_text.encode("utf-8"),
        capture_output=True,
        timeout=60,
        env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "PATH": "/usr/bin:/bin"},  # stdin read as UTF-8 anyway
        check=True,
    )
    result = json.loads(done.stdout)
    assert [(ts, tuple(t)) for ts, t in result["items"]] == ITEMS
    assert result["errors"] == ["line 5, column 1: expected '<milliseconds><TAB><N-Triples statement>'"]
    assert result["stdin_open"] is True


def test_the_fast_loop_reads_the_usual_line_and_the_checks_the_rest() -> None:
    lines = [
        '5\t<http://ex.org/o1> <http://ex.org/p> "a b c"^^<http://ex.org/T> .\n',
        "5\t<http://ex.org/o1> <http://ex.org/q> <http://ex.org/x> .\r\n",  # same head
        "7\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .",  # a new head
        "x7\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # not a timestamp
        "7 <http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # no tab
        "7\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x>\n",  # no dot
        "7\t<o2> <http://ex.org/q> <http://ex.org/x> .\n",  # relative IRI
        "6\t<http://ex.org/o3> <http://ex.org/q> <http://ex.org/x> .\n",  # time goes back
        "6\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # time goes back, head seen before
        "8\t<http://ex.org/\u00e9> <http://ex.org/q> <http://ex.org/x> .\n",  # not ASCII
        '9\t<http://ex.org/o2> <http://ex.org/q> "\\u00e9" .\n',  # an escape: decoded
        "9\t<http://ex.org/o2> <http://ex.org/q> \"\udcff\" .\n",  # an undecodable byte, as surrogateescape keeps it
        "\n",
    ]
    errors: list[NTriplesError] = []
    assert list(read_recorded(lines, errors)) == [
        (5, ("<http://ex.org/o1>", "<http://ex.org/p>", '"a b c"^^<http://ex.org/T>')),
        (5, ("<http://ex.org/o1>", "<http://ex.org/q>", "<http://ex.org/x>")),
        (7, ("<http://ex.org/o2>", "<http://ex.org/q>", "<http://ex.org/x>")),
        (8, ("<http://ex.org/\u00e9>", "<http://ex.org/q>", "<http://ex.org/x>")),
        (9, ("<http://ex.org/o2>", "<http://ex.org/q>", '"\u00e9"')),
    ]
    assert [e.line for e in errors] == [4, 5, 6, 7, 8, 9, 12]
    assert all(isinstance(e, RecordedStreamError) for e in errors)
    assert "before the previous one (7)" in errors[5].reason
    assert (errors[6].column, errors[6].reason) == (len("9\t<http://ex.org/o2> <http://ex.org/q> \"") + 1,
                                                    "invalid UTF-8 (invalid start byte)")
    # the same lines as bytes take the line-by-line checks only, with the same outcome
    as_bytes: list[NTriplesError] = []
    assert list(read_recorded([line.encode("utf-8", "surrogateescape") for line in lines], as_bytes)) == \
        list(read_recorded(lines, []))
    assert [(e.line, e.column, e.reason) for e in as_bytes] == [(e.line, e.column, e.reason) for e in errors]


def test_parse_recorded_line_keeps_the_statement_as_written() -> None:
    line = '12\t<http://ex.org/s>  <http://ex.org/p> "\\u0041" .\r\n'
    assert parse_recorded_line(line, 3) == (12, '<http://ex.org/s>  <http://ex.org/p> "\\u0041" .',
                                            ("<http://ex.org/s>", "<http://ex.org/p>", '"A"'))
    assert parse_recorded_line("# ew:message topic=t gateway=g lines=1\n") is None
    assert parse_recorded_line("   \n") is None
    with pytest.raises(RecordedStreamError, match="line 3, column 1: bad timestamp"):
        parse_recorded_line("-1\t<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .", 3)
    with pytest.raises(RecordedStreamError, match="lone surrogate"):
        parse_recorded_line("1\t<http://ex.org/s> <http://ex.org/p> \"\ud800\" .", 3)


def _timed(items: list, only_time) -> list:
    """Per timestamp, in order: the triples read, in order, and how many lines only timed
    (a run of them may come after triples of its timestamp read after its first line)."""
    out: list = []
    for ts, triple in items:
        if not out or out[-1][0] != ts:
            out.append((ts, [], [0]))
        if isinstance(triple, int):
            out[-1][2][0] += triple
        elif triple[0] != triple[2] and only_time(triple[1]):
            out[-1][2][0] += 1
        else:
            out[-1][1].append(triple)
    return out


ONLY_Q = "<http://ex.org/q>".__eq__  # only the time of a :q triple is needed


def test_only_time_reads_runs_of_the_lines_it_names_with_the_same_checks() -> None:
    lines = [
        "5\t<http://ex.org/o1> <http://ex.org/p> <http://ex.org/x> .\n",
        "5\t<http://ex.org/o1> <http://ex.org/q> <http://ex.org/x> .\n",
        "5\t<http://ex.org/o1> <http://ex.org/q> \"a\"@en .\n",
        "5\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # a new subject, the same time
        "6\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # a new time: a new run
        "6\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/o2> .\n",  # a self-loop: the triple itself
        "6\t<http://ex.org/o2> <http://ex.org/q> \"a b\" .\n",  # spaces in the literal: read as a triple
        "6\t<http://ex.org/o2> <http://ex.org/q> <x> .\n",  # a relative IRI: an error, the run ends before it
        "4\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",  # time goes back
        "7\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\r\n",  # CRLF: read as a triple
        "# a comment\n",
        "7\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x>\n",  # no dot
        "7\t<http://ex.org/o2> <http://ex.org/\\u0071> <http://ex.org/x> .\n",  # an escaped :q
        "8\t<http://ex.org/o2> <http://ex.org/q> <http://ex.org/x> .\n",
    ]
    errors: list[NTriplesError] = []
    items = list(read_recorded(lines, errors, ONLY_Q))
    assert items == [
        (5, ("<http://ex.org/o1>", "<http://ex.org/p>", "<http://ex.org/x>")),
        (5, 3),
        (6, ("<http://ex.org/o2>", "<http://ex.org/q>", "<http://ex.org/o2>")),  # before the run of its time
        (6, ("<http://ex.org/o2>", "<http://ex.org/q>", '"a b"')),
        (6, 1),  # ended by the bad line
        (7, ("<http://ex.org/o2>", "<http://ex.org/q>", "<http://ex.org/x>")),
        (7, 1),
        (8, 1),
    ]
    plain: list[NTriplesError] = []
    assert _timed(items, ONLY_Q) == _timed(list(read_recorded(lines, plain)), ONLY_Q)
    assert [(e.line, e.column, e.reason) for e in errors] == [(e.line, e.column, e.reason) for e in plain]
    assert [e.line for e in errors] == [8, 9, 12]
    with pytest.raises(RecordedStreamError):
        list(read_recorded(lines, None, ONLY_Q))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["<http://ex.org/s>", "<http://ex.org/x>", "<s>"]),
                          st.sampled_from(["<http://ex.org/p>", "<http://ex.org/q>", "<q>", "_:q"]),
                          st.sampled_from(["<http://ex.org/x>", "<http://ex.org/s>", '"v"', '"a b"', "<x>"]),
                          st.sampled_from([" .\n", " .", " .\r\n", "\n", " . \n"])), max_size=30))
def test_only_time_gives_what_the_plain_reader_gives(rows) -> None:
    """Runs and all: the same items, line for line, and the same errors."""
    lines = [f"{ts}\t{s} {p} {o}{end}" for ts, s, p, o, end in rows]
    errors: list[NTriplesError] = []
    plain: list[NTriplesError] = []
    assert _timed(list(read_recorded(lines, errors, ONLY_Q)), ONLY_Q) == \
        _timed(list(read_recorded(lines, plain)), ONLY_Q)
    assert [(e.line, e.column, e.reason) for e in errors] == [(e.line, e.column, e.reason) for e in plain]


def test_only_time_remembers_tails_and_forgets_them_with_the_same_items(monkeypatch) -> None:
    """A tail read before (its object seen before) is taken from memory, with the subject
    still compared with the object; a full memory is emptied and read again."""
    import edgewave.shared.recorded as recorded
    monkeypatch.setattr(recorded, "TAIL_MEMO", 2)
    tails = ["<http://ex.org/q> <http://ex.org/x> .", "<http://ex.org/p> <http://ex.org/x> .",
             "<http://ex.org/q> \"v\" .", "<http://ex.org/q> <http://ex.org/s> .", "<http://ex.org/q> <x> .",
             "<http://ex.org/q> \"a b\" ."]
    lines = [f"{ts}\t<http://ex.org/{s}> {tail}\n" for ts in range(3) for s in ("s", "x") for tail in tails * 2]
    errors: list[NTriplesError] = []
    plain: list[NTriplesError] = []
    items = list(read_recorded(lines, errors, ONLY_Q))
    assert _timed(items, ONLY_Q) == _timed(list(read_recorded(lines, plain)), ONLY_Q)
    assert [(e.line, e.column, e.reason) for e in errors] == [(e.line, e.column, e.reason) for e in plain]
    assert len(errors) == 12 and (0, ("<http://ex.org/x>", "<http://ex.org/q>", "<http://ex.org/x>")) in items


def test_only_time_reads_a_text_file_as_its_lines() -> None:
    lines = [f"{ts}\t<http://ex.org/{s}> <http://ex.org/{p}> {o} .\n" for ts in range(3) for s in ("s", "x")
             for p in ("p", "q") for o in ("<http://ex.org/x>", '"v"', "<x>")]
    lines.append("3\t<http://ex.org/s> <http://ex.org/q> \"v\" .")  # the last line without its newline
    from_file: list[NTriplesError] = []
    from_list: list[NTriplesError] = []
    assert list(read_recorded(io.StringIO("".join(lines)), from_file, ONLY_Q)) == \
        list(read_recorded(lines, from_list, ONLY_Q))
    assert [(e.line, e.column, e.reason) for e in from_file] == [(e.line, e.column, e.reason) for e in from_list]
    assert len(from_file) == 12
    assert list(read_recorded(io.StringIO(""), [], ONLY_Q)) == []


def test_only_time_reads_a_line_not_in_ascii_as_the_plain_reader_does() -> None:
    """ASCII is checked of a head and a tail when first seen: a line with a known head and
    a new tail not in ASCII, or a new head not in ASCII, still goes to the line's checks."""
    lines = ["5\t<http://ex.org/s> <http://ex.org/q> <http://ex.org/x> .\n",
             "5\t<http://ex.org/s> <http://ex.org/q> <http://ex.org/\u00e9> .\n",
             "5\t<http://ex.org/s> <http://ex.org/q> \"\udcff\" .\n",
             "5\t<http://ex.org/s> <http://ex.org/p> \"\u00e9\" .\n",
             "\u0666\t<http://ex.org/s> <http://ex.org/q> <http://ex.org/x> .\n",  # an Arabic-Indic digit
             "6\t<http://ex.org/\u00e9> <http://ex.org/q> <http://ex.org/x> .\n",
             "6\t<http://ex.org/\u00e9> <http://ex.org/q> <http://ex.org/x> .\n"]
    errors: list[NTriplesError] = []
    plain: list[NTriplesError] = []
    items = list(read_recorded(lines, errors, ONLY_Q))
    assert _timed(items, ONLY_Q) == _timed(list(read_recorded(lines, plain)), ONLY_Q)
    assert [(e.line, e.column, e.reason) for e in errors] == [(e.line, e.column, e.reason) for e in plain]
    assert [e.line for e in errors] == [3, 5]
    assert (5, ("<http://ex.org/s>", "<http://ex.org/p>", '"\u00e9"')) in items
