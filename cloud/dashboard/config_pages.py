"""The configuration routes: applied documents, push history, diffs, and (operators) push and rollback.

Pages:    GET /config (every gateway's applied version and newest push; the edit-and-push form),
          GET /gateways/{gw}/config[?version=N] (a document with its patterns highlighted, the push history),
          GET /gateways/{gw}/config/diff?a=N&b=M,
          GET /gateways/{gw}/config/parts[?version=N] (the editor: a document as its parts)
Operator: POST /config/push (a document to one, several or all gateways),
          POST /gateways/{gw}/config/rollback (an earlier version, pushed again as a new version),
          POST /gateways/{gw}/push (a document uploaded as a file; see app.py),
          POST /config/validate (parts, assembled and checked as a push would be: JSON),
          POST /gateways/{gw}/config/parts/diff (parts against the applied version: a fragment),
          POST /gateways/{gw}/config/parts/push (parts, assembled, pushed like any document)

Every push goes through push-config's own code (cloud/publisher.py): the same
validation before anything is published (the check the agent compiles a document
with), the next version, the signature, the retained publish and the wait for
the ack, in a background thread; the history shows it pending until the ack
resolves it. Each gateway's push is its own: one
that cannot be made (no version left for it, no signing key, the publish refused)
is recorded for that gateway and shown on its row with the reason, and the
others go ahead; the page after a push names the gateways it could not reach.
"""
from __future__ import annotations

import logging
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from edgewave.cloud.settings import CloudSettings
from edgewave.shared import clock

from . import config_parts, configs, queries
from .auth import OPERATOR, current_user, form_for
from .highlight import highlight
from .rendering import reader_of, render

log = logging.getLogger("edgewave.cloud.dashboard.config")

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_PARTS_REQUEST_BYTES = MAX_DOCUMENT_BYTES
"""The largest request the parts editor may send (validate, diff, push); the document the parts make must
then fit the agent's own, smaller, document limits."""
FORMATS = ("trig", "turtle")
PUBLISH_WAIT_S = 5.0
"""How long the push form waits for the publishes (not the acks) before it answers, so the page
it redirects to can name the gateways that could not be pushed to."""


def _settings(request: Request) -> CloudSettings:
    return request.app.state.settings


# -- pushing (shared with the upload form in app.py) ------------------------------------------

def validate_for_push(settings: CloudSettings, gateways: list[str], text: bytes, fmt: str) -> str | None:
    """What is wrong with pushing ``text`` to ``gateways``, or None: push-config's validation, so a
    document the agent would refuse to compile is refused here with the agent's own reason."""
    from edgewave.cloud.publisher import InvalidDocument, validate_document
    from edgewave.cloud.settings import SettingsError

    if fmt not in FORMATS:
        return "format must be trig or turtle"
    if not gateways:
        return "choose at least one gateway"
    if not text.strip():
        return "the document is empty"
    if len(text) > MAX_DOCUMENT_BYTES:
        return f"the document is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB"
    try:
        key_errors = []
        for gateway in gateways:
            try:
                settings.gateway_key(gateway)
            except (SettingsError, OSError) as exc:
                key_errors.append(str(exc))
        if len(key_errors) == len(gateways):   # not one can be signed for; else only those fail, the rest go on
            return key_errors[0]
        validate_document(text.decode("utf-8-sig"), fmt)
    except (InvalidDocument, SettingsError) as exc:
        return str(exc)
    except UnicodeDecodeError:
        return "the document is not UTF-8 text"
    return None


class PushThread(threading.Thread):
    """A push in the background; ``published`` is set once every publish is done (or the push failed),
    with ``pushed`` (the gateways published to) and ``failed`` ({gateway: reason}) filled in."""

    def __init__(self, settings: CloudSettings, gateways: list[str], text: bytes, fmt: str, user: str) -> None:
        super().__init__(name=f"push-{','.join(gateways)[:40]}", daemon=True)
        self.settings, self.gateways, self.text, self.fmt, self.user = settings, gateways, text, fmt, user
        self.published = threading.Event()
        self.pushed: list[str] = []
        self.failed: dict[str, str] = {}

    def _published(self, pushed: list[str], failed: list[Any]) -> None:
        self.pushed = list(pushed)
        self.failed = {o.gateway: o.reason for o in failed}
        self.published.set()

    def run(self) -> None:
        try:
            _push(self)
        finally:
            self.published.set()


def start_push(settings: CloudSettings, gateways: list[str], text: bytes, fmt: str, user: str) -> PushThread:
    """push-config's own code path in a background thread: version, record, sign, publish retained, wait for acks."""
    thread = PushThread(settings, gateways, text, fmt, user)
    thread.start()
    return thread


def _push(job: PushThread) -> None:
    from edgewave.cloud.database import open_database
    from edgewave.cloud.publisher import push_config
    from edgewave.cloud.registry import record_push_failure

    user, gateways = job.user, job.gateways
    with tempfile.TemporaryDirectory(prefix="edgewave-push-") as tmp:
        path = Path(tmp) / f"config.{'trig' if job.fmt == 'trig' else 'ttl'}"
        path.write_bytes(job.text)
        try:
            outcomes = push_config(job.settings, gateways, path, fmt=job.fmt, out=lambda line: None,
                                   published=job._published)
        except Exception as exc:  # the broker unreachable, the database busy: recorded for each gateway, shown
            reason = f"not pushed: {type(exc).__name__}: {exc}"
            log.error("dashboard push failed user=%s gateways=%s error=%r", user, ",".join(gateways), str(exc))
            try:
                db = open_database(job.settings.database)
                try:
                    for gateway in gateways:
                        if gateway not in job.pushed:
                            record_push_failure(db, gateway, reason, clock.now_ms())
                finally:
                    db.conn.close()
            except Exception as again:
                log.error("dashboard push failure not recorded error=%r", str(again))
            job.failed = {gw: reason for gw in gateways if gw not in job.pushed}
            return
    for outcome in outcomes:
        log.info("dashboard push user=%s gateway=%s version=%s status=%s reason=%r", user, outcome.gateway,
                 outcome.version, outcome.status, outcome.reason)
    # replaced whole, never changed in place: the request thread may be reading it
    job.failed = {**{o.gateway: o.reason for o in outcomes if o.status in ("failed", "invalid")}, **job.failed}


async def await_publishes(job: PushThread) -> tuple[list[str], list[str]]:
    """(gateways published to, gateways that failed), as far as known within PUBLISH_WAIT_S."""
    await run_in_threadpool(job.published.wait, PUBLISH_WAIT_S)
    failed = sorted(job.failed)
    pushed = [gw for gw in job.gateways if gw not in job.failed]
    return pushed, failed


# -- pages ------------------------------------------------------------------------------------

def _applied_version(q: queries.Query, gateway: str) -> int | None:
    """configs.applied_version, for whatever the registry holds: a stored version that is not a
    number (a row written by hand, or before statuses were checked) reads as unknown."""
    try:
        return configs.applied_version(q, gateway)
    except (TypeError, ValueError, OverflowError):
        return None


def _known_gateways(request: Request, q: queries.Query) -> list[str]:
    """Every gateway the registry knows, and every one cloud.yaml or the fleet has a signing key for."""
    names = {g.gateway for g in queries.gateway_rows(q, clock.now_ms(), 1e9, 1e9)}
    names.update(_settings(request).gateways)
    secrets = _settings(request).fleet.gateway_dir("x").parent
    if secrets.is_dir():
        names.update(p.name for p in secrets.iterdir() if (p / "config.key").is_file())
    return sorted(names)


def _fleet_context(request: Request, q: queries.Query, **extra: Any) -> dict[str, Any]:
    settings = _settings(request)
    latest = configs.latest_pushes(q)
    for failure in queries.push_failures(q):
        push = latest.get(failure.gateway)
        if failure.version is None and (push is None or (push.pushed_ms or 0) <= failure.failed_ms):
            # not pushed at all this time: the row says so, and why, instead of the push before
            latest[failure.gateway] = configs.Push(failure.gateway, "–", "", "", failure.failed_ms,  # type: ignore[arg-type]
                                                   "failed", failure.reason, failure.failed_ms)
    gateways = _known_gateways(request, q)
    rows = [{"gateway": gw, "applied": _applied_version(q, gw), "push": latest.get(gw)} for gw in gateways]
    source = request.query_params.get("from")    # "gw:version": start the editor from that document
    text, fmt = "", "trig"
    if source and ":" in source:
        gw, _, version = source.rpartition(":")
        found = configs.document(q, gw, int(version)) if version.isdigit() else None
        if found:
            text, fmt = found
    elif rows:
        for row in rows:
            found = configs.document(q, row["gateway"], row["applied"]) if row["applied"] else None
            if found:
                text, fmt = found
                break
    return {"nav": "config", "rows": rows, "gateways": gateways, "now_ms": clock.now_ms(),
            "ack_timeout_s": settings.push.ack_timeout_s, "document": text, "format": fmt,
            "chosen": set(request.query_params.getlist("gateway")), **extra}


def config_page(request: Request) -> Response:
    failed = [gw for gw in request.query_params.get("failed", "").split(",") if gw]
    with reader_of(request).query() as q:
        context = _fleet_context(request, q)
        if failed:   # the reasons as recorded (never text from the address)
            reasons = {f.gateway: f.reason for f in queries.push_failures(q)}
            context["push_error"] = "Not pushed to " + "; ".join(
                f"{gw}: {reasons.get(gw, 'see its row below')}" for gw in failed[:20])
    return render(request, "config.html", {**context, "pushed": request.query_params.get("pushed")})


async def push_form(request: Request) -> Response:
    """Operator only: validate a document typed or pasted into the editor and push it to the chosen gateways."""
    form = await form_for(request, OPERATOR)
    user = current_user(request)
    settings = _settings(request)
    text = str(form.get("document") or "").replace("\r\n", "\n").encode()   # a textarea sends CRLF
    fmt = str(form.get("format") or "trig")
    with reader_of(request).query() as q:
        known = _known_gateways(request, q)
    gateways = known if form.get("all") else [str(g) for g in form.getlist("gateway")]
    error = await run_in_threadpool(validate_for_push, settings, gateways, text, fmt)
    if error is not None:
        log.warning("dashboard push refused user=%s gateways=%s reason=%r", user.name if user else "",
                    ",".join(gateways), error)
        with reader_of(request).query() as q:
            context = _fleet_context(request, q)
        context.update(document=text.decode("utf-8", "replace"), format=fmt, chosen=set(gateways), push_error=error)
        return render(request, "config.html", context, 400)
    job = start_push(settings, gateways, text, fmt, user.name if user else "")
    pushed, failed = await await_publishes(job)
    target = f"/config?pushed={quote(','.join(pushed))}" if pushed else "/config?"
    if failed:
        target += f"&failed={quote(','.join(failed))}"
    return RedirectResponse(target, status_code=303)


def _gateway(request: Request, q: queries.Query) -> str:
    gateway = request.path_params["gateway"]
    if gateway not in _known_gateways(request, q):
        raise HTTPException(404, f"no gateway {gateway!r} in the registry")
    return gateway


def gateway_config_page(request: Request) -> Response:
    settings = _settings(request)
    raw = request.query_params.get("version")
    push_error = None
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        applied = _applied_version(q, gateway)
        history = configs.pushes(q, gateway)
        shown = int(raw) if raw and raw.isdigit() else applied
        found = configs.document(q, gateway, shown) if shown is not None else None
        if request.query_params.get("failed"):     # the reason as recorded, never text from the address
            failures = queries.push_failures(q, gateway, 1)
            push_error = f"Not pushed: {failures[0].reason}" if failures else "Not pushed: see the history below"
    patterns: dict[str, str] = {}
    mappings: list[tuple[str, str, str, str]] = []
    parse_error = None
    if found:
        from edgewave.agent.engine.config_check import check_mappings
        from edgewave.shared.configdoc import ConfigRejected, load_config_document
        try:
            doc = load_config_document(found[0], found[1])
            patterns = dict(sorted(doc.patterns.items()))
            mappings = [(m.topic_filter, m.payload_format, m.name, m.stream or "") for m in check_mappings(doc)]
        except ConfigRejected as exc:
            parse_error = exc.reason
    return render(request, "gateway_config.html", {
        "nav": "config", "gateway": gateway, "applied": applied, "shown": shown, "doc": found, "patterns": patterns,
        "mappings": mappings, "parse_error": parse_error, "history": history, "now_ms": clock.now_ms(),
        "ack_timeout_s": settings.push.ack_timeout_s, "rolled": request.query_params.get("rolled"),
        "pushed": bool(request.query_params.get("pushed")), "push_error": push_error})


def diff_page(request: Request) -> Response:
    p = request.query_params
    if not (p.get("a", "").isdigit() and p.get("b", "").isdigit()):
        raise HTTPException(400, "a and b must be version numbers")
    a, b = int(p["a"]), int(p["b"])
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        old, new = configs.document(q, gateway, a), configs.document(q, gateway, b)
        versions = [push.version for push in configs.pushes(q, gateway)]
    if old is None or new is None:
        raise HTTPException(404, f"{gateway} has no pushed version {a if old is None else b}")
    lines = configs.diff_lines(old[0], new[0], f"{gateway} version {a}", f"{gateway} version {b}")
    return render(request, "config_diff.html", {"nav": "config", "gateway": gateway, "a": a, "b": b, "lines": lines,
                                                "versions": versions})


async def rollback(request: Request) -> Response:
    """Operator only: push an earlier version's document again, as the gateway's next version."""
    form = await form_for(request, OPERATOR)
    user = current_user(request)
    raw = str(form.get("version") or "")
    if not raw.isdigit():
        raise HTTPException(400, "version must be a version number")
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        found = configs.document(q, gateway, int(raw))
    if found is None:
        raise HTTPException(404, f"{gateway} has no pushed version {raw}")
    text, fmt = found[0].encode(), found[1]
    error = await run_in_threadpool(validate_for_push, _settings(request), [gateway], text, fmt)
    if error is not None:
        raise HTTPException(400, f"version {raw} cannot be pushed again: {error}")
    log.info("dashboard rollback user=%s gateway=%s to_version=%s", user.name if user else "", gateway, raw)
    start_push(_settings(request), [gateway], text, fmt, user.name if user else "")
    return RedirectResponse(f"/gateways/{quote(gateway)}/config?rolled={raw}", status_code=303)


# -- the editor: a document as its parts ------------------------------------------------------

def _source(q: queries.Query, gateway: str, raw: str | None) -> tuple[int | None, int | None, tuple[str, str] | None]:
    """(applied version, version shown, its (text, format)): ``?version=N``, else the applied document, else
    the newest one pushed."""
    applied = _applied_version(q, gateway)
    if raw and raw.isdigit():
        return applied, int(raw), configs.document(q, gateway, int(raw))
    found = configs.document(q, gateway, applied) if applied is not None else None
    if found is not None:
        return applied, applied, found
    newest = configs.pushes(q, gateway, 1)
    if newest:
        return applied, newest[0].version, configs.document(q, gateway, newest[0].version)
    return applied, None, None


def _parts_context(request: Request, gateway: str, applied: int | None, shown: int | None,
                   found: tuple[str, str] | None, **extra: Any) -> dict[str, Any]:
    from edgewave.shared.configdoc import ConfigRejected

    parts, split_error = config_parts.Parts(), None
    if found is not None:
        try:
            parts = config_parts.split_document(found[0], found[1])
        except ConfigRejected as exc:
            split_error = exc.reason
    context = {"nav": "config", "gateway": gateway, "applied": applied, "shown": shown, "doc": found,
               "parts": parts, "split_error": split_error, "error": None, "gateways": [gateway]}
    context.update(extra)
    user = current_user(request)
    context["editable"] = bool(user and user.may(OPERATOR)) and split_error is None and not parts.unexpressed
    return context


def parts_page(request: Request) -> Response:
    """A document as its parts: each pattern its own editor, then schema, static data and significance rules;
    for an operator, validated as they type, diffed against the applied version and pushed from here."""
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        applied, shown, found = _source(q, gateway, request.query_params.get("version"))
    if request.query_params.get("version") and found is None:
        raise HTTPException(404, f"{gateway} has no pushed version {shown}")
    return render(request, "config_parts.html", _parts_context(request, gateway, applied, shown, found))


def _too_large(request: Request) -> tuple[int, str] | None:
    """(status, why) a parts request is refused before its body is read: no length given (411), or one
    beyond the bound (413); None when it may be read."""
    raw = request.headers.get("content-length", "")
    if not raw.isdigit():
        return 411, "the request must say its length"
    if int(raw) > MAX_PARTS_REQUEST_BYTES:
        return 413, f"the parts are larger than {MAX_PARTS_REQUEST_BYTES // (1024 * 1024)} MiB"
    return None


def check_parts(parts: config_parts.Parts) -> dict[str, Any]:
    """What the agent would say of the document the parts make: {ok, reason, part, index, pattern, field},
    and each pattern's query highlighted (for the editor's preview)."""
    from edgewave.cloud.publisher import InvalidDocument, validate_document

    answer: dict[str, Any] = {"ok": True, "reason": None,
                              "highlighted": [str(highlight(p.query)) for p in parts.patterns]}
    try:
        text = config_parts.assemble(parts)
    except config_parts.PartError as exc:
        answer.update(ok=False, reason=exc.reason, part=exc.part, index=exc.index,
                      pattern=parts.patterns[exc.index].name.strip() if exc.index is not None else None)
        return answer
    try:
        validate_document(text, "trig")          # push-config's validation: the agent's check_config_document
    except InvalidDocument as exc:
        answer.update(ok=False, reason=str(exc), **config_parts.locate(str(exc), parts))
    return answer


async def validate_parts(request: Request) -> Response:
    """Operator only: the parts an editor sends, assembled and checked as a push would check them (JSON)."""
    too_large = _too_large(request)
    if too_large:
        return JSONResponse({"ok": False, "reason": too_large[1], "part": config_parts.DOCUMENT}, too_large[0])
    try:
        form = await form_for(request, OPERATOR)
    except HTTPException as exc:
        return JSONResponse({"ok": False, "error": exc.detail}, exc.status_code)
    try:
        parts = config_parts.parts_from_form(form)
    except config_parts.PartError as exc:
        return JSONResponse({"ok": False, "reason": exc.reason, "part": exc.part}, 400)
    return JSONResponse(await run_in_threadpool(check_parts, parts))


def _diff(gateway: str, applied: int | None, found: tuple[str, str] | None, text: str) -> dict[str, Any]:
    """The lines of the assembled ``text`` against the applied document, itself assembled from its parts
    (so only what was edited differs); against nothing when no applied document is here."""
    old, name = "", f"{gateway}: no applied document here"
    if found is not None:
        old, name = config_parts.canonical_document(found[0], found[1]), f"{gateway} version {applied} (applied)"
    return {"lines": configs.diff_lines(old, text, name, f"{gateway} edited"), "against": applied if found else None}


async def parts_diff(request: Request) -> Response:
    """Operator only: the diff of the document the parts make against the gateway's applied one (a fragment)."""
    too_large = _too_large(request)
    if too_large:
        raise HTTPException(*too_large)
    form = await form_for(request, OPERATOR)
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        applied = _applied_version(q, gateway)
        found = configs.document(q, gateway, applied) if applied is not None else None

    def diff() -> dict[str, Any]:
        try:
            text = config_parts.assemble(config_parts.parts_from_form(form))
        except config_parts.PartError as exc:
            return {"diff_error": exc.reason, "lines": []}
        return _diff(gateway, applied, found, text)

    return render(request, "_config_parts_diff.html", {"gateway": gateway, "applied": applied,
                                                       **await run_in_threadpool(diff)})


async def parts_push(request: Request) -> Response:
    """Operator only: the document the parts make, validated, signed and pushed to the gateway as any
    document is (validate_for_push, then push-config's code in the background)."""
    too_large = _too_large(request)
    if too_large:
        raise HTTPException(*too_large)
    form = await form_for(request, OPERATOR)
    user = current_user(request)
    settings = _settings(request)
    with reader_of(request).query() as q:
        gateway = _gateway(request, q)
        applied, shown, found = _source(q, gateway, None)
    try:
        parts = config_parts.parts_from_form(form)
    except config_parts.PartError as exc:     # not the editor's form
        raise HTTPException(400, exc.reason) from exc
    error: dict[str, Any] | None = None
    try:
        text = (await run_in_threadpool(config_parts.assemble, parts)).encode()
    except config_parts.PartError as exc:
        error = {"reason": exc.reason, "part": exc.part, "index": exc.index}
    else:
        reason = await run_in_threadpool(validate_for_push, settings, [gateway], text, "trig")
        if reason is not None:
            error = {"reason": reason, **config_parts.locate(reason, parts)}
    if error is not None:
        log.warning("dashboard push refused user=%s gateways=%s reason=%r", user.name if user else "", gateway,
                    error["reason"])
        context = _parts_context(request, gateway, applied, shown, found)
        context.update(parts=parts, error=error)
        return render(request, "config_parts.html", context, 400)
    job = start_push(settings, [gateway], text, "trig", user.name if user else "")
    _, failed = await await_publishes(job)
    return RedirectResponse(f"/gateways/{quote(gateway)}/config?{'failed' if failed else 'pushed'}=1",
                            status_code=303)
