"""Per-instance query results as the dashboard shows them: the queries with stored rows, one
query's rows over a time range, its numbers as chart series, and the CSV table.

The Spark job stores each instance event in ``instance_results`` (cloud/aggregates.py): the
instance's bounds and operator and its rows as a JSON array of ``{variable: N-Triples term}``.
The cloud does not know a query's variables in advance, so they are read off the rows: a
variable is *numeric* when every value it has in the rows read is a numeric literal
(``xsd:integer``, ``decimal``, ``double``, ``float`` and the integer types derived from them),
and charted; the other variables (IRIs, other literals) make the *group*: one series per
combination of their values (and per gateway when the page shows several), e.g. one line per
room for an average CO2 per room and minute.

Everything here comes from a gateway and is read defensively: a ``rows`` that is not a JSON
array of objects of strings yields the rows (and values) that are, never an error.
"""
from __future__ import annotations

import json
import math
import re
from contextlib import closing
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from datetime import timezone
from typing import Any
from zoneinfo import ZoneInfo

from edgewave.shared.ntriples import literal_parts
from edgewave.shared.vocab import XSD_NS

from .queries import Query
from .viewfmt import iso_time

NUMERIC_TYPES = frozenset(f"<{XSD_NS}{name}>" for name in (
    "integer", "decimal", "double", "float", "long", "int", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedLong", "unsignedInt", "unsignedShort",
    "unsignedByte"))
"""The datatypes whose literals are numbers (XSD's numeric types)."""

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?INF|NaN")

MAX_LISTED = 1000
"""At most this many (query, gateway) pairs on the list of queries."""
TABLE_ROWS = 1000
"""The page's table shows the newest this many rows of the range."""
CHART_ROWS = 200_000
"""The charts take at most this many rows (the newest), whatever the range."""
CSV_ROWS = 100_000
"""The CSV holds at most this many rows (the newest)."""
MAX_SERIES = 40
"""At most this many groups are charted (in the order of their labels); the page says when there were more."""


def number(term: str | None) -> Decimal | None:
    """The value of a numeric literal (``"412.5"^^xsd:decimal``); None for any other term."""
    if not term or term[:1] != '"':
        return None
    try:
        lexical, datatype, _ = literal_parts(term)
    except ValueError:
        return None
    if datatype not in NUMERIC_TYPES or not _NUMBER.fullmatch(lexical.strip()):
        return None
    try:
        return Decimal(lexical.strip().replace("INF", "Infinity"))
    except InvalidOperation:
        return None


def short(term: str | None) -> str:
    """A term as a chart's legend names it: an IRI's last segment, a literal's lexical form."""
    if term is None:
        return "–"
    if term[:1] == "<" and term[-1:] == ">" and term[1:2] != "<":
        iri = term[1:-1]
        tail = re.split(r"[#/]", iri.rstrip("/#"))[-1]
        return tail or iri
    if term[:1] == '"':
        try:
            return literal_parts(term)[0]
        except ValueError:
            return term
    return term


def cell(term: str | None) -> str:
    """A term as the table shows it: a number's lexical form, any other term as N-Triples."""
    if term is None:
        return ""
    return literal_parts(term)[0].strip() if number(term) is not None else term


def csv_table(found: "InstanceRows", zone: ZoneInfo | timezone) -> tuple[list[str], list[list[Any]]]:
    """The CSV of a query's rows, one line per row as the page lists them: gateway, the instance's bounds
    (ISO 8601 in ``zone``, like every export), operator, then a column per variable holding its N-Triples
    term as the gateway sent it (lossless: the datatype stays; an unbound variable is empty)."""
    header = ["gateway", "window_start", "window_end", "operator", *found.variables]
    rows = [[r.gateway, iso_time(r.window_start, zone), iso_time(r.window_end, zone), r.operator,
             *(r.values.get(v) for v in found.variables)] for r in found.rows]
    return header, rows


@dataclass(frozen=True)
class QuerySummary:
    """One query as one gateway reported it: how many instances are stored, the newest, its variables."""

    query: str
    gateway: str
    instances: int
    oldest_end_ms: int
    newest_end_ms: int
    operator: str
    variables: list[str]


@dataclass(frozen=True)
class InstanceRow:
    """One result row of one window instance."""

    gateway: str
    window_start: int
    window_end: int
    operator: str
    values: dict[str, str]


@dataclass
class InstanceRows:
    """A query's rows over a range, newest instance first, and their variables in the order first seen."""

    rows: list[InstanceRow] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)
    instances: int = 0
    truncated: bool = False
    """more rows in the range than were read"""


def _pairs(q: Query, query: str | None = None, limit: int = MAX_LISTED) -> list[tuple[str, str]]:
    """The distinct (query, gateway) pairs, one index seek each (a skip scan: no pass over every row)."""
    where, params = ("query = ? AND ", [query]) if query is not None else ("", [])
    found: list[tuple[str, str]] = []
    first = q.rows(f"SELECT query, gateway FROM instance_results {'WHERE query = ?' if query is not None else ''} "
                   "ORDER BY query, gateway LIMIT 1", params)
    while first and len(found) < limit:
        found.append((first[0][0], first[0][1]))
        first = q.rows(f"""SELECT query, gateway FROM instance_results WHERE {where}(query, gateway) > (?, ?)
                           ORDER BY query, gateway LIMIT 1""", [*params, *found[-1]])
    return found


def _part(q: Query) -> str:
    """``part,`` to order an instance's events by when the table has that column, else nothing: a
    database written before the column existed still reads (its events in id order) until the job adds it."""
    return ("part IS NULL, part," if any(c[1] == "part" for c in q.rows("PRAGMA table_info(instance_results)"))
            else "")


def _decode(text: Any) -> list[dict[str, str]]:
    """A stored ``rows`` as a list of {variable: term}, keeping only what has that shape."""
    try:
        rows = json.loads(text)
    except (TypeError, ValueError):
        return []
    if not isinstance(rows, list):
        return []
    return [{k: v for k, v in row.items() if isinstance(k, str) and isinstance(v, str)}
            for row in rows if isinstance(row, dict)]


def query_summaries(q: Query) -> list[QuerySummary]:
    """Every query with stored rows, per gateway, by name: the list page."""
    out = []
    part = _part(q)
    for query, gateway in _pairs(q):
        (count, oldest, newest), = q.rows(
            """SELECT COUNT(DISTINCT window_end), MIN(window_end), MAX(window_end) FROM instance_results
               WHERE query = ? AND gateway = ?""", (query, gateway))
        newest_rows = q.rows(f"""SELECT operator, rows FROM instance_results WHERE query = ? AND gateway = ?
                                ORDER BY window_end DESC, {part} event_id LIMIT 1""", (query, gateway))
        operator, text = newest_rows[0] if newest_rows else ("", "[]")
        out.append(QuerySummary(query, gateway, int(count or 0), int(oldest or 0), int(newest or 0), str(operator),
                                _variables(_decode(text))))
    return out


def gateways_of(q: Query, query: str) -> list[str]:
    """The gateways that reported ``query``."""
    return [gateway for _, gateway in _pairs(q, query)]


def _variables(rows: list[dict[str, str]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        for variable in row:
            seen.setdefault(variable, None)
    return list(seen)


def read_rows(q: Query, query: str, gateway: str | None, start_ms: int, end_ms: int, max_rows: int) -> InstanceRows:
    """The rows of the instances of ``query`` (of one gateway, or all) that end in [start_ms, end_ms),
    newest instance first, an instance's rows in their order; at most ``max_rows`` (the newest)."""
    where = "query = ? AND window_end >= ? AND window_end < ?" + (" AND gateway = ?" if gateway is not None else "")
    params: list[Any] = [query, start_ms, end_ms] + ([gateway] if gateway is not None else [])
    out = InstanceRows()
    instances: set[tuple[str, int, int, str]] = set()
    events = q.each(f"""SELECT gateway, window_start, window_end, operator, rows FROM instance_results
                        WHERE {where} ORDER BY window_end DESC, window_start DESC, gateway, operator, {_part(q)}
                        event_id""", params)
    with closing(events):
        for gw, start, end, operator, text in events:
            rows = _decode(text)
            room = max_rows - len(out.rows)
            if len(rows) > room or (room == 0 and not rows):
                out.truncated = True
            out.rows.extend(InstanceRow(gw, start, end, operator, r) for r in rows[:room])
            if out.truncated:
                if room:
                    instances.add((gw, start, end, operator))
                break
            instances.add((gw, start, end, operator))
    out.instances = len(instances)
    out.variables = _variables([r.values for r in out.rows])
    return out


def numeric_variables(found: InstanceRows) -> list[str]:
    """The variables every value of which (in these rows) is a number: the charted ones."""
    numeric = []
    for variable in found.variables:
        values = [r.values[variable] for r in found.rows if variable in r.values]
        if values and all(number(v) is not None for v in values):
            numeric.append(variable)
    return numeric


def _labels(keys: list[tuple[str | None, ...]]) -> list[str]:
    """Short labels (an IRI's last segment), or the full terms where the short ones would collide."""
    shorts = [" · ".join(short(t) for t in key) for key in keys]
    if len(set(shorts)) == len(shorts):
        return shorts
    return [" · ".join("–" if t is None else t for t in key) for key in keys]


def chart_data(found: InstanceRows, per_gateway: bool) -> dict[str, Any]:
    """uPlot's data for each numeric variable: ``x`` the instances' ends in epoch seconds, one series
    per group (the values of the other variables, and the gateway when ``per_gateway``), null where a
    group has no value at an instance; the mean where a group has several rows in one instance."""
    numeric = numeric_variables(found)
    keys_of = [v for v in found.variables if v not in numeric]
    ends = sorted({r.window_end for r in found.rows})
    index = {end: i for i, end in enumerate(ends)}
    groups: dict[tuple[str | None, ...], dict[str, list[list[float]]]] = {}
    for r in found.rows:
        key = ((r.gateway,) if per_gateway else ()) + tuple(r.values.get(v) for v in keys_of)
        sums = groups.setdefault(key, {v: [[0.0, 0] for _ in ends] for v in numeric})
        for variable in numeric:
            value = number(r.values.get(variable))
            if value is not None and value.is_finite():
                slot = sums[variable][index[r.window_end]]
                slot[0] += float(value)
                slot[1] += 1
    keys = sorted(groups, key=lambda k: tuple("" if t is None else t for t in k))
    labels = dict(zip(keys, _labels(keys))) if keys_of or per_gateway else {k: "" for k in keys}
    keys.sort(key=lambda k: labels[k])
    charts = []
    for variable in numeric:
        series = []
        for key in keys:
            values = [None if n == 0 else _finite(s / n) for s, n in groups[key][variable]]
            if any(v is not None for v in values):
                series.append({"label": labels[key] or f"?{variable}", "key": list(key), "values": values})
        charts.append({"variable": variable, "series": series[:MAX_SERIES], "groups": len(series)})
    return {"x": [end / 1000 for end in ends], "numeric": numeric, "group_by": (["gateway"] if per_gateway else [])
            + keys_of, "charts": charts, "instances": found.instances, "rows": len(found.rows),
            "truncated": found.truncated, "max_series": MAX_SERIES}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
