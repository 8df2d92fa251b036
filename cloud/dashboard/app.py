"""The dashboard's routes: pages (server-rendered Jinja2), htmx fragments, JSON for the chart, CSV exports.

Pages:      GET /login, POST /login, POST /logout, GET / (overview), GET /live, GET /gateways, GET /gateways/{gw}
Fragments:  GET /overview/tables, GET /gateways/table (htmx refreshes them in place)
JSON:       GET /api/matches, /api/overview, /api/gateways, /api/gateways/{gw}/history, /api/live
Events:     GET /api/live/stream (server-sent events: live matches with their evidence)
CSV:        GET /export/{name}.csv (matches, patterns, bindings, significant, delays, gateways),
            GET /export/gateways/{gw}/history.csv, GET /export/alarms.csv (alarm_pages.py)
Operator:   POST /gateways/{gw}/push (a config document, validated, signed and pushed)
Metrics:    GET /metrics (Prometheus' text format, metrics.py): a session, or the bearer token in
            ``dashboard.metrics_token_file``
Alarms, configuration and per-instance query results: see alarm_pages.py, config_pages.py and
query_pages.py.

Everything but /login and /static needs a session: pages redirect to the login
page, the API and exports answer 401. Reads run in Starlette's thread pool (sync
endpoints), each with its own read-only connection. The dashboard writes only its
own state file (alarms, through the follower and the operators' forms) and, when
an operator pushes, push-config's record of the push.
"""
from __future__ import annotations

import contextlib
import hmac
import logging
import time
from dataclasses import asdict
from typing import Any, AsyncIterator
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from edgewave.cloud.settings import CloudSettings, SettingsError
from edgewave.shared import clock
from edgewave.shared.secret_files import read_secret

from . import alarm_pages, config_pages, export, live, metrics, queries, query_pages
from .alarms import AlarmStore
from .auth import (OPERATOR, LoginLimiter, Users, client_address, csrf_ok, current_user, end_session, form_for,
                   resolve_user, start_session)
from .follower import FeedFollower
from .gateway_terms import GatewayTerms
from .history import History
from .notify import Notifier
from .sessions import SessionStore
from .bucketing import PRESETS_MS, TimeRange, series
from .rendering import HERE, reader_of, render, requested_range
from .viewfmt import viewer_zone

log = logging.getLogger("edgewave.cloud.dashboard")

SESSION_COOKIE = "edgewave_session"
PUBLIC_PREFIXES = ("/login", "/static/")
METRICS_PATH = "/metrics"

CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")

def _wants_json(request: Request) -> bool:
    path = request.url.path
    return path.startswith("/api/") or path.startswith("/export/")


def _scraper(request: Request) -> bool:
    """Whether the request carries the metrics token (a Prometheus has no session)."""
    token: str | None = request.app.state.metrics_token
    sent = request.headers.get("authorization", "")
    if token is None or not sent.startswith("Bearer "):
        return False
    return hmac.compare_digest(sent[len("Bearer "):].strip().encode(), token.encode())


class LoginRequired(BaseHTTPMiddleware):
    """No page, fragment, API or export without a session: pages redirect to /login, the rest get 401."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if path.startswith(PUBLIC_PREFIXES):
            return await call_next(request)
        if path == METRICS_PATH and _scraper(request):
            return await call_next(request)
        if await run_in_threadpool(resolve_user, request) is None:
            if path == METRICS_PATH:
                return PlainTextResponse("log in first, or send the metrics token", status_code=401,
                                         headers={"WWW-Authenticate": "Bearer"})
            if _wants_json(request):
                return JSONResponse({"error": "log in first"}, status_code=401)
            if request.headers.get("hx-request") or request.method != "GET":
                return PlainTextResponse("log in first", status_code=401, headers={"HX-Redirect": "/login"})
            target = path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
        return await call_next(request)


class SecurityHeaders(BaseHTTPMiddleware):
    """A strict Content-Security-Policy (scripts only from /static), no framing, no caching of pages."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.monotonic()
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        if not request.url.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"
        log.debug("request method=%s path=%s status=%d ms=%.1f", request.method, request.url.path,
                  response.status_code, (time.monotonic() - started) * 1000)
        return response


# -- helpers ---------------------------------------------------------------------------------

def _settings(request: Request) -> CloudSettings:
    return request.app.state.settings


def _range_params(rng: TimeRange) -> str:
    return urlencode(rng.query())


def _gateways(request: Request, q: queries.Query) -> list[queries.GatewayRow]:
    d = _settings(request).dashboard
    return queries.gateway_rows(q, clock.now_ms(), d.offline_after_s, d.lagging_after_s)


def _chart(rng: TimeRange, q: queries.Query) -> dict[str, Any]:
    """The chart's data as uPlot takes it: x in seconds, one array of counts per pattern."""
    data = series(rng, queries.match_series(q, rng))
    return {"start_ms": rng.start_ms, "end_ms": rng.end_ms, "bucket_ms": rng.bucket_ms, "range": rng.label,
            "x": [start // 1000 for start in rng.bucket_starts], "series": data,
            "totals": {pattern: sum(values) for pattern, values in data.items()}}


def _overview(request: Request, rng: TimeRange, q: queries.Query) -> dict[str, Any]:
    patterns = queries.pattern_rows(q, rng)
    gateways = _gateways(request, q)
    total = sum(p.matches for p in patterns)
    previous = sum(p.previous for p in patterns)
    return {"range": rng, "range_params": _range_params(rng), "patterns": patterns, "total": total,
            "previous_total": previous,
            "change_pct": None if previous == 0 else 100.0 * (total - previous) / previous,
            "bindings": queries.top_bindings(q),
            "significant": queries.significant_by_property(q, rng.start_ms, rng.end_ms),
            "delays": queries.delay_summary(q, rng.start_ms, rng.end_ms),
            "uplink": sorted(gateways, key=lambda g: g.gateway),
            "attention": [g for g in gateways if g.attention]}


# -- login -----------------------------------------------------------------------------------

def _safe_next(target: str | None) -> str:
    """Only a path on this site (never //host or a scheme): no open redirect after login."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


async def login_page(request: Request) -> Response:
    if await run_in_threadpool(resolve_user, request) is not None:
        return RedirectResponse(_safe_next(request.query_params.get("next")), status_code=303)
    return render(request, "login.html", {"next": _safe_next(request.query_params.get("next")), "error": None})


async def login(request: Request) -> Response:
    form = await request.form()
    name = str(form.get("username") or "")[:200]
    password = str(form.get("password") or "")[:1000]
    target = _safe_next(str(form.get("next") or ""))
    address = client_address(request)

    def again(error: str, status: int, headers: dict[str, str] | None = None) -> Response:
        response = render(request, "login.html", {"next": target, "error": error, "username": name}, status)
        response.headers.update(headers or {})
        return response

    if not csrf_ok(request, form):
        log.warning("dashboard login refused reason=csrf user=%s client=%s", name, address)
        return again("The form's security token is missing or stale: try again.", 403)
    limiter: LoginLimiter = request.app.state.limiter
    wait = limiter.attempt(name, address)      # counted as failed until verified good
    if wait is not None:
        log.warning("dashboard login refused reason=rate_limited user=%s client=%s retry_after_s=%.0f",
                    name, address, wait)
        return again(f"Too many failed logins. Try again in {max(1, round(wait))} s.", 429,
                     {"Retry-After": str(max(1, round(wait)))})
    users: Users = request.app.state.users
    user = await run_in_threadpool(users.verify, name, password)
    if user is None:
        log.warning("dashboard login failed user=%s client=%s failures=%d", name, address, limiter.failures(name))
        return again("Wrong user name or password.", 401)
    limiter.succeeded(name, address)
    await run_in_threadpool(start_session, request, user)
    log.info("dashboard login user=%s role=%s client=%s", user.name, user.role, address)
    return RedirectResponse(target, status_code=303)


async def logout(request: Request) -> Response:
    form = await request.form()
    if not csrf_ok(request, form):
        raise HTTPException(403, "the form's security token is missing or stale: reload the page and try again")
    user = current_user(request)
    await run_in_threadpool(end_session, request)
    log.info("dashboard logout user=%s", user.name if user else "")
    return RedirectResponse("/login", status_code=303)


# -- overview --------------------------------------------------------------------------------

def overview_page(request: Request) -> Response:
    rng = requested_range(request)
    with reader_of(request).query() as q:
        context = _overview(request, rng, q)
    return render(request, "overview.html", {**context, "nav": "overview", "presets": list(PRESETS_MS)})


def overview_tables(request: Request) -> Response:
    rng = requested_range(request)
    with reader_of(request).query() as q:
        context = _overview(request, rng, q)
    return render(request, "_overview_tables.html", context)


def api_matches(request: Request) -> Response:
    rng = requested_range(request)
    with reader_of(request).query() as q:
        return JSONResponse(_chart(rng, q))


def api_overview(request: Request) -> Response:
    rng = requested_range(request)
    with reader_of(request).query() as q:
        ctx = _overview(request, rng, q)
        chart = _chart(rng, q)
    return JSONResponse({
        "range": {"start_ms": rng.start_ms, "end_ms": rng.end_ms, "bucket_ms": rng.bucket_ms, "label": rng.label},
        "total": ctx["total"], "previous_total": ctx["previous_total"], "change_pct": ctx["change_pct"],
        "patterns": [{"pattern": p.pattern, "matches": p.matches, "previous": p.previous} for p in ctx["patterns"]],
        "bindings": [dict(zip(("pattern", "variable", "value", "count", "rank"), b)) for b in ctx["bindings"]],
        "significant": [dict(zip(("property", "count", "sensors"), s)) for s in ctx["significant"]],
        "delays": [asdict(d) for d in ctx["delays"]],
        "uplink": [{"gateway": g.gateway, "bytes_in": g.bytes_in, "bytes_forwarded": g.bytes_forwarded,
                    "bytes_saved": g.bytes_saved} for g in ctx["uplink"]],
        "chart": chart,
    })


def metrics_page(request: Request) -> Response:
    with reader_of(request).query() as q:
        state = request.app.state
        body = metrics.exposition(q, _gateways(request, q), state.alarms, state.notifier, state.live_streams)
    return Response(body, media_type=metrics.CONTENT_TYPE)


def live_page(request: Request) -> Response:
    """The live stream, or with a time range the events in it (from the live feed and the Parquet history)."""
    rng = live.chosen_range(request)
    with reader_of(request).query() as q:
        patterns = [p for (p,) in q.rows("SELECT DISTINCT pattern FROM binding_values ORDER BY 1")]
        gateways = [g for (g,) in q.rows("SELECT gateway FROM gateways ORDER BY 1")]
    chosen = {"gateway": request.query_params.get("gateway") or "",
              "pattern": request.query_params.get("pattern") or ""}
    time_params = {} if rng is None else rng.query()
    found = None if rng is None else live.rows_in_range(request, rng, live.RANGE_ROWS)
    return render(request, "live.html", {
        "nav": "live", "patterns": patterns, "gateways": gateways, "chosen": chosen, "range": rng,
        "presets": list(PRESETS_MS), "found": found, "history": request.app.state.history,
        "stream_params": urlencode({k: v for k, v in chosen.items() if v}),
        "filter_params": urlencode({**{k: v for k, v in chosen.items() if v}, **time_params})})


# -- gateways --------------------------------------------------------------------------------

def _gateway_json(g: queries.GatewayRow) -> dict[str, Any]:
    return {"gateway": g.gateway, "health": g.health, "reason": g.reason, "state": g.state,
            "last_seen_ms": g.last_seen_ms, "config_version": g.config_version, "counters": g.counters,
            "outbox_depth": g.outbox_depth, "oldest_unsent_ms": g.oldest_unsent_ms, "drops": g.drops,
            "bytes_in": g.bytes_in, "bytes_forwarded": g.bytes_forwarded, "bytes_saved": g.bytes_saved}


def gateways_page(request: Request) -> Response:
    with reader_of(request).query() as q:
        rows = _gateways(request, q)
    return render(request, "gateways.html", {"gateways": rows, "nav": "gateways",
                                             "offline_after_s": _settings(request).dashboard.offline_after_s})


def gateways_table(request: Request) -> Response:
    with reader_of(request).query() as q:
        rows = _gateways(request, q)
    return render(request, "_gateways_table.html", {"gateways": rows})


def api_gateways(request: Request) -> Response:
    with reader_of(request).query() as q:
        rows = _gateways(request, q)
    return JSONResponse({"gateways": [_gateway_json(g) for g in rows]})


def _one_gateway(request: Request, q: queries.Query) -> queries.GatewayRow:
    d = _settings(request).dashboard
    row = queries.gateway_row(q, request.path_params["gateway"], clock.now_ms(), d.offline_after_s, d.lagging_after_s)
    if row is None:
        raise HTTPException(404, f"no gateway {request.path_params['gateway']!r} in the registry")
    return row


def _before(request: Request) -> int | None:
    before = request.query_params.get("before")
    try:
        return int(before) if before else None
    except ValueError as exc:
        raise HTTPException(400, "before must be milliseconds since the epoch") from exc


def _has_key(settings: CloudSettings, gateway: str) -> bool:
    """Whether push can sign for ``gateway``: a key in cloud.yaml or a provisioned one."""
    try:
        settings.gateway_key(gateway)
    except (SettingsError, OSError):
        return False
    return True


def gateway_page(request: Request) -> Response:
    push_error = None
    with reader_of(request).query() as q:
        row = _one_gateway(request, q)
        history = queries.status_history(q, row.gateway, before_ms=_before(request))
        pushes = queries.config_pushes(q, row.gateway)
        if request.query_params.get("failed"):     # the reason as recorded, never text from the address
            failures = queries.push_failures(q, row.gateway, 1)
            push_error = f"Not pushed: {failures[0].reason}" if failures else "Not pushed: see the table above"
    return render(request, "gateway.html", {"g": row, "history": history, "pushes": pushes, "nav": "gateways",
                                            "has_key": _has_key(_settings(request), row.gateway),
                                            "push_error": push_error})


def api_gateway_history(request: Request) -> Response:
    with reader_of(request).query() as q:
        row = _one_gateway(request, q)
        history = queries.status_history(q, row.gateway, before_ms=_before(request))
    return JSONResponse({"gateway": row.gateway, "history": [
        {"received_ms": h.received_ms, "state": h.state, "config_version": h.config_version, "status": h.status}
        for h in history]})


async def push_config_form(request: Request) -> Response:
    """Operator only: validate an uploaded config document, then sign and push it with push-config's code."""
    form = await form_for(request, OPERATOR)
    user = current_user(request)
    gateway = request.path_params["gateway"]
    settings = _settings(request)
    upload = form.get("document")
    text = await upload.read() if hasattr(upload, "read") else str(upload or "").encode()
    fmt = str(form.get("format") or "trig")
    error = await run_in_threadpool(config_pages.validate_for_push, settings, [gateway], text, fmt)
    if error is not None:
        log.warning("dashboard push refused user=%s gateway=%s reason=%r", user.name if user else "", gateway, error)
        with reader_of(request).query() as q:
            row = _one_gateway(request, q)
            history = queries.status_history(q, row.gateway)
            pushes = queries.config_pushes(q, row.gateway)
        return render(request, "gateway.html", {"g": row, "history": history, "pushes": pushes, "nav": "gateways",
                                                "has_key": _has_key(settings, gateway), "push_error": error}, 400)
    job = config_pages.start_push(settings, [gateway], text, fmt, user.name if user else "")
    _, failed = await config_pages.await_publishes(job)
    return RedirectResponse(f"/gateways/{quote(gateway)}?{'failed' if failed else 'pushed'}=1", status_code=303)


# -- exports ---------------------------------------------------------------------------------

def export_csv(request: Request) -> Response:
    name = request.path_params["name"]
    make = export.EXPORTS.get(name)
    if make is None:
        raise HTTPException(404, f"no export {name!r} (one of {', '.join(export.EXPORTS)})")
    rng = requested_range(request)
    with reader_of(request).query() as q:
        table = make(q, rng, viewer_zone(request), gateways=_gateways(request, q) if name == "gateways" else [])
    return export.csv_response(table, f"edgewave-{name}.csv")


def export_history(request: Request) -> Response:
    with reader_of(request).query() as q:
        row = _one_gateway(request, q)
        history = queries.status_history(q, row.gateway, limit=10_000, before_ms=_before(request))
    return export.csv_response(export.history_table(history, viewer_zone(request)),
                               f"edgewave-{row.gateway}-history.csv")


# -- errors ----------------------------------------------------------------------------------

async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _wants_json(request):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return render(request, "error.html", {"status": exc.status_code, "message": exc.detail}, exc.status_code)


async def busy_error(request: Request, exc: Exception) -> Response:
    log.warning("dashboard query_timeout path=%s error=%r", request.url.path, str(exc))
    message = "The database is busy; this page gave up rather than slow down ingest and the Spark job. Try again."
    if _wants_json(request):
        return JSONResponse({"error": message}, status_code=503, headers={"Retry-After": "5"})
    return render(request, "error.html", {"status": 503, "message": message}, 503)


@contextlib.asynccontextmanager
async def _follow_the_feed(app: Starlette) -> AsyncIterator[None]:
    """While the server runs, the follower folds the live feed into alarms (see follower.py) and the
    notifier sends what their opening queued (notify.py)."""
    app.state.notifier.start()
    app.state.follower.start()
    try:
        yield
    finally:
        app.state.follower.stop()
        app.state.notifier.stop()
        app.state.alarms.close()
        app.state.notifier.close()
        app.state.sessions.close()


def _metrics_token(path: str | None) -> str | None:
    """The scrapers' bearer token; None (a session needed) when no file is configured."""
    if not path:
        return None
    try:
        return read_secret(path)
    except (OSError, ValueError) as exc:
        raise SettingsError(f"dashboard.metrics_token_file: {exc}") from exc


def create_app(settings: CloudSettings, secret_key: str) -> Starlette:
    """The dashboard over ``settings.database``; ``secret_key`` signs the session cookies."""
    d = settings.dashboard
    routes = [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", overview_page),
        Route("/overview/tables", overview_tables),
        Route("/live", live_page),
        Route("/gateways", gateways_page),
        Route("/gateways/table", gateways_table),
        Route("/gateways/{gateway}", gateway_page),
        Route("/gateways/{gateway}/push", push_config_form, methods=["POST"]),
        Route("/gateways/{gateway}/config", config_pages.gateway_config_page),
        Route("/gateways/{gateway}/config/diff", config_pages.diff_page),
        Route("/gateways/{gateway}/config/rollback", config_pages.rollback, methods=["POST"]),
        Route("/gateways/{gateway}/config/parts", config_pages.parts_page),
        Route("/gateways/{gateway}/config/parts/diff", config_pages.parts_diff, methods=["POST"]),
        Route("/gateways/{gateway}/config/parts/push", config_pages.parts_push, methods=["POST"]),
        Route("/config", config_pages.config_page),
        Route("/config/push", config_pages.push_form, methods=["POST"]),
        Route("/config/validate", config_pages.validate_parts, methods=["POST"]),
        Route("/alarms", alarm_pages.alarms_page),
        Route("/export/alarms.csv", alarm_pages.export_alarms),
        Route("/alarms/{alarm_id}", alarm_pages.alarm_page),
        Route("/alarms/{alarm_id}/ack", alarm_pages.acknowledge, methods=["POST"]),
        Route("/alarms/{alarm_id}/clear", alarm_pages.clear, methods=["POST"]),
        Route("/matches/{event_id:path}", alarm_pages.match_page),
        Route("/queries", query_pages.queries_page),
        Route("/queries/{query:path}", query_pages.query_page),
        Route("/api/queries/{query:path}", query_pages.api_query),
        Route("/export/queries/{query:path}.csv", query_pages.export_query),
        Route("/api/alarms", alarm_pages.api_alarms),
        Route("/api/alarms/stream", alarm_pages.alarms_stream),
        Route("/api/matches", api_matches),
        Route("/api/overview", api_overview),
        Route(METRICS_PATH, metrics_page),
        Route("/api/gateways", api_gateways),
        Route("/api/gateways/{gateway}/history", api_gateway_history),
        Route("/api/live", live.live_recent),
        Route("/api/live/stream", live.live_stream),
        Route("/export/gateways/{gateway}/history.csv", export_history),
        Route("/export/live.csv", live.export_live),
        Route("/export/{name}.csv", export_csv),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(SessionMiddleware, secret_key=secret_key, session_cookie=SESSION_COOKIE,
                   max_age=d.session_max_age_s, same_site="lax", https_only=d.secure_cookies),
        Middleware(LoginRequired),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=_follow_the_feed,
                    exception_handlers={HTTPException: http_error, queries.QueryTimeout: busy_error})
    app.state.settings = settings
    app.state.reader = queries.Reader(settings.database, d.query_timeout_s)
    app.state.gateway_terms = GatewayTerms(app.state.reader)
    app.state.users = Users(d)
    app.state.sessions = SessionStore(settings.dashboard_state_path, d.session_max_age_s)
    ended = app.state.sessions.end_stale(app.state.users.credentials())
    if ended:
        log.info("dashboard sessions ended=%d reason='user removed or password changed'", ended)
    app.state.live_streams = 0
    app.state.notifier = Notifier(settings, settings.dashboard_state_path, app.state.gateway_terms)
    app.state.alarms = AlarmStore(settings.dashboard_state_path, d.alarm_keys, on_open=app.state.notifier.on_open)
    app.state.history = History(settings.spark.history)
    app.state.follower = FeedFollower(settings.live_feed_path, app.state.alarms)
    app.state.metrics_token = _metrics_token(d.metrics_token_file)
    app.state.limiter = LoginLimiter(d.login_failures_per_user, d.login_failures_per_address, d.login_window_s)
    return app
