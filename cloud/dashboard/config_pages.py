"""The configuration routes: applied documents, push history, diffs, and (operators) push and rollback.

Pages:    GET /config (every gateway's applied version and newest push; the edit-and-push form),
          GET /gateways/{gw}/config[?version=N] (a document with its patterns highlighted, the push history),
          GET /gateways/{gw}/config/diff?a=N&b=M
Operator: POST /config/push (a document to one, several or all gateways),
          POST /gateways/{gw}/config/rollback (an earlier version, pushed again as a new version),
          POST /gateways/{gw}/push (a document uploaded as a file; see app.py)

Every push goes through push-config's own code (cloud/publisher.py): the same
validation before anything is published, the next version, the signature, the
retained publish and the wait for the ack, in a background thread; the history
shows it pending until the ack resolves it.
"""
from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from edgewave.cloud.settings import CloudSettings

from . import configs, queries
from .auth import OPERATOR, current_user, form_for
from .rendering import render

log = logging.getLogger("edgewave.cloud.dashboard.config")

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
FORMATS = ("trig", "turtle")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _settings(request: Request) -> CloudSettings:
    return request.app.state.settings


def _reader(request: Request) -> queries.Reader:
    return request.app.state.reader


# -- pushing (shared with the upload form in app.py) ------------------------------------------

def validate_for_push(settings: CloudSettings, gateways: list[str], text: bytes, fmt: str) -> str | None:
    """What is wrong with pushing ``text`` to ``gateways`` (push-config's validation), or None."""
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
        for gateway in gateways:
            settings.gateway_key(gateway)
        validate_document(text.decode("utf-8-sig"), fmt)
    except (InvalidDocument, SettingsError) as exc:
        return str(exc)
    except UnicodeDecodeError:
        return "the document is not UTF-8 text"
    return None


def start_push(settings: CloudSettings, gateways: list[str], text: bytes, fmt: str, user: str) -> threading.Thread:
    """push-config's own code path in a background thread: version, record, sign, publish retained, wait for acks."""
    thread = threading.Thread(target=_push, args=(settings, gateways, text, fmt, user),
                              name=f"push-{','.join(gateways)[:40]}", daemon=True)
    thread.start()
    return thread


def _push(settings: CloudSettings, gateways: list[str], text: bytes, fmt: str, user: str) -> None:
    from edgewave.cloud.publisher import push_config

    with tempfile.TemporaryDirectory(prefix="edgewave-push-") as tmp:
        path = Path(tmp) / f"config.{'trig' if fmt == 'trig' else 'ttl'}"
        path.write_bytes(text)
        try:
            outcomes = push_config(settings, gateways, path, fmt=fmt, out=lambda line: None)
        except Exception as exc:  # the broker unreachable, the database busy: logged; the history shows the push
            log.error("dashboard push failed user=%s gateways=%s error=%r", user, ",".join(gateways), str(exc))
            return
    for outcome in outcomes:
        log.info("dashboard push user=%s gateway=%s version=%s status=%s reason=%r", user, outcome.gateway,
                 outcome.version, outcome.status, outcome.reason)


# -- pages ------------------------------------------------------------------------------------

def _known_gateways(request: Request, q: queries.Query) -> list[str]:
    """Every gateway the registry knows, and every one cloud.yaml or the fleet has a signing key for."""
    names = {g.gateway for g in queries.gateway_rows(q, _now_ms(), 1e9, 1e9)}
    names.update(_settings(request).gateways)
    secrets = _settings(request).fleet.gateway_dir("x").parent
    if secrets.is_dir():
        names.update(p.name for p in secrets.iterdir() if (p / "config.key").is_file())
    return sorted(names)


def _fleet_context(request: Request, q: queries.Query, **extra: Any) -> dict[str, Any]:
    settings = _settings(request)
    latest = configs.latest_pushes(q)
    gateways = _known_gateways(request, q)
    rows = [{"gateway": gw, "applied": configs.applied_version(q, gw), "push": latest.get(gw)} for gw in gateways]
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
    return {"nav": "config", "rows": rows, "gateways": gateways, "now_ms": _now_ms(),
            "ack_timeout_s": settings.push.ack_timeout_s, "document": text, "format": fmt,
            "chosen": set(request.query_params.getlist("gateway")), **extra}


def config_page(request: Request) -> Response:
    with _reader(request).query() as q:
        context = _fleet_context(request, q)
    return render(request, "config.html", {**context, "pushed": request.query_params.get("pushed")})


async def push_form(request: Request) -> Response:
    """Operator only: validate a document typed or pasted into the editor and push it to the chosen gateways."""
    form = await form_for(request, OPERATOR)
    user = current_user(request)
    settings = _settings(request)
    text = str(form.get("document") or "").replace("\r\n", "\n").encode()   # a textarea sends CRLF
    fmt = str(form.get("format") or "trig")
    with _reader(request).query() as q:
        known = _known_gateways(request, q)
    gateways = known if form.get("all") else [str(g) for g in form.getlist("gateway")]
    error = await run_in_threadpool(validate_for_push, settings, gateways, text, fmt)
    if error is not None:
        log.warning("dashboard push refused user=%s gateways=%s reason=%r", user.name if user else "",
                    ",".join(gateways), error)
        with _reader(request).query() as q:
            context = _fleet_context(request, q)
        context.update(document=text.decode("utf-8", "replace"), format=fmt, chosen=set(gateways), push_error=error)
        return render(request, "config.html", context, 400)
    start_push(settings, gateways, text, fmt, user.name if user else "")
    return RedirectResponse(f"/config?pushed={quote(','.join(gateways))}", status_code=303)


def _gateway(request: Request, q: queries.Query) -> str:
    gateway = request.path_params["gateway"]
    if gateway not in _known_gateways(request, q):
        raise HTTPException(404, f"no gateway {gateway!r} in the registry")
    return gateway


def gateway_config_page(request: Request) -> Response:
    settings = _settings(request)
    raw = request.query_params.get("version")
    with _reader(request).query() as q:
        gateway = _gateway(request, q)
        applied = configs.applied_version(q, gateway)
        history = configs.pushes(q, gateway)
        shown = int(raw) if raw and raw.isdigit() else applied
        found = configs.document(q, gateway, shown) if shown is not None else None
    patterns: dict[str, str] = {}
    parse_error = None
    if found:
        from edgewave.shared.configdoc import ConfigRejected, load_config_document
        try:
            patterns = dict(sorted(load_config_document(found[0], found[1]).patterns.items()))
        except ConfigRejected as exc:
            parse_error = exc.reason
    return render(request, "gateway_config.html", {
        "nav": "config", "gateway": gateway, "applied": applied, "shown": shown, "doc": found, "patterns": patterns,
        "parse_error": parse_error, "history": history, "now_ms": _now_ms(),
        "ack_timeout_s": settings.push.ack_timeout_s, "rolled": request.query_params.get("rolled")})


def diff_page(request: Request) -> Response:
    p = request.query_params
    if not (p.get("a", "").isdigit() and p.get("b", "").isdigit()):
        raise HTTPException(400, "a and b must be version numbers")
    a, b = int(p["a"]), int(p["b"])
    with _reader(request).query() as q:
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
    with _reader(request).query() as q:
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
