"""The alarm routes: the list (with its live stream), one alarm with its evidence, acknowledge and clear.

Pages:   GET /alarms (filters: gateway, pattern, since=1h|24h|7d|all, state=open|all), GET /alarms/{id},
         GET /matches/{event_id} (one match's evidence)
JSON:    GET /api/alarms (the same filters), GET /api/alarms/stream (server-sent events: each changed alarm)
CSV:     GET /export/alarms.csv (the same filters; times in the viewer's zone, ``tz``)
Operator: POST /alarms/{id}/ack (comment), POST /alarms/{id}/clear
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict
from typing import Any, AsyncIterator
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from edgewave.shared import clock

from . import export
from .alarms import ACKNOWLEDGED, ACTIVE, CLEARED, Alarm, AlarmError, AlarmStore
from .auth import OPERATOR, SessionWatch, current_user, form_for
from .evidence import evidence_of
from .history import History
from .rendering import render
from .viewfmt import Formatter, viewer_zone

log = logging.getLogger("edgewave.cloud.dashboard.alarms")

SINCE_MS = {"1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000, "all": None}
WAIT_S = 0.1
HEARTBEAT_S = 15.0


def store(request: Request) -> AlarmStore:
    return request.app.state.alarms


def _filters(request: Request) -> dict[str, Any]:
    p = request.query_params
    since = p.get("since") or "24h"
    if since not in SINCE_MS:
        raise HTTPException(400, f"since must be one of {', '.join(SINCE_MS)}")
    state = p.get("state") or "open"
    if state not in ("open", "all"):
        raise HTTPException(400, "state must be open or all")
    return {"gateway": p.get("gateway") or None, "pattern": p.get("pattern") or None, "since": since, "state": state}


def _list_args(f: dict[str, Any]) -> dict[str, Any]:
    span = SINCE_MS[f["since"]]
    return {"gateway": f["gateway"], "pattern": f["pattern"],
            "since_ms": None if span is None else clock.now_ms() - span,
            "states": (ACTIVE, ACKNOWLEDGED) if f["state"] == "open" else (ACTIVE, ACKNOWLEDGED, CLEARED)}


def alarms_page(request: Request) -> Response:
    f = _filters(request)
    s = store(request)
    rev = s.rev
    rows = s.list(**_list_args(f))
    gateways, patterns = s.choices()
    query = urlencode({k: v for k, v in f.items() if v})
    view = _view(request)
    said = {a.id: _said(s, a, view) for a in rows}
    return render(request, "alarms.html", {"nav": "alarms", "alarms": rows, "said": said, "chosen": f,
                                           "gateways": gateways,
                                           "patterns": patterns, "rev": rev, "filter_params": query,
                                           "since_choices": list(SINCE_MS)})


def export_alarms(request: Request) -> Response:
    """``/export/alarms.csv``: the alarms the page shows for the same filters, times in the viewer's zone."""
    rows = store(request).list(**_list_args(_filters(request)))
    return export.csv_response(export.alarms_table(rows, viewer_zone(request)), "edgewave-alarms.csv")


def api_alarms(request: Request) -> Response:
    f = _filters(request)
    view, s = _view(request), store(request)
    return JSONResponse({"rev": s.rev, "alarms": [_alarm_json(a, view, s) for a in s.list(**_list_args(f))]})


async def alarms_stream(request: Request) -> Response:
    """Each alarm that changes after ``after`` (the revision the page was rendered at), as an SSE ``alarm`` message."""
    f = _filters(request)
    s = store(request)
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    try:
        seen = int(raw) if raw else s.rev
    except ValueError as exc:
        raise HTTPException(400, "after / Last-Event-ID must be an alarm revision") from exc
    args = _list_args(f)
    args.pop("since_ms")      # an alarm that changes now is within any "since"
    view = _view(request)

    async def messages() -> AsyncIterator[str]:
        nonlocal seen
        yield "retry: 2000\n\n"
        quiet = time.monotonic()
        session = SessionWatch(request)
        while not await request.is_disconnected() and not await session.ended():
            if s.rev > seen:
                rev = s.rev
                changed = await run_in_threadpool(lambda: s.list(after_rev=seen, **args))
                for alarm in reversed(changed):
                    data = json.dumps(_alarm_json(alarm, view, s), ensure_ascii=False, separators=(",", ":"))
                    yield f"id: {rev}\nevent: alarm\ndata: {data}\n\n"
                seen = rev
                quiet = time.monotonic()
            elif time.monotonic() - quiet > HEARTBEAT_S:
                yield ": keep-alive\n\n"
                quiet = time.monotonic()
            await asyncio.sleep(WAIT_S)

    return StreamingResponse(messages(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _view(request: Request) -> Formatter:
    return Formatter(viewer_zone(request), names=request.app.state.gateway_terms)


def _said(s: AlarmStore, alarm: Alarm, view: Formatter) -> str | None:
    """What the alarm's newest match says to people (its pattern's message), while it is kept."""
    found = s.match(alarm.last_event) if alarm.last_event else None
    if found is None:
        return None
    item = found[1]
    return view.naming(alarm.gateway).message(alarm.pattern, item.get("bindings") or [], item.get("triples") or [],
                                              view.zone)


def _alarm_json(alarm: Alarm, view: Formatter, s: AlarmStore) -> dict[str, Any]:
    """An alarm for the page's script: its columns, its title and key as people read them, and
    what its newest match says."""
    naming = view.naming(alarm.gateway)
    shown = [{"variable": variable, **asdict(naming.term(value, view.zone))} if value is not None
             else {"variable": variable, "text": "–", "full": ""} for variable, value in alarm.key]
    return {**alarm.as_json(), "title": naming.title(alarm.pattern), "severity": naming.severity(alarm.pattern),
            "shown_key": shown, "message": _said(s, alarm, view)}


def _alarm(request: Request) -> Alarm:
    try:
        alarm_id = int(request.path_params["alarm_id"])
    except ValueError as exc:
        raise HTTPException(404, "no such alarm") from exc
    alarm = store(request).get(alarm_id)
    if alarm is None:
        raise HTTPException(404, f"no alarm {alarm_id}")
    return alarm


def alarm_page(request: Request, error: str | None = None, status_code: int = 200) -> Response:
    alarm = _alarm(request)
    evidence = [evidence_of(item) for item in store(request).evidence(alarm.id)]
    notifications = request.app.state.notifier.for_alarm(alarm.id)
    return render(request, "alarm.html", {"nav": "alarms", "a": alarm, "evidence": evidence, "error": error,
                                          "notifications": notifications}, status_code)


def match_page(request: Request) -> Response:
    """One match's evidence: from its alarm while the dashboard keeps it, else from the Parquet history
    (``?at=`` the match time, when the link knows it, narrows the files read)."""
    event_id = request.path_params["event_id"]
    found = store(request).match(event_id)
    alarm_id, item, source = None, None, "alarm"
    if found is not None:
        alarm_id, item = found
    else:
        try:
            at = int(request.query_params["at"]) if request.query_params.get("at") else None
        except ValueError as exc:
            raise HTTPException(400, "at must be the match time in milliseconds since the epoch") from exc
        history: History = request.app.state.history
        item, source = history.event(event_id, at), "history"
    if item is None:
        raise HTTPException(404, "no such match, neither among the alarms' newest matches nor in the Parquet "
                                 "history (the Spark job writes it there seconds after ingest)")
    return render(request, "match.html", {"nav": "alarms", "e": evidence_of(item), "alarm_id": alarm_id,
                                          "item": item, "source": source})


async def _change(request: Request, action: str) -> Response:
    form = await form_for(request, OPERATOR)
    alarm = _alarm(request)
    user = current_user(request)
    name = user.name if user else ""
    try:
        if action == "ack":
            changed = await run_in_threadpool(store(request).acknowledge, alarm.id, name, str(form.get("comment") or ""))
        else:
            changed = await run_in_threadpool(store(request).clear, alarm.id, name)
    except AlarmError as exc:
        log.warning("dashboard alarm refused user=%s id=%d action=%s reason=%r", name, alarm.id, action, str(exc))
        return alarm_page(request, str(exc), 409)
    log.info("dashboard alarm user=%s id=%d action=%s state=%s gateway=%s pattern=%s", name, changed.id, action,
             changed.state, changed.gateway, changed.pattern)
    return RedirectResponse(f"/alarms/{changed.id}", status_code=303)


async def acknowledge(request: Request) -> Response:
    return await _change(request, "ack")


async def clear(request: Request) -> Response:
    return await _change(request, "clear")
