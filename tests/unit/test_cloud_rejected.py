"""The Spark job's event schema comes from the one event definition; rejected lines are stored exactly once."""
from __future__ import annotations

import sqlite3

import pytest

from edgewave.cloud.aggregates import BatchAggregates, RejectedRecord, apply_batch, ensure_aggregate_schema
from edgewave.cloud.database import open_database
from edgewave.cloud.job import HISTORY_COLUMNS, REQUIRED_COLUMNS, event_schema
from edgewave.shared.events import FIELDS, REQUIRED_FIELDS


def test_event_schema_is_the_event_definition_plus_ingest_time():
    schema = event_schema()
    assert schema.fieldNames() == [f.name for f in FIELDS] + ["ingestTime"] == HISTORY_COLUMNS
    spark_types = {f.name: f.dataType.simpleString() for f in schema.fields}
    expected = {"string": "string", "long": "bigint", "strings": "array<string>",
                "bindings": "array<struct<variable:string,value:string>>",
                "entailed": "array<struct<triple:string,from:string,axioms:array<string>>>",
                "rows": "array<array<struct<variable:string,value:string>>>"}
    assert all(spark_types[f.name] == expected[f.type] for f in FIELDS)
    assert spark_types["ingestTime"] == "bigint"
    assert REQUIRED_COLUMNS == (*REQUIRED_FIELDS, "ingestTime")


@pytest.fixture
def db(tmp_path):
    db = open_database(tmp_path / "cloud.db")
    ensure_aggregate_schema(db)
    yield db
    db.conn.close()


def test_rejected_lines_are_stored_once_with_their_batch(db):
    batch = BatchAggregates(rows=1, matches=[("gw1", "fire", 60_000, 1)], rejected=[
        RejectedRecord("file:/landing/a.jsonl", "missing required field windowEnd", '{"id":"x"}', 10),
        RejectedRecord("file:/landing/a.jsonl", "not JSON", '{"id":', 6),
    ])
    assert apply_batch(db, "q1", 3, batch)
    assert not apply_batch(db, "q1", 3, batch)  # the replayed batch stores nothing again
    rows = db.execute("SELECT query_id, batch_id, source_file, reason, record, record_bytes FROM rejected_records "
                      "ORDER BY reason").fetchall()
    assert rows == [("q1", 3, "file:/landing/a.jsonl", "missing required field windowEnd", '{"id":"x"}', 10),
                    ("q1", 3, "file:/landing/a.jsonl", "not JSON", '{"id":', 6)]
    assert db.execute("SELECT rows, rejected FROM committed_batches").fetchall() == [(1, 2)]
    assert batch.rejected_by_reason() == [("missing required field windowEnd", 1), ("not JSON", 1)]


def test_a_database_from_before_rejected_counts_gets_the_column(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE committed_batches (query_id TEXT NOT NULL, batch_id INTEGER NOT NULL, "
                 "rows INTEGER NOT NULL, committed_ms INTEGER NOT NULL, PRIMARY KEY (query_id, batch_id))")
    conn.execute("INSERT INTO committed_batches VALUES ('q1', 0, 5, 1)")
    conn.commit()
    conn.close()
    db = open_database(path)
    try:
        ensure_aggregate_schema(db)
        ensure_aggregate_schema(db)  # idempotent
        assert apply_batch(db, "q1", 1, BatchAggregates(rejected=[RejectedRecord("f", "not JSON", "x", 1)]))
        assert db.execute("SELECT batch_id, rows, rejected FROM committed_batches ORDER BY batch_id").fetchall() == \
            [(0, 5, 0), (1, 0, 1)]
    finally:
        db.conn.close()
