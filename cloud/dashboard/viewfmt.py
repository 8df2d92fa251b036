"""How the dashboard writes times, durations, counts and bytes for the person looking at it.

Times are shown in the viewer's time zone: the page's script stores the
browser's IANA zone name in the ``ew_tz`` cookie, and CSV exports take a
``tz`` parameter. Without either (or with a name this machine does not know),
times are UTC and say so.
"""
from __future__ import annotations

from urllib.parse import unquote
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from markupsafe import Markup
from starlette.requests import Request

from edgewave.shared import clock

from .gateway_terms import PLAIN, GatewayTerms
from .queries import format_duration
from .terms import Naming, Shown

TZ_COOKIE = "ew_tz"


def zone_named(name: str | None) -> ZoneInfo | timezone:
    """The zone called ``name``; UTC when there is none or it is unknown here."""
    if not name or len(name) > 64:
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def viewer_zone(request: Request) -> ZoneInfo | timezone:
    """The zone of the browser that asked (``tz`` parameter, else the ``ew_tz`` cookie, else UTC)."""
    return zone_named(request.query_params.get("tz") or unquote(request.cookies.get(TZ_COOKIE) or ""))


def zone_name(zone: ZoneInfo | timezone) -> str:
    return zone.key if isinstance(zone, ZoneInfo) else "UTC"


def iso_time(ms: int | None, zone: ZoneInfo | timezone) -> str:
    """ISO 8601 with the offset, for CSV: 2024-05-01T14:03:00+02:00."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, zone).isoformat(timespec="seconds")


class Formatter:
    """The formatting helpers templates call as ``v.time(ms)``, ``v.ago(ms)``, ``v.bytes(n)``,
    and for RDF terms ``v.term(gateway, term)`` and ``v.event(item)`` (terms.py), named the
    way the gateway's config document names them (``names``; None: common prefixes only)."""

    def __init__(self, zone: ZoneInfo | timezone, now_ms: int | None = None,
                 names: GatewayTerms | None = None) -> None:
        self.zone = zone
        self.zone_name = zone_name(zone)
        self.now_ms = clock.now_ms() if now_ms is None else now_ms
        self.names = names

    def naming(self, gateway: str | None) -> Naming:
        """The gateway's naming; None: the fleet's (figures over every gateway)."""
        if self.names is None:
            return PLAIN
        return self.names.of(gateway) if gateway else self.names.fleet()

    def term(self, gateway: str | None, term: str | None) -> Markup:
        """A term as people read it, the exact term on hover and copied on a click (dashboard.js)."""
        if term is None:
            return Markup("–")
        shown = self.naming(gateway).term(term, self.zone)
        return shown_term(shown)

    def event(self, item: dict) -> dict:
        """An event's message, title, severity and shown bindings (``Naming.event``)."""
        return self.naming(item.get("gateway")).event(item, self.zone)

    def statement(self, gateway: str | None, text: str) -> Markup:
        """A statement as three shown terms, or as written when it is not one."""
        terms = self.naming(gateway).statement(text, self.zone)
        if terms is None:
            return Markup('<code>{}</code>').format(text)
        return Markup(" ").join(shown_term(t) for t in terms)

    def time(self, ms: int | None) -> str:
        if ms is None:
            return "–"
        return datetime.fromtimestamp(ms / 1000, self.zone).strftime("%Y-%m-%d %H:%M:%S")

    def ago(self, ms: int | None) -> str:
        if ms is None:
            return "never"
        return f"{format_duration(max(0, self.now_ms - ms))} ago"

    @staticmethod
    def duration(ms: int | float | None) -> str:
        return "–" if ms is None else format_duration(int(ms))

    @staticmethod
    def num(n: int | float | None) -> str:
        if n is None:
            return "–"
        return f"{n:,.0f}" if isinstance(n, int) or float(n).is_integer() else f"{n:,.1f}"

    @staticmethod
    def bytes(n: int | None) -> str:
        if n is None:
            return "–"
        size = float(n)
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(size) < 1024 or unit == "GiB":
                return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
            size /= 1024
        return f"{n} B"

    @staticmethod
    def pct(value: float | None) -> str:
        return "–" if value is None else f"{value:+.0f} %"


def shown_term(shown: Shown) -> Markup:
    """The markup of one shown term: its text, the exact term in ``title`` and ``data-full``."""
    return Markup('<span class="term" title="{full}" data-full="{full}">{text}</span>').format(
        full=shown.full, text=shown.text)
