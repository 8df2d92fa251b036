"""Recordings: message headers keep topics and boundaries; plain recorded streams replay too."""
from __future__ import annotations

from pathlib import Path

from edgewave.firmware_sim.cli import main
from edgewave.firmware_sim.recording import read_messages

S = "<http://example.org/s>"
P = "<http://example.org/p>"


def test_a_file_without_headers_replays_grouped_by_timestamp(tmp_path: Path, capsys, caplog) -> None:
    plain = tmp_path / "plain.tsv"
    plain.write_text(
        f'1000\t{S} {P} "1" .\n'
        f'1000\t{S} {P} "2" .\n'
        "# a comment\n"
        f'1500\t{S} {P} "3" .\n'
        f"1600\tthis is not N-Triples\n"
        f'1700\t{S} {P} "4" .\n'
    )
    errors: list[str] = []
    messages = list(read_messages(plain, default_topic="ew/in/lab/node1", errors=errors))
    assert [(m.ms, m.topic, len(m.lines)) for m in messages] == [
        (1000, "ew/in/lab/node1", 2), (1500, "ew/in/lab/node1", 1), (1700, "ew/in/lab/node1", 1)]
    assert len(errors) == 1 and "plain.tsv:5" in errors[0]

    # Replay to stdout: the bad line is skipped and counted, the rest goes out with headers.
    caplog.set_level("INFO")
    assert main(["replay", str(plain), "--speed", "max", "--topic", "ew/in/lab/node1"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("# ew:message topic=ew/in/lab/node1 gateway= lines=") == 3
    assert '1700\t<http://example.org/s> <http://example.org/p> "4" .' in captured.out
    assert "skipped_lines=1" in caplog.text


def test_recording_round_trips_topics_boundaries_and_bytes(tmp_path: Path) -> None:
    out = tmp_path / "run.tsv"
    assert main(["--log-level", "WARNING", "record", "--duration", "30", "--out", str(out)]) == 0
    messages = list(read_messages(out))
    assert messages and all(m.topic.startswith("ew/in/") for m in messages)
    assert all(m.topic.split("/")[3].startswith(m.gateway + "-") for m in messages)
    rebuilt = "".join(
        f"# ew:message topic={m.topic} gateway={m.gateway} lines={len(m.lines)}\n"
        + "".join(f"{m.ms}\t{line}\n" for line in m.lines)
        for m in messages
    )
    assert rebuilt == out.read_text()


def test_time_going_back_is_skipped_not_replayed(tmp_path: Path) -> None:
    path = tmp_path / "back.tsv"
    path.write_text(f'2000\t{S} {P} "1" .\n1000\t{S} {P} "2" .\n3000\t{S} {P} "3" .\n')
    errors: list[str] = []
    assert [m.ms for m in read_messages(path, errors=errors)] == [2000, 3000]
    assert "before 2000" in errors[0]


def test_a_byte_order_mark_at_the_start_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "bom.tsv"
    path.write_bytes(("\ufeff" f'1000\t{S} {P} "1" .\n1500\t{S} {P} "2" .\n').encode("utf-8"))
    errors: list[str] = []
    messages = list(read_messages(path, default_topic="ew/in/lab/node1", errors=errors))
    assert errors == []
    assert [(m.ms, list(m.lines)) for m in messages] == [(1000, [f'{S} {P} "1" .']), (1500, [f'{S} {P} "2" .'])]


def test_replay_of_a_missing_file_is_a_clear_error(tmp_path: Path, caplog) -> None:
    assert main(["replay", str(tmp_path / "nope.tsv")]) == 2
    assert "no_such_file" in caplog.text
