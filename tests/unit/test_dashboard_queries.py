"""The dashboard's read-only queries over a database written by the cloud's own code."""
from __future__ import annotations

import sqlite3

import pytest

from dashboard_data import LAGGING_AFTER_S, MINUTE, OFFLINE_AFTER_S, fill_known_database
from edgewave.cloud import rollups
from edgewave.cloud.aggregates import percentile
from edgewave.cloud.dashboard import queries
from edgewave.cloud.dashboard.bucketing import preset_range, series


@pytest.fixture
def known(tmp_path):
    data = fill_known_database(tmp_path / "cloud.db")
    return tmp_path / "cloud.db", data


def test_a_missing_database_reads_as_empty(tmp_path):
    reader = queries.Reader(tmp_path / "never-created.db")
    with reader.query() as q:
        assert queries.pattern_rows(q, preset_range("24h")) == []
        assert queries.gateway_rows(q, 0, 60, 60) == []
        assert queries.delay_summary(q, 0, 10) == []
        assert queries.top_bindings(q) == []
    assert not (tmp_path / "never-created.db").exists()


def test_a_database_without_the_aggregate_tables_reads_as_empty(tmp_path):
    sqlite3.connect(tmp_path / "cloud.db").execute("CREATE TABLE other (x)").connection.close()
    with queries.Reader(tmp_path / "cloud.db").query() as q:
        assert queries.match_series(q, preset_range("1h")) == []
        assert queries.significant_by_property(q, 0, 10) == []


def test_the_connection_cannot_write(known):
    db, _ = known
    with queries.Reader(db).query() as q:
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only|attempt to write"):
            q.conn.execute("DELETE FROM matches_per_minute")
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM matches_per_minute").fetchone()[0] > 0


def test_series_and_totals_equal_the_minute_counts(known):
    db, data = known
    rng = preset_range("7d", data.now_ms)
    with queries.Reader(db).query() as q:
        got = series(rng, queries.match_series(q, rng))
        rows = queries.pattern_rows(q, rng)
    expected: dict[str, int] = {}
    for _, pattern, minute, count in data.matches:
        if rng.start_ms <= minute < rng.end_ms:
            expected[pattern] = expected.get(pattern, 0) + count
    assert {p: sum(v) for p, v in got.items()} == expected
    assert all(len(v) == len(rng.bucket_starts) <= 1500 for v in got.values())
    # The previous week holds only the old 1000-match fire burst.
    assert {r.pattern: (r.matches, r.previous) for r in rows} == {p: (n, 1000 if p == "fire" else 0)
                                                                  for p, n in expected.items()}
    assert rows[0].matches == max(expected.values())


def test_change_against_the_previous_period(known):
    db, data = known
    rng = preset_range("1h", data.now_ms)
    with queries.Reader(db).query() as q:
        rows = {r.pattern: r for r in queries.pattern_rows(q, rng)}
    fire_now = sum(c for _, p, m, c in data.matches if p == "fire" and rng.start_ms <= m < rng.end_ms)
    fire_before = sum(c for _, p, m, c in data.matches if p == "fire" and rng.start_ms - rng.length_ms <= m < rng.start_ms)
    assert (rows["fire"].matches, rows["fire"].previous) == (fire_now, fire_before)
    assert rows["fire"].change == fire_now - fire_before
    assert rows["fire"].change_pct == pytest.approx(100 * (fire_now - fire_before) / fire_before)


def test_top_bindings_and_significant_per_property(known):
    db, data = known
    with queries.Reader(db).query() as q:
        top = queries.top_bindings(q, per_variable=2)
        significant = queries.significant_by_property(q, data.now_ms - 3600_000, data.now_ms + MINUTE)
    assert [(p, v, val, c) for p, v, val, c, _ in top] == [
        ("fire", "room", "ex:room3", 40), ("fire", "room", "ex:room2", 25),
        ("intrusion", "door", "ex:frontDoor", 300), ("intrusion", "door", "ex:backDoor", 110)]
    assert significant == [("sosa:Temperature", 20, 2), ("ex:SmokeDensity", 4, 1)]


def test_delay_percentiles_merge_the_minutes_of_the_range(known):
    db, data = known
    with queries.Reader(db).query() as q:
        one_hour = queries.delay_summary(q, data.now_ms - 3600_000, data.now_ms + MINUTE)
        two_hours = queries.delay_summary(q, data.now_ms - 7200_000, data.now_ms + MINUTE)
    [d] = one_hour
    assert (d.kind, d.count, d.min_ms, d.max_ms) == ("match", 100, 120, 15_400)
    assert (d.p50_ms, d.p95_ms, d.p99_ms) == (120, 2210, 2210)   # nearest rank: the 50th of 100 is 120
    assert d.mean_ms == pytest.approx((120 * 50 + 340 * 40 + 2210 * 9 + 15_400) / 100)
    [d2] = two_hours
    assert d2.count == 200
    hist = [(120, 100), (340, 80), (2210, 18), (15_400, 2)]
    assert (d2.p50_ms, d2.p95_ms, d2.p99_ms) == tuple(percentile(hist, x) for x in (0.5, 0.95, 0.99)) == \
        (120, 2210, 2210)


def test_gateway_health_offline_first_then_lagging(known):
    db, data = known
    with queries.Reader(db).query() as q:
        rows = queries.gateway_rows(q, data.now_ms, OFFLINE_AFTER_S, LAGGING_AFTER_S)
        ok = queries.gateway_row(q, "gw-ok", data.now_ms, OFFLINE_AFTER_S, LAGGING_AFTER_S)
        history = queries.status_history(q, "gw-ok")
        assert queries.gateway_row(q, "nope", data.now_ms, 60, 60) is None
    assert [(r.gateway, r.health) for r in rows] == [
        ("gw-silent", "offline"), ("gw-will", "offline"), ("gw-lag", "lagging"), ("gw-ok", "online"),
        ("gw-zeta", "online")]
    silent, will, lag = rows[0], rows[1], rows[2]
    assert silent.reason == "no status for 20 min" and "Last Will" in will.reason
    assert lag.outbox_depth == 4200 and lag.drops == 17 and lag.oldest_unsent_ms == 15 * MINUTE + 10_000
    assert ok.bytes_saved == 1_000_000 - 40_003 and ok.config_version == 3
    assert [h.counter("messages_in") for h in history] == [5300, 5200, 5100, 5000]   # newest first


def test_a_gateway_goes_offline_once_its_status_is_older_than_the_timeout(known):
    db, data = known
    with queries.Reader(db).query() as q:
        later = {r.gateway: r.health for r in queries.gateway_rows(q, data.now_ms + 301_000, OFFLINE_AFTER_S,
                                                                   LAGGING_AFTER_S)}
    assert later["gw-ok"] == "offline" and later["gw-zeta"] == "offline"


def test_a_slow_query_is_cut_off_instead_of_holding_the_database(known):
    db, _ = known
    with queries.Reader(db, timeout_s=0.05).query() as q:
        with pytest.raises(queries.QueryTimeout):
            q.rows("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n")


def test_time_range_queries_read_the_minute_index_alone(known):
    """An hour's minute rows for hundreds of gateways are read by ranges of minutes: the significant
    observations from the covering index by minute, the matches from their sums over the gateways
    (longer ranges read whole hours and days from their sums: tests/unit/test_cloud_rollups.py)."""
    path, data = known
    start, end = data.now_ms - 3600_000 + 7, data.now_ms
    with queries.Reader(path).query() as q:
        source, params = q.source(rollups.SIGNIFICANT, "property, gateway, sensor, count", start, end)
        plan = " ".join(row[-1] for row in q.conn.execute(
            f"EXPLAIN QUERY PLAN {queries._SIGNIFICANT.format(source=source)}", params))
        assert ("significant_per_minute USING COVERING INDEX significant_per_minute_by_minute "
                "(minute_ms>? AND minute_ms<?)") in plan, plan
        assert "count(DISTINCT)" not in plan, plan
        source, params = q.source(rollups.MATCHES, queries._MATCH_COLUMNS, start, end)
        inner = " ".join(row[-1] for row in q.conn.execute(f"EXPLAIN QUERY PLAN {source}", params))
        assert "matches_per_pattern_minute USING PRIMARY KEY (minute_ms>? AND minute_ms<?)" in inner, inner
        assert "TEMP B-TREE" not in inner, inner


def test_a_gateway_whose_cloud_sends_no_landed_acknowledgements_needs_attention():
    """Its agent fell back to deleting on PUBACK (agent/uplink_landed.py): a broker crash can lose
    its events, which an operator must see (an ACL file from before the acknowledgement, ingest down)."""
    status = {"state": "online", "outbox": {"depth": 0, "oldestAgeMs": None, "landedAcks": "older_cloud"}}
    row = queries.judge(queries.GatewayRow("gw1", "online", 3, 0, 1000, status), 2000, OFFLINE_AFTER_S,
                        LAGGING_AFTER_S)
    assert row.health == "lagging" and "PUBACK" in row.reason
    status["outbox"]["landedAcks"] = "end_to_end"
    row = queries.judge(queries.GatewayRow("gw1", "online", 3, 0, 1000, status), 2000, OFFLINE_AFTER_S,
                        LAGGING_AFTER_S)
    assert row.health == "online"
