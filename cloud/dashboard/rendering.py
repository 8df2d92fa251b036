"""What the route modules share: rendering a page or fragment with what every template needs,
and reading a request's database reader and time range."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from . import queries
from .auth import CSRF_FIELD, csrf_token, current_user
from .bucketing import RangeError, TimeRange, parse_range
from .highlight import highlight
from .viewfmt import Formatter, viewer_zone

HERE = Path(__file__).resolve().parent

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["highlight"] = highlight


def render(request: Request, template: str, context: dict[str, Any], status_code: int = 200) -> Response:
    """A page or fragment with what every template needs: the user, the CSRF token, the formatter."""
    base = {"request": request, "user": current_user(request), "csrf_token": csrf_token(request),
            "csrf_field": CSRF_FIELD,
            "v": Formatter(viewer_zone(request), names=request.app.state.gateway_terms)}
    return templates.TemplateResponse(request, template, {**base, **context}, status_code=status_code)


def reader_of(request: Request) -> queries.Reader:
    """The app's reader of the cloud database."""
    return request.app.state.reader


def requested_range(request: Request) -> TimeRange:
    """The time range the query string asks for; a bad one is the client's error (400)."""
    try:
        return parse_range(dict(request.query_params))
    except RangeError as exc:
        raise HTTPException(400, str(exc)) from exc
