"""Rendering a page or fragment with what every template needs (shared by the route modules)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from .auth import CSRF_FIELD, csrf_token, current_user
from .highlight import highlight
from .viewfmt import Formatter, viewer_zone

HERE = Path(__file__).resolve().parent

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["highlight"] = highlight


def render(request: Request, template: str, context: dict[str, Any], status_code: int = 200) -> Response:
    """A page or fragment with what every template needs: the user, the CSRF token, the formatter."""
    base = {"request": request, "user": current_user(request), "csrf_token": csrf_token(request),
            "csrf_field": CSRF_FIELD, "v": Formatter(viewer_zone(request))}
    return templates.TemplateResponse(request, template, {**base, **context}, status_code=status_code)
