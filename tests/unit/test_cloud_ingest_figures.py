"""An ingest worker's figures in the cloud database: what /metrics reads back."""
from __future__ import annotations

import sqlite3

from edgewave.cloud import ingest_figures
from edgewave.cloud.ingest_figures import WorkerFigures


def test_a_worker_row_reads_back_as_written_and_a_restart_replaces_it(tmp_path) -> None:
    conn = sqlite3.connect(tmp_path / "cloud.db", isolation_level=None)
    ingest_figures.ensure_schema(conn)
    first = WorkerFigures(0, "edgewave-ingest", 1_000, 6_000, {"events": 40, "commits": 3},
                          {ingest_figures.OVERSIZED: 1}, 0.25)
    ingest_figures.write(conn, first)
    ingest_figures.write(conn, WorkerFigures(1, "edgewave-ingest-1", 2_000, 7_000, {"events": 2}))
    assert ingest_figures.read_all(conn.execute(ingest_figures.READ_SQL).fetchall()) == [
        first, WorkerFigures(1, "edgewave-ingest-1", 2_000, 7_000, {"events": 2})]
    ingest_figures.write(conn, WorkerFigures(0, "edgewave-ingest", 9_000, 9_000, {"events": 0}))   # restarted
    [again, _] = ingest_figures.read_all(conn.execute(ingest_figures.READ_SQL).fetchall())
    assert again.started_ms == 9_000 and again.counters == {"events": 0}


def test_a_damaged_row_reads_as_empty_counts_instead_of_failing_the_scrape(tmp_path) -> None:
    conn = sqlite3.connect(tmp_path / "cloud.db", isolation_level=None)
    ingest_figures.ensure_schema(conn)
    conn.execute("INSERT INTO ingest_workers VALUES (0, 'c', 1, 2, '{not json', '[1, 2]', 0.5)")
    conn.execute("""INSERT INTO ingest_workers VALUES (1, 'c', 1, 2, '{"events": "7", "acks": 3}', '{}', 0)""")
    zero, one = ingest_figures.read_all(conn.execute(ingest_figures.READ_SQL).fetchall())
    assert zero.counters == {} and zero.rejected == {} and zero.commit_seconds == 0.5
    assert one.counters == {"acks": 3}
