"""At most one log line per key and period: a flood of bad input must not flood the log.

A sensor stuck in a loop of bad output, or an attacker publishing poison
messages, would otherwise write one warning per message. The caller logs only
when ``allow(key)`` says so and reports how many lines were suppressed since.
"""
from __future__ import annotations

import time
from typing import Callable

MAX_KEYS = 10_000


class LogLimiter:
    """Allows one log line per key per ``period_s``, and ``max_lines`` lines per period in
    all (keys can be made up: a publisher inventing a sensor name per message must not
    get a line per message); counts what it suppressed, per key."""

    def __init__(self, period_s: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 max_lines: int = 100) -> None:
        self.period_s = period_s
        self.max_lines = max_lines
        self._clock = clock
        self._last: dict[str, float] = {}
        self._window_start = float("-inf")
        self._window_lines = 0
        self.suppressed: dict[str, int] = {}

    def allow(self, key: str) -> bool:
        """Whether a line for ``key`` may be logged now; if not, it is counted as suppressed."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.period_s:
            self._suppress(key)
            return False
        if now - self._window_start >= self.period_s:
            self._window_start, self._window_lines = now, 0
        if self._window_lines >= self.max_lines:
            self._suppress(key)
            return False
        self._window_lines += 1
        if len(self._last) > MAX_KEYS:   # keys (sensors, reasons) come and go; keep the table small
            self._last.clear()
        self._last[key] = now
        return True

    def take_suppressed(self, key: str) -> int:
        """How many lines for ``key`` were suppressed since the last one allowed (and reset)."""
        return self.suppressed.pop(key, 0)

    def _suppress(self, key: str) -> None:
        if key not in self.suppressed and len(self.suppressed) > MAX_KEYS:
            self.suppressed.clear()
        self.suppressed[key] = self.suppressed.get(key, 0) + 1
