"""The Spark job against a landing zone with bad lines and bad files: every valid event is counted,
every bad line is stored with its reason, and no bad line or file stops the job."""
from __future__ import annotations

import json
import random
import time
from collections import Counter

import pytest

from cloud_harness import CloudProcess, landing_record, match_counts, query, total_events, write_config
from cloud_workload import Workload, make_workload
from edgewave.cloud.aggregates import RECORD_LIMIT_BYTES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NOT_FIT = "{field} must be {what}, got {got}"


def line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def test_bad_lines_are_rejected_with_their_reason_and_bad_files_do_not_stop_the_job(tmp_path):
    events = make_workload(unique=300, duplicates=0, out_of_order=0, gateways=3, seed=21).unique
    ingest_ms = int(time.time() * 1000)
    rec = [landing_record(e, ingest_ms + i) for i, e in enumerate(events)]
    partition = tmp_path / "landing" / "events" / "date=2026-01-01"
    partition.mkdir(parents=True)
    expected: list[tuple[str, str]] = []  # (file, reason) of every line the job must reject

    def write(name: str, data: bytes) -> None:
        (partition / name).write_bytes(data)

    # 1. Valid events, a blank line (not a record) and a last line cut short, as a crash leaves it.
    truncated = line(rec[100])[:70]
    write("part-1-valid-and-torn.jsonl",
          ("\n".join(line(r) for r in rec[:50]) + "\n\n" + "\n".join(line(r) for r in rec[50:100]) + "\n"
           + truncated).encode())
    expected.append(("part-1-valid-and-torn.jsonl", "not JSON"))

    # 2. Records of the wrong shape between valid ones.
    def bad(i: int, **changes: object) -> dict:
        return {**rec[i], **changes}

    wrong_shape = [
        (bad(101, windowEnd=str(rec[101]["windowEnd"])),
         NOT_FIT.format(field="windowEnd", what="a long (ms)", got=f'"{rec[101]["windowEnd"]}"')),
        (bad(102, windowEnd=True), NOT_FIT.format(field="windowEnd", what="a long (ms)", got="true")),
        (bad(103, bindings="room=<r1>"),
         NOT_FIT.format(field="bindings", what="an array of {variable, value} objects", got='"room=<r1>"')),
        (bad(104, bindings={"variable": "room", "value": "<r1>"}),
         NOT_FIT.format(field="bindings", what="an array of {variable, value} objects",
                        got='{"value":"<r1>","variable":"room"}')),
        (bad(105, ingestTime=1.5), NOT_FIT.format(field="ingestTime", what="a long (ms)", got="1.5")),
        (bad(106, windowStart=2 ** 64), NOT_FIT.format(field="windowStart", what="a long (ms)", got=str(2 ** 64))),
        (bad(107, kind="alarm"), "unknown kind 'alarm'"),
        (bad(250, entailed=[{"triple": "<a> <b> <c> .", "from": "<a> <d> <c> .", "axioms": "<d> <sub> <b> ."}]),
         NOT_FIT.format(field="entailed", what="an array of {triple, from, axioms} objects",
                        got='[{"axioms":"<d> <sub> <b> .","from":"<a>...')),
    ]
    lines = [line(r) for r in rec[110:200]]
    lines[10:10] = [line(r) for r, _ in wrong_shape]
    lines.insert(40, json.dumps([rec[108], rec[109]]))  # an array of events where one event belongs
    write("part-2-wrong-shape.jsonl", ("\n".join(lines) + "\n").encode())
    expected += [("part-2-wrong-shape.jsonl", reason) for _, reason in wrong_shape]
    expected.append(("part-2-wrong-shape.jsonl", "not a JSON object"))

    # 3. Required fields missing (or null), a line that is not UTF-8, an oversized bad line; CRLF endings.
    without = {k: v for k, v in rec[200].items() if k != "windowEnd"}
    without_two = {k: v for k, v in rec[201].items() if k not in ("id", "emittedAt")}
    huge = bad(203, kind="x", result="r" * 100_000)
    lines = [line(r) for r in rec[205:250]]
    lines[5:5] = [line(without), line(without_two), line(bad(202, gateway=None)), line(huge)]
    data = ("\r\n".join(lines) + "\r\n").encode() + line(bad(204, gateway="gw\u00e9")).encode("latin-1") + b"\r\n"
    write("part-3-missing-fields.jsonl", data)
    expected += [("part-3-missing-fields.jsonl", "missing required field windowEnd"),
                 ("part-3-missing-fields.jsonl", "missing required fields id, emittedAt"),
                 ("part-3-missing-fields.jsonl", "missing required field gateway"),
                 ("part-3-missing-fields.jsonl", "unknown kind 'x'"),
                 ("part-3-missing-fields.jsonl", "not UTF-8 text")]

    # 4. Binary garbage, and an empty file.
    garbage = random.Random(4).randbytes(6000)
    write("part-4-garbage.jsonl", garbage)
    garbage_lines = [g for g in garbage.splitlines() if g.strip()]
    write("part-5-empty.jsonl", b"")

    # 5. A file the job lists and is deleted before the job reads it.
    write("part-6-deleted.jsonl", ("\n".join(line(r) for r in rec[251:]) + "\n").encode())

    counted = [e for i, e in enumerate(events) if i < 100 or 110 <= i < 200 or 205 <= i < 250]
    config = write_config(tmp_path)
    db, args = tmp_path / "cloud.db", ["spark", "--config", str(config), "--available-now"]

    # The job plans batch 0 (every file) and dies before reading it; then the file goes away.
    job = CloudProcess(args, tmp_path / "job1.log", env={"EDGEWAVE_FAILPOINT": "batch_start:0"})
    assert job.wait(timeout=300) == -9, job.log()[-3000:]
    (partition / "part-6-deleted.jsonl").unlink()
    job = CloudProcess(args, tmp_path / "job2.log")
    assert job.wait(timeout=300) == 0, job.log()[-3000:]
    log = job.log()

    # Every valid event counted, once.
    assert total_events(db) == len(counted)
    assert match_counts(db) == Workload(unique=counted).expected_matches()
    assert {(g, s, p, m): c for g, s, p, m, c in query(
        db, "SELECT gateway, sensor, property, minute_ms, count FROM significant_per_minute")} == \
        Workload(unique=counted).expected_significant()

    # Every bad line rejected with its reason, file and batch.
    rows = query(db, "SELECT batch_id, source_file, reason, record, record_bytes FROM rejected_records")
    assert {batch for batch, *_ in rows} == {0}
    by_file = Counter((source.rsplit("/", 1)[-1], reason) for _, source, reason, _, _ in rows
                      if not source.endswith("part-4-garbage.jsonl"))
    assert by_file == Counter(expected)
    garbage_reasons = [reason for _, source, reason, _, _ in rows if source.endswith("part-4-garbage.jsonl")]
    assert len(garbage_reasons) == len(garbage_lines)
    assert set(garbage_reasons) <= {"not UTF-8 text", "not JSON"} and "not UTF-8 text" in garbage_reasons
    records = {(source.rsplit("/", 1)[-1], reason): (record, size) for _, source, reason, record, size in rows}
    assert records["part-1-valid-and-torn.jsonl", "not JSON"] == (truncated, len(truncated))
    assert records["part-2-wrong-shape.jsonl", wrong_shape[1][1]] == (line(wrong_shape[1][0]),
                                                                       len(line(wrong_shape[1][0])))
    cut, size = records["part-3-missing-fields.jsonl", "unknown kind 'x'"]
    assert size == len(line(huge)) and len(cut.encode()) == RECORD_LIMIT_BYTES and line(huge).startswith(cut)
    assert query(db, "SELECT SUM(rejected), SUM(rows) FROM committed_batches") == [(len(rows), len(counted))]
    assert len(rows) == len(expected) + len(garbage_lines)

    # The operator sees both in the job's log: the rejected lines, and the file that was gone.
    assert f"aggregates batch=0 events={len(counted)} rejected={len(rows)} " in log
    assert f"rejected records batch=0 count={len(rows)} files=4 " in log
    assert [text for text in log.splitlines() if " WARN " in text and "part-6-deleted.jsonl" in text]
    lines_read = sum(len((partition / name).read_bytes().splitlines()) for name in
                     ("part-1-valid-and-torn.jsonl", "part-2-wrong-shape.jsonl", "part-3-missing-fields.jsonl",
                      "part-4-garbage.jsonl"))
    assert f"progress batch=0 rows_in={lines_read} " in log
