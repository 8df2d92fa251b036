"""Which instances a per-instance query reports (docs/engine.md, "Per-instance queries"):
RSP4J's report policies.

``non-empty`` (the default; C-SPARQL's and SPARQLStream's behaviour in CSRBench): an
instance is reported when some window of the query holds a triple. ``window-close``: every
instance from the first triple on. ``on-change``: when the result differs from the last one
reported. ``periodic:DURATION`` (``periodic:PT1M``): the first instance to close at or after
each multiple of the period, whatever its content.
"""
from __future__ import annotations

from typing import NamedTuple

REPORT_POLICIES = ("non-empty", "window-close", "on-change", "periodic:DURATION")
KINDS = ("non-empty", "window-close", "on-change", "periodic")
DEFAULT_POLICY = "non-empty"


class ReportPolicy(NamedTuple):
    kind: str
    period_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> "ReportPolicy":
        """``non-empty``, ``window-close``, ``on-change`` or ``periodic:<duration>``."""
        kind, _, period = text.partition(":")
        if kind == "periodic":
            from ..rspql import parse_duration

            try:
                period_ms = parse_duration(period)
            except ValueError as exc:
                raise ValueError(f"report policy {text!r}: {exc}") from None
            if period_ms <= 0:
                raise ValueError(f"report policy {text!r}: the period must be positive")
            return cls(kind, period_ms)
        if kind not in KINDS or period:
            raise ValueError(f"report policy {text!r}: expected one of {', '.join(REPORT_POLICIES)}")
        return cls(kind)
