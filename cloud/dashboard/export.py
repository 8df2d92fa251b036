"""CSV of what a table or the chart shows, with times in the viewer's time zone.

Each export is the same query as the page it comes from, over the same range:
``/export/<name>.csv?range=24h&tz=Europe/Berlin`` (or ``start``/``end``). Times
are ISO 8601 with their offset, so a spreadsheet in another zone still reads
them right.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Callable
from datetime import timezone
from zoneinfo import ZoneInfo

from starlette.responses import Response

from . import queries
from .bucketing import TimeRange, series
from .viewfmt import iso_time

Table = tuple[list[str], list[list[Any]]]


def _matches(q: queries.Query, rng: TimeRange, zone: Any, **_: Any) -> Table:
    """The chart: one row per bucket, one column per pattern."""
    data = series(rng, queries.match_series(q, rng))
    header = ["bucket_start", "bucket_minutes", *data]
    rows = [[iso_time(start, zone), rng.bucket_ms // 60_000, *(values[i] for values in data.values())]
            for i, start in enumerate(rng.bucket_starts)]
    return header, rows


def _patterns(q: queries.Query, rng: TimeRange, zone: Any, **_: Any) -> Table:
    rows = [[r.pattern, r.matches, r.previous, r.change] for r in queries.pattern_rows(q, rng)]
    return ["pattern", f"matches_from_{iso_time(rng.start_ms, zone)}_to_{iso_time(rng.end_ms, zone)}",
            "matches_previous_period", "change"], rows


def _bindings(q: queries.Query, rng: TimeRange, zone: Any, **_: Any) -> Table:
    return ["pattern", "variable", "value", "count_all_time", "rank"], [list(r) for r in queries.top_bindings(q)]


def _significant(q: queries.Query, rng: TimeRange, zone: Any, **_: Any) -> Table:
    return (["observed_property", "significant_observations", "sensors"],
            [list(r) for r in queries.significant_by_property(q, rng.start_ms, rng.end_ms)])


def _delays(q: queries.Query, rng: TimeRange, zone: Any, **_: Any) -> Table:
    rows = [[d.kind, d.count, round(d.mean_ms, 1), d.min_ms, d.p50_ms, d.p95_ms, d.p99_ms, d.max_ms]
            for d in queries.delay_summary(q, rng.start_ms, rng.end_ms)]
    return ["kind", "events", "mean_ms", "min_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"], rows


def _gateways(q: queries.Query, rng: TimeRange, zone: Any, *, gateways: list[queries.GatewayRow],
              **_: Any) -> Table:
    header = ["gateway", "health", "reason", "reported_state", "last_seen", "config_version", "messages_in",
              "matches", "forwarded", "dropped", "outbox_depth", "oldest_unsent_ms", "bytes_in", "bytes_forwarded",
              "bytes_saved"]
    rows = [[g.gateway, g.health, g.reason, g.state or "", iso_time(g.last_seen_ms, zone), g.config_version,
             g.counter("messages_in"), g.counter("matches"), g.counter("forwarded"), g.drops, g.outbox_depth,
             g.oldest_unsent_ms, g.bytes_in, g.bytes_forwarded, g.bytes_saved] for g in gateways]
    return header, rows


EXPORTS: dict[str, Callable[..., Table]] = {
    "matches": _matches, "patterns": _patterns, "bindings": _bindings, "significant": _significant,
    "delays": _delays, "gateways": _gateways,
}
"""The exports by name (the file name without .csv)."""


def history_table(history: list[queries.HistoryRow], zone: ZoneInfo | timezone) -> Table:
    """A gateway's status history as on its page."""
    header = ["received", "state", "config_version", "messages_in", "matches", "forwarded", "dropped",
              "outbox_depth", "oldest_unsent_ms"]
    rows = [[iso_time(h.received_ms, zone), h.state or "", h.config_version, h.counter("messages_in"),
             h.counter("matches"), h.counter("forwarded"), h.counter("dropped"), h.outbox("depth"),
             h.outbox("oldestAgeMs")] for h in history]
    return header, rows


def alarms_table(alarms: list[Any], zone: ZoneInfo | timezone) -> Table:
    """The alarms as the alarms page lists them (``alarms.Alarm``), with their acknowledgement and clearing."""
    header = ["last_match", "state", "gateway", "pattern", "key", "matches", "first_match", "acknowledged_by",
              "acknowledged_at", "comment", "cleared_by", "cleared_at"]
    rows = [[iso_time(a.last_seen_ms, zone), a.state, a.gateway, a.pattern,
             " ".join(f"{variable}={value}" for variable, value in a.key), a.count, iso_time(a.first_seen_ms, zone),
             a.acked_by, iso_time(a.acked_ms, zone), a.ack_comment, a.cleared_by, iso_time(a.cleared_ms, zone)]
            for a in alarms]
    return header, rows


def live_table(items: list[dict[str, Any]], zone: ZoneInfo | timezone,
               shown: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Table:
    """Live-feed (or history) rows as the live page lists them, newest first: the exact terms, or
    with ``shown`` (``Formatter.event``) each event's message and its values as people read them."""
    header = ["match_time", "ingested", "gateway", "kind", "pattern", "bindings", "sensor", "property", "result",
              "window_start", "window_end", "event_id"]
    rows = []
    for i in items:
        if shown is None:
            bindings = " ".join(f"?{b.get('variable')}={b.get('value')}" for b in i.get("bindings") or [])
        else:
            read = shown(i)
            bindings = " ".join(f"?{b['variable']}={b['text']}" for b in read["bindings"])
        row = [iso_time(i.get("window_end") or i.get("ingest_ms"), zone), iso_time(i.get("ingest_ms"), zone),
               i.get("gateway"), i.get("kind"), i.get("pattern"), bindings, i.get("sensor"), i.get("property"),
               i.get("result"), iso_time(i.get("window_start"), zone), iso_time(i.get("window_end"), zone), i.get("id")]
        if shown is not None:
            row.insert(5, read["message"])
        rows.append(row)
    if shown is not None:
        header.insert(5, "message")
    return header, rows


def csv_response(table: Table, filename: str) -> Response:
    """A table as a CSV download."""
    return Response(to_csv(table), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def to_csv(table: Table) -> str:
    header, rows = table
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([_safe(name) for name in header])     # pattern names from the field head columns
    for row in rows:
        writer.writerow(["" if v is None else _safe(v) for v in row])
    return out.getvalue()


def _safe(value: Any) -> Any:
    """Neutralise values a spreadsheet would run as a formula (=, +, -, @ first): gateway names and
    binding values come from the field."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
