"""Per-instance query results as the dashboard reads them (cloud/dashboard/instances.py): which values are
numbers, how rows group into chart series, reading a range newest first within a row budget, and the CSV."""
from __future__ import annotations

import csv
import io
import json
import sqlite3
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from edgewave.cloud.aggregates import BatchAggregates, InstanceResult, apply_batch, ensure_aggregate_schema
from edgewave.cloud.dashboard import instances
from edgewave.cloud.dashboard.export import to_csv
from edgewave.cloud.dashboard.queries import Reader
from edgewave.cloud.database import open_database

XSD = "http://www.w3.org/2001/XMLSchema#"


@pytest.mark.parametrize("term,value", [
    (f'"412.50"^^<{XSD}decimal>', Decimal("412.50")),
    (f'"-3"^^<{XSD}integer>', Decimal(-3)),
    (f'"1.5E3"^^<{XSD}double>', Decimal("1500")),
    (f'"7"^^<{XSD}unsignedByte>', Decimal(7)),
    (f'"INF"^^<{XSD}float>', Decimal("Infinity")),
    (f'"42"^^<{XSD}string>', None),
    ('"42"', None),
    ('"42"@en', None),
    (f'"1_000"^^<{XSD}integer>', None),       # Python would read it; XSD does not
    (f'"abc"^^<{XSD}decimal>', None),
    ("<http://example.org/42>", None),
    ('"unterminated', None),
    ("", None),
])
def test_numbers_are_xsd_numeric_literals(term, value):
    assert instances.number(term) == value


def rows_of(*rows: dict) -> instances.InstanceRows:
    found = instances.InstanceRows(rows=[instances.InstanceRow(gw, end - 60_000, end, "RSTREAM", values)
                                         for gw, end, values in rows])
    found.variables = list(dict.fromkeys(v for _, _, values in rows for v in values))
    found.instances = len({(gw, end) for gw, end, _ in rows})
    return found


def test_a_variable_with_one_value_that_is_not_a_number_groups_instead_of_being_charted():
    n = f'"5"^^<{XSD}integer>'
    found = rows_of(("gw1", 60_000, {"room": "<http://ex/r1>", "level": n, "code": n}),
                    ("gw1", 60_000, {"room": "<http://ex/r2>", "level": n, "code": '"x5"'}),
                    ("gw1", 120_000, {"room": "<http://ex/r1>", "code": n}))
    data = instances.chart_data(found, per_gateway=False)
    assert data["numeric"] == ["level"] and data["group_by"] == ["room", "code"]
    assert data["x"] == [60.0, 120.0]
    (chart,) = data["charts"]
    # (r1, 5) has a level at the first instance only; (r2, "x5") too
    assert [(s["label"], s["values"]) for s in chart["series"]] == [("r1 · 5", [5.0, None]), ("r2 · x5", [5.0, None])]


def test_several_rows_of_a_group_in_one_instance_are_averaged_and_labels_fall_back_to_full_terms():
    v = [f'"{x}"^^<{XSD}decimal>' for x in (1, 2, 4)]
    found = rows_of(("gw1", 60_000, {"s": "<http://a/x>", "v": v[0]}),
                    ("gw1", 60_000, {"s": "<http://a/x>", "v": v[1]}),
                    ("gw1", 60_000, {"s": "<http://b/x>", "v": v[2]}))
    (chart,) = instances.chart_data(found, per_gateway=False)["charts"]
    assert [(s["label"], s["values"]) for s in chart["series"]] == [("<http://a/x>", [1.5]), ("<http://b/x>", [4.0])]


def test_only_numbers_means_one_series_per_gateway_or_one_named_after_the_variable():
    n = f'"3"^^<{XSD}integer>'
    found = rows_of(("gw1", 60_000, {"count": n}), ("gw2", 60_000, {"count": n}))
    assert [s["label"] for s in instances.chart_data(found, per_gateway=True)["charts"][0]["series"]] == ["gw1", "gw2"]
    (series,) = instances.chart_data(rows_of(("gw1", 60_000, {"count": n})), per_gateway=False)["charts"][0]["series"]
    assert series["label"] == "?count" and series["values"] == [3.0]


def test_at_most_max_series_groups_are_charted_and_the_chart_says_how_many_there_were():
    n = f'"1"^^<{XSD}integer>'
    found = rows_of(*[("gw1", 60_000, {"k": f'"g{i:03d}"', "n": n}) for i in range(instances.MAX_SERIES + 5)])
    (chart,) = instances.chart_data(found, per_gateway=False)["charts"]
    assert len(chart["series"]) == instances.MAX_SERIES and chart["groups"] == instances.MAX_SERIES + 5


def test_reading_a_range_newest_first_stops_at_the_row_budget_and_skips_what_is_not_rows(tmp_path):
    db = open_database(tmp_path / "cloud.db")
    ensure_aggregate_schema(db)
    stored = [InstanceResult(f"e{m}", "gw1", "q", m * 60_000, (m + 1) * 60_000, "RSTREAM",
                             json.dumps([{"i": f'"{m}.{r}"'} for r in range(3)]), 0, 0) for m in range(5)]
    stored.append(InstanceResult("bad", "gw1", "q", 9 * 60_000, 10 * 60_000, "RSTREAM", '{"not": "rows"}', 0, 0))
    stored.append(InstanceResult("odd", "gw1", "q", 8 * 60_000, 9 * 60_000, "RSTREAM", '[{"i": 5, "j": "<a>"}, 7]',
                                 0, 0))
    assert apply_batch(db, "q1", 0, BatchAggregates(rows=len(stored), instances=stored))
    db.conn.close()
    with Reader(tmp_path / "cloud.db").query() as q:
        every = instances.read_rows(q, "q", None, 0, 10 * 60_000, 100)
        assert [r.values for r in every.rows[:1]] == [{"j": "<a>"}] and not every.truncated
        assert [r.values["i"] for r in every.rows[1:4]] == ['"4.0"', '"4.1"', '"4.2"']
        cut = instances.read_rows(q, "q", "gw1", 0, 5 * 60_000 + 1, 7)
        assert [r.values["i"] for r in cut.rows] == ['"4.0"', '"4.1"', '"4.2"', '"3.0"', '"3.1"', '"3.2"', '"2.0"']
        assert cut.truncated and cut.instances == 3
        assert instances.read_rows(q, "q", "gw2", 0, 10 * 60_000, 7).rows == []
        assert [s.instances for s in instances.query_summaries(q)] == [7]
    with Reader(tmp_path / "missing.db").query() as q:
        assert instances.query_summaries(q) == [] and instances.read_rows(q, "q", None, 0, 1, 5).rows == []


def test_the_csv_has_a_line_per_row_with_the_bounds_in_the_viewers_zone_and_the_terms_as_sent():
    n = f'"-5"^^<{XSD}integer>'
    found = rows_of(("gw1", 120_000, {"room": "<http://ex/r1>", "level": n}),
                    ("gw1", 120_000, {"room": "<http://ex/r2>"}),
                    ("gw2", 60_000, {"level": '"=1+1"', "extra": "_:b0"}))
    header, rows = instances.csv_table(found, ZoneInfo("Europe/Berlin"))
    assert header == ["gateway", "window_start", "window_end", "operator", "room", "level", "extra"]
    assert rows == [
        ["gw1", "1970-01-01T01:01:00+01:00", "1970-01-01T01:02:00+01:00", "RSTREAM", "<http://ex/r1>", n, None],
        ["gw1", "1970-01-01T01:01:00+01:00", "1970-01-01T01:02:00+01:00", "RSTREAM", "<http://ex/r2>", None, None],
        ["gw2", "1970-01-01T01:00:00+01:00", "1970-01-01T01:01:00+01:00", "RSTREAM", None, '"=1+1"', "_:b0"]]
    text = to_csv((header, rows))
    assert text.splitlines()[1] == f'gw1,1970-01-01T01:01:00+01:00,1970-01-01T01:02:00+01:00,RSTREAM,' \
                                   f'<http://ex/r1>,"""-5""^^<{XSD}integer>",'
    assert list(csv.reader(io.StringIO(text)))[3][4:] == ["", '"=1+1"', "_:b0"]


def test_a_table_without_the_part_column_still_reads(tmp_path):
    """A database the job wrote before it stored each event's part: its events read in id order."""
    conn = sqlite3.connect(tmp_path / "cloud.db")
    conn.executescript("""
        CREATE TABLE IF NOT EXISTS instance_results (
            event_id TEXT PRIMARY KEY, gateway TEXT NOT NULL, query TEXT NOT NULL, window_start INTEGER NOT NULL,
            window_end INTEGER NOT NULL, operator TEXT NOT NULL, rows TEXT NOT NULL, ingest_ms INTEGER NOT NULL);
        CREATE INDEX IF NOT EXISTS instance_results_by_query ON instance_results (query, gateway, window_end);""")
    room = f'"694.5"^^<{XSD}decimal>'
    conn.executemany("INSERT INTO instance_results VALUES (?, 'gw1', 'co2', 0, 60000, 'RSTREAM', ?, 1)",
                     [("e1", json.dumps([{"room": "<http://ex/r2>", "average": room}])),
                      ("e0", json.dumps([{"room": "<http://ex/r1>", "average": room}]))])
    conn.commit()
    conn.close()
    with Reader(tmp_path / "cloud.db").query() as q:
        assert [s.variables for s in instances.query_summaries(q)] == [["room", "average"]]
        found = instances.read_rows(q, "co2", None, 0, 120_000, 10)
    assert [r.values["room"] for r in found.rows] == ["<http://ex/r1>", "<http://ex/r2>"]
    assert instances.chart_data(found, per_gateway=False)["charts"][0]["series"][0]["values"] == [694.5]


def test_an_event_without_a_part_reads_after_the_parts_of_its_instance(tmp_path):
    db = open_database(tmp_path / "cloud.db")
    ensure_aggregate_schema(db)
    stored = [InstanceResult(event_id, "gw1", "q", 0, 60_000, "RSTREAM", json.dumps([{"i": f'"{n}"'}]), 0, part)
              for event_id, n, part in (("a", 3, None), ("b", 2, 1), ("c", 1, 0))]
    assert apply_batch(db, "q1", 0, BatchAggregates(rows=3, instances=stored))
    db.conn.close()
    with Reader(tmp_path / "cloud.db").query() as q:
        assert [r.values["i"] for r in instances.read_rows(q, "q", None, 0, 60_001, 10).rows] == ['"1"', '"2"', '"3"']
