"""SQLite aggregates: each batch applied exactly once; delay histogram percentiles."""
from __future__ import annotations

import random

import pytest

from edgewave.cloud.aggregates import (BatchAggregates, InstanceResult, apply_batch, delay_bucket,
                                       ensure_aggregate_schema, instance_part, percentile)
from edgewave.cloud.database import open_database
from edgewave.shared.events import instance_events

M0 = 1_795_000_020_000 // 60000 * 60000


@pytest.fixture
def db(tmp_path):
    db = open_database(tmp_path / "cloud.db")
    ensure_aggregate_schema(db)
    yield db
    db.conn.close()


def batch(matches, delays=(), bindings=(), significant=()):
    return BatchAggregates(rows=sum(c for *_, c in matches), matches=list(matches), delays=list(delays),
                           bindings=list(bindings), significant=list(significant))


def counts(db):
    return {(g, p, m): c
            for g, p, m, c in db.execute("SELECT gateway, pattern, minute_ms, count FROM matches_per_minute")}


def test_batches_add_up(db):
    assert apply_batch(db, "q1", 0, batch([("gw1", "fire", M0, 3), ("gw2", "fire", M0, 1)]))
    assert apply_batch(db, "q1", 1, batch([("gw1", "fire", M0, 2), ("gw1", "fire", M0 + 60000, 5)]))
    assert counts(db) == {("gw1", "fire", M0): 5, ("gw2", "fire", M0): 1, ("gw1", "fire", M0 + 60000): 5}


def test_replayed_batch_is_not_counted_twice(db):
    b = batch([("gw1", "fire", M0, 3)], bindings=[("fire", "room", "<r1>", 3)],
              significant=[("gw1", "<s>", "<p>", M0, 4)], delays=[(M0, "match", 120, 3, 370, 120, 130)])
    assert apply_batch(db, "q1", 7, b)
    assert not apply_batch(db, "q1", 7, b)
    assert counts(db) == {("gw1", "fire", M0): 3}
    assert db.execute("SELECT count FROM binding_values").fetchall() == [(3,)]
    assert db.execute("SELECT count FROM significant_per_minute").fetchall() == [(4,)]
    assert db.execute("SELECT count, sum_ms FROM delay_per_minute").fetchall() == [(3, 370)]
    # the same batch id of another streaming query is a different batch
    assert apply_batch(db, "q2", 7, b)
    assert counts(db) == {("gw1", "fire", M0): 6}


def test_failed_batch_leaves_nothing_behind(db):
    bad = batch([("gw1", "fire", M0, 3)], bindings=[("fire", "room", None, 1)])  # NOT NULL violated mid-batch
    with pytest.raises(Exception):
        apply_batch(db, "q1", 0, bad)
    assert counts(db) == {}
    assert db.execute("SELECT COUNT(*) FROM committed_batches").fetchone() == (0,)
    assert apply_batch(db, "q1", 0, batch([("gw1", "fire", M0, 3)]))  # the retry goes through


@pytest.mark.parametrize("delay,bucket", [(0, 0), (7, 7), (999, 999), (1000, 1000), (1234, 1230), (9999, 9990),
                                          (10000, 10000), (56789, 56700), (1234567, 1230000), (-1234, -1230)])
def test_delay_bucket_keeps_three_significant_digits(delay, bucket):
    assert delay_bucket(delay) == bucket


def test_percentiles_from_buckets_are_within_one_percent():
    rng = random.Random(3)
    delays = [int(rng.lognormvariate(7, 1)) for _ in range(5000)]
    hist: dict[int, int] = {}
    for d in delays:
        hist[delay_bucket(d)] = hist.get(delay_bucket(d), 0) + 1
    ordered = sorted(delays)
    for q in (0.5, 0.95):
        exact = ordered[int(-(-q * len(ordered) // 1)) - 1]  # nearest rank
        approx = percentile(hist.items(), q)
        assert exact * 0.99 <= approx <= exact


def test_delay_summary_recomputed_across_batches(db):
    # 100 delays of 1000 ms in one batch, then 100 of 5000 ms in another minute-sharing batch
    apply_batch(db, "q", 0, batch([], delays=[(M0, "match", 1000, 100, 100_000, 1000, 1000)]))
    apply_batch(db, "q", 1, batch([], delays=[(M0, "match", 5000, 100, 500_000, 5000, 5000)]))
    row = db.execute("SELECT count, sum_ms, min_ms, max_ms, p50_ms, p95_ms FROM delay_per_minute").fetchone()
    assert row == (200, 600_000, 1000, 5000, 1000, 5000)


def test_an_instance_events_part_is_read_off_its_id():
    events = instance_events("gw1", "q/1", 60_000, 120_000, "ISTREAM", [{"x": f"<s{i}>"} for i in range(1200)], 1)
    assert [instance_part(e["id"], "gw1", "q/1", 60_000, 120_000, "ISTREAM") for e in events] == [0, 1, 2]
    # another instance's, or an id the gateway did not make from these: no part
    assert instance_part(events[1]["id"], "gw1", "q/1", 60_000, 120_001, "ISTREAM") is None
    assert instance_part("ev:0000", "gw1", "q/1", 60_000, 120_000, "ISTREAM") is None


def test_instance_results_of_an_older_database_gain_their_part_column(tmp_path):
    db = open_database(tmp_path / "old.db")
    try:
        db.execute("""CREATE TABLE instance_results (event_id TEXT PRIMARY KEY, gateway TEXT NOT NULL,
                      query TEXT NOT NULL, window_start INTEGER NOT NULL, window_end INTEGER NOT NULL,
                      operator TEXT NOT NULL, rows TEXT NOT NULL, ingest_ms INTEGER NOT NULL)""")
        db.execute("INSERT INTO instance_results VALUES ('e0', 'gw1', 'q', 0, 60000, 'RSTREAM', '[]', 1)")
        ensure_aggregate_schema(db)
        ensure_aggregate_schema(db)      # twice: nothing more to add
        row = InstanceResult("e1", "gw1", "q", 60_000, 120_000, "RSTREAM", '[{"x":"<a>"}]', 2, 0)
        assert apply_batch(db, "q1", 0, BatchAggregates(rows=1, instances=[row]))
        assert not apply_batch(db, "q1", 0, BatchAggregates(rows=1, instances=[row]))
        assert db.execute("SELECT event_id, part FROM instance_results ORDER BY event_id").fetchall() == [
            ("e0", None), ("e1", 0)]
    finally:
        db.conn.close()


def test_matches_summed_over_gateways_follow_the_minute_rows_and_an_older_database_gets_them(db):
    assert apply_batch(db, "q1", 0, batch([("gw1", "fire", M0, 3), ("gw2", "fire", M0, 1), ("gw2", "smoke", M0, 2)]))
    assert apply_batch(db, "q1", 1, batch([("gw1", "fire", M0, 2), ("gw1", "fire", M0 + 60000, 5)]))
    assert not apply_batch(db, "q1", 1, batch([("gw1", "fire", M0, 2)]))     # replayed: nothing added
    sums = "SELECT minute_ms, pattern, SUM(count) FROM matches_per_minute GROUP BY 1, 2 ORDER BY 1, 2"
    rollup = "SELECT minute_ms, pattern, count FROM matches_per_pattern_minute ORDER BY 1, 2"
    assert db.execute(rollup).fetchall() == db.execute(sums).fetchall() == \
        [(M0, "fire", 6), (M0, "smoke", 2), (M0 + 60000, "fire", 5)]
    # a database written before the table existed: the table is made from its minute rows, once
    db.execute("DROP TABLE matches_per_pattern_minute")
    ensure_aggregate_schema(db)
    ensure_aggregate_schema(db)
    assert db.execute(rollup).fetchall() == db.execute(sums).fetchall()
