"""Live matches and significant observations over server-sent events, from ingest's live feed.

Ingest appends every event it lands to the live feed (cloud/live_feed.py, its own
small SQLite file) right after the group commit, so an operator sees a match
within about a second of the cloud having it, long before the Spark job's next
micro-batch. ``GET /api/live/stream`` follows the feed by ``seq``: it first sends
the newest ``backlog`` events (read from the feed, read-only), then what the
dashboard's follower (follower.py, the one reader of the feed) has read since,
checking every POLL_S, each as an SSE message whose ``id`` is the seq, so a
browser that reconnects (EventSource does so by itself, sending
``Last-Event-ID``) gets exactly what it missed while the feed still holds it.
Each event carries its evidence: the bindings, the window, the triples that made
it and, when the event says so, which of them were entailed (``evidence``).

With a time range (``range=1h|24h|7d`` or ``start``/``end``) the live page lists the
events whose match time falls in it instead: the live feed's, and the Parquet
history's for what the feed no longer holds (history.py). ``/export/live.csv`` is the
page's table, with the same filters, as CSV.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from edgewave.cloud.live_feed import read_feed

from . import export
from .alarms import match_time
from .auth import SessionWatch
from .bucketing import RangeError, TimeRange, parse_range
from .evidence import evidence_of
from .history import History
from .viewfmt import Formatter, viewer_zone

log = logging.getLogger("edgewave.cloud.dashboard.live")

POLL_S = 0.1
HEARTBEAT_S = 15.0
MAX_BACKLOG = 200
BATCH = 200
MAX_STREAMS = 200
"""Open streams at most (each checks the follower's buffer in memory); more get 503 and their browser retries."""
RANGE_ROWS = 500
"""Events a range lists on the page (newest first); its CSV has up to CSV_ROWS."""
CSV_ROWS = 100_000


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise HTTPException(400, f"{name} must be an integer") from exc
    return max(lo, min(hi, value))


def _filters(request: Request) -> dict[str, str | None]:
    return {"gateway": request.query_params.get("gateway") or None,
            "pattern": request.query_params.get("pattern") or None}


def _wanted(item: dict[str, Any], filters: dict[str, str | None]) -> bool:
    return all(value is None or item.get(name) == value for name, value in filters.items())


def _message(item: dict[str, Any], view: Formatter) -> str:
    """One SSE message; the event name is the kind (only the two known ones: a name is not escaped).
    ``shown`` is the event as people read it (message, title, severity, bindings; terms.py)."""
    naming = view.naming(item.get("gateway"))
    data = json.dumps({**item, "shown": naming.event(item, view.zone),
                       "evidence": evidence_of(item).as_json(naming, view.zone)},
                      ensure_ascii=False, separators=(",", ":"))
    kind = item["kind"] if item["kind"] in ("match", "significant") else "event"
    return f"id: {int(item['seq'])}\nevent: {kind}\ndata: {data}\n\n"


async def live_recent(request: Request) -> Response:
    """GET /api/live?limit=50&gateway=&pattern=: the newest events, newest first (JSON)."""
    path = request.app.state.settings.live_feed_path
    limit = _int_param(request, "limit", 50, 1, MAX_BACKLOG)
    items = await run_in_threadpool(read_feed, path, 0, limit, newest_first=True, **_filters(request))
    return JSONResponse({"events": items})


async def live_stream(request: Request) -> Response:
    """GET /api/live/stream?backlog=50&after=&gateway=&pattern=: server-sent events, one per feed row."""
    state = request.app.state
    if state.live_streams >= MAX_STREAMS:
        return Response("too many live streams open; retrying", status_code=503, headers={"Retry-After": "5"})
    path = state.settings.live_feed_path
    follower = state.follower
    filters = _filters(request)
    resume = request.headers.get("last-event-id") or request.query_params.get("after")
    try:
        after = int(resume) if resume else None
    except ValueError as exc:
        raise HTTPException(400, "after / Last-Event-ID must be a feed seq") from exc
    backlog = _int_param(request, "backlog", 50, 0, MAX_BACKLOG)
    view = Formatter(viewer_zone(request), names=state.gateway_terms)

    async def messages() -> AsyncIterator[str]:
        nonlocal after
        state.live_streams += 1
        try:
            yield "retry: 2000\n\n"
            if after is None:
                top = await run_in_threadpool(read_feed, path, 0, 1, newest_first=True)
                newest = await run_in_threadpool(read_feed, path, 0, max(backlog, 1), newest_first=True, **filters)
                for item in reversed(newest[:backlog]):
                    yield _message(item, view)
                after = max([row["seq"] for row in top[:1] + newest[:1]], default=0)
            last_sent = time.monotonic()
            session = SessionWatch(request)
            while not await request.is_disconnected() and not await session.ended():
                items = follower.items_after(after, BATCH)
                if items is None:     # further back than the follower's buffer: from the file
                    items = await run_in_threadpool(read_feed, path, after, BATCH)
                sent = False
                for item in items:
                    after = item["seq"]
                    if _wanted(item, filters):
                        sent = True
                        yield _message(item, view)
                if sent:
                    last_sent = time.monotonic()
                elif time.monotonic() - last_sent > HEARTBEAT_S:
                    yield ": keep-alive\n\n"
                    last_sent = time.monotonic()
                if len(items) < BATCH:
                    await asyncio.sleep(POLL_S)
        finally:
            state.live_streams -= 1

    return StreamingResponse(messages(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


# -- a time range, and the table as CSV ----------------------------------------------------------

@dataclass
class RangeRows:
    """The events of a range, newest first, and where they came from."""

    items: list[dict[str, Any]]
    truncated: bool
    """more events fall in the range than ``limit``: the oldest are left out"""
    history: str
    """``read``, or why the Parquet history was not: ``not on this machine``"""


def chosen_range(request: Request) -> TimeRange | None:
    """The time range the live page was asked for; None for the live stream."""
    params = {k: v for k, v in request.query_params.items() if k in ("range", "start", "end") and v}
    if not params:
        return None
    try:
        return parse_range(params)
    except RangeError as exc:
        raise HTTPException(400, str(exc)) from exc


def rows_in_range(request: Request, rng: TimeRange, limit: int) -> RangeRows:
    """Events with match time in ``rng`` from the live feed and, for what it no longer holds, the Parquet history."""
    state = request.app.state
    filters = _filters(request)
    feed = read_feed(state.settings.live_feed_path, 0, state.settings.live_feed.max_rows, newest_first=True,
                     **filters)
    known = [item for item in feed if rng.start_ms <= match_time(item) < rng.end_ms]
    history: History = state.history
    if history.readable:
        items = history.events(rng.start_ms, rng.end_ms, limit=limit + 1, known=known, **filters)
        where = "read"
    else:
        items = sorted(known, key=lambda i: (match_time(i), i["id"]), reverse=True)[:limit + 1]
        where = "not on this machine"
    return RangeRows(items[:limit], len(items) > limit, where)


def export_live(request: Request) -> Response:
    """``/export/live.csv``: the live page's table with its filters (gateway, pattern, time range), times in the
    viewer's zone; without a range, the newest events the page shows. ``terms=read``: with each event's
    message and its values as the page shows them, instead of the exact terms."""
    rng = chosen_range(request)
    if rng is None:
        items = read_feed(request.app.state.settings.live_feed_path, 0, MAX_BACKLOG, newest_first=True,
                          **_filters(request))
    else:
        items = rows_in_range(request, rng, CSV_ROWS).items
    zone = viewer_zone(request)
    read = request.query_params.get("terms") == "read"   # else the exact terms, for a spreadsheet or a script
    shown = Formatter(zone, names=request.app.state.gateway_terms).event if read else None
    return export.csv_response(export.live_table(items, zone, shown), "edgewave-live.csv")
