"""The Parquet history reader: finished batches only, and files whose statistics rule them out are not read."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from edgewave.cloud.dashboard.history import History, local_history

HOUR = 3_600_000


def write_batch(events_dir: Path, batch_id: int, ends: list[int], done: bool = True, *,
                without: tuple[str, ...] = (), **columns: list) -> None:
    """A batch folder as the Spark job leaves it (the columns the dashboard reads, one part file); ``columns``
    gives a column's values row by row, ``without`` leaves columns out (a file written before they existed)."""
    folder = events_dir / f"batch_id={batch_id}"
    folder.mkdir(parents=True)
    rows = [{"id": f"urn:edgewave:event:{batch_id:04d}{k:04d}", "gateway": "gw1", "kind": "match", "pattern": "fire",
             "windowStart": end - 1000, "windowEnd": end, "emittedAt": end + 1, "ingestTime": end + 5,
             "sensor": None, "property": None, "result": None,
             "bindings": [{"variable": "room", "value": f"<r{k}>"}], "triples": [f"<s{k}> <p> <o> ."],
             "entailed": None, "expected": None, "derivedFrom": None} for k, end in enumerate(ends)]
    for name, values in columns.items():
        for row, value in zip(rows, values):
            row[name] = value
    rows = [{name: value for name, value in row.items() if name not in without} for row in rows]
    schema = pa.Table.from_pylist(rows).schema
    for name in ("expected", "derivedFrom"):   # as Spark types them, whatever the values
        if name in schema.names:
            schema = schema.set(schema.get_field_index(name), pa.field(name, pa.list_(pa.string())))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "part-00000-x-c000.snappy.parquet")
    if done:
        (folder / "_SUCCESS").write_bytes(b"")


def counting(history: History) -> list[str]:
    opened: list[str] = []
    read = history._read

    def spy(stats, columns, condition):
        opened.append(Path(stats.path).parent.name)
        return read(stats, columns, condition)

    history._read = spy
    return opened


def test_a_range_reads_only_the_batches_that_can_hold_it(tmp_path):
    for b in range(20):                                  # batch b holds matches of hour b
        write_batch(tmp_path / "events", b, [b * HOUR + m * 60_000 for m in range(10)])
    write_batch(tmp_path / "events", 20, [5 * HOUR + 1], done=False)   # being written: not read
    history = History(str(tmp_path))
    opened = counting(history)
    found = history.events(5 * HOUR, 7 * HOUR, limit=100)
    assert sorted(set(opened)) == ["batch_id=5", "batch_id=6"]
    assert [e["window_end"] for e in found] == sorted([h * HOUR + m * 60_000 for h in (5, 6) for m in range(10)],
                                                      reverse=True)
    assert "triples" not in found[0] and found[0]["bindings"] == [{"variable": "room", "value": "<r9>"}]


def test_the_newest_few_stop_at_the_newest_files(tmp_path):
    for b in range(20):
        write_batch(tmp_path / "events", b, [b * HOUR + m * 60_000 for m in range(10)])
    history = History(str(tmp_path))
    opened = counting(history)
    found = history.events(0, 20 * HOUR, limit=15)
    assert opened == ["batch_id=19", "batch_id=18"]
    assert len(found) == 15 and found[0]["window_end"] == 19 * HOUR + 9 * 60_000


def test_one_event_with_its_time_opens_one_file(tmp_path):
    for b in range(20):
        write_batch(tmp_path / "events", b, [b * HOUR + m * 60_000 for m in range(10)])
    history = History(str(tmp_path))
    opened = counting(history)
    event = history.event("urn:edgewave:event:00120003", at_ms=12 * HOUR + 3 * 60_000)
    assert opened == ["batch_id=12"] and event["triples"] == ["<s3> <p> <o> ."] and event["ingest_ms"] is not None
    assert history.event("urn:edgewave:event:99999999") is None


def test_files_from_before_a_column_are_read_with_it_as_none(tmp_path):
    """History written before ``entailed``, ``expected`` and ``derivedFrom`` existed, beside a newer batch."""
    write_batch(tmp_path / "events", 0, [HOUR], without=("entailed", "expected", "derivedFrom"))
    expected = ["<http://example.org/gw1/sensor7> <http://example.org/beat> ?n ."]
    built_from = ["urn:edgewave:event:" + "a" * 32]
    write_batch(tmp_path / "events", 1, [2 * HOUR, 2 * HOUR + 1], expected=[expected, None],
                derivedFrom=[None, built_from])
    history = History(str(tmp_path))
    old = history.event("urn:edgewave:event:00000000")
    assert old["triples"] == ["<s0> <p> <o> ."]
    assert (old["entailed"], old["expected"], old["derived_from"]) == (None, None, None)
    absence, chained = history.event("urn:edgewave:event:00010000"), history.event("urn:edgewave:event:00010001")
    assert (absence["expected"], absence["derived_from"]) == (expected, None)
    assert (chained["expected"], chained["derived_from"]) == (None, built_from)
    listed = history.events(0, 3 * HOUR)
    assert [(e["expected"], e["derived_from"]) for e in listed] == [(None, built_from), (expected, None),
                                                                   (None, None)]


def test_a_history_elsewhere_is_not_read(tmp_path):
    assert local_history("s3a://bucket/history") is None and local_history("hdfs://nn/h") is None
    assert local_history(f"file://{tmp_path}") == tmp_path
    assert local_history("var/cloud/history") == Path("var/cloud/history")
    assert History(str(tmp_path / "never-written")).events(0, HOUR) == []
    assert not (tmp_path / "never-written").exists()
