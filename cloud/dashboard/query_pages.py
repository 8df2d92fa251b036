"""The per-instance query routes: the queries with stored results, one query's rows and charts, its CSV.

Pages:  GET /queries (every per-instance query with stored rows, per gateway),
        GET /queries/{query} (``?gateway=`` one gateway, else all; ``?range=1h|24h|7d`` or ``start``/``end``)
JSON:   GET /api/queries/{query} (the charts' data, the same parameters)
CSV:    GET /export/queries/{query}.csv (the same parameters; times in the viewer's zone, ``tz``; values as
        N-Triples terms)

A query's name is in the path, percent-encoded (a name may hold a ``/``). The rows are read
from ``instance_results`` (instances.py), which the Spark job fills exactly once per event.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import export, instances
from .bucketing import PRESETS_MS, TimeRange
from .rendering import reader_of, render, requested_range
from .viewfmt import viewer_zone


def _chosen(request: Request) -> tuple[str, str | None, TimeRange]:
    """The query in the path, the gateway asked for (None: all) and the range."""
    gateway = request.query_params.get("gateway") or None
    return request.path_params["query"], gateway, requested_range(request)


def _params(gateway: str | None, rng: TimeRange | None) -> str:
    """The query string that asks for this gateway and range again."""
    params: dict[str, Any] = {"gateway": gateway} if gateway else {}
    if rng is not None:
        params.update(rng.query())
    return urlencode(params)


def path_of(query: str) -> str:
    """A query's name as one path segment (a ``/`` in it encoded too)."""
    return quote(query, safe="")


def queries_page(request: Request) -> Response:
    """The list: every per-instance query with stored rows, per gateway."""
    with reader_of(request).query() as q:
        found = instances.query_summaries(q)
    return render(request, "queries.html", {"nav": "queries", "queries": found, "path_of": path_of,
                                            "gateway_params": lambda gw: _params(gw, None)})


def query_page(request: Request) -> Response:
    """One query's rows over a range, newest instance first; the charts load from the API."""
    query, gateway, rng = _chosen(request)
    with reader_of(request).query() as q:
        gateways = instances.gateways_of(q, query)
        if not gateways:
            raise HTTPException(404, f"no stored results of a query {query!r}")
        if gateway is not None and gateway not in gateways:
            raise HTTPException(404, f"no stored results of {query!r} from gateway {gateway!r}")
        found = instances.read_rows(q, query, gateway, rng.start_ms, rng.end_ms, instances.TABLE_ROWS)
    numeric = set(instances.numeric_variables(found))
    table = [(r, [(instances.cell(r.values.get(v)), v in numeric) for v in found.variables]) for r in found.rows]
    return render(request, "query.html", {
        "nav": "queries", "query": query, "query_path": path_of(query), "gateway": gateway, "gateways": gateways,
        "range": rng, "presets": list(PRESETS_MS), "found": found, "table": table, "numeric": numeric,
        "params": _params(gateway, rng), "gateway_params": _params(gateway, None),
        "operators": sorted({r.operator for r in found.rows})})


def api_query(request: Request) -> Response:
    """The charts' data: per numeric variable, one series per group over the instances' ends."""
    query, gateway, rng = _chosen(request)
    with reader_of(request).query() as q:
        several = gateway is None and len(instances.gateways_of(q, query)) > 1
        found = instances.read_rows(q, query, gateway, rng.start_ms, rng.end_ms, instances.CHART_ROWS)
    return JSONResponse({"query": query, "gateway": gateway, "start_ms": rng.start_ms, "end_ms": rng.end_ms,
                         "range": rng.label, **instances.chart_data(found, per_gateway=several)})


def export_query(request: Request) -> Response:
    """``/export/queries/<query>.csv``: the page's rows (its gateway and range), newest instance first, one
    line per row: gateway, the instance's bounds, its operator, then the query's variables as N-Triples."""
    query, gateway, rng = _chosen(request)
    with reader_of(request).query() as q:
        found = instances.read_rows(q, query, gateway, rng.start_ms, rng.end_ms, instances.CSV_ROWS)
    safe_name = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in query)[:80] or "query"
    return export.csv_response(instances.csv_table(found, viewer_zone(request)), f"edgewave-{safe_name}.csv")
