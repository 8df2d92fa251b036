"""Sim time versus wall time.

The stream is generated in simulated time (epoch milliseconds in each message). A
``Pacer`` maps it onto the wall clock: ``speed=1`` at the original pace, ``speed=10``
ten times faster, ``speed=None`` as fast as possible (recording, load tests). Deadlines
are absolute (first message + elapsed sim time / speed), so sleeping late once does not
shift every later message.
"""
from __future__ import annotations

import time


def parse_speed(text: str) -> float | None:
    """``1``, ``10``, ``0.5`` -> that factor; ``max`` -> None (as fast as possible)."""
    if str(text).lower() in ("max", "inf", "fast"):
        return None
    try:
        speed = float(text)
    except ValueError:
        raise ValueError(f"speed {text!r}: expected a factor such as 1 or 10, or 'max'") from None
    if speed <= 0:
        raise ValueError(f"speed {text!r}: must be > 0")
    return speed


class Pacer:
    """Waits until a message's sim time, scaled by ``speed``, has come on the wall clock."""

    def __init__(self, speed: float | None, monotonic=time.monotonic, sleep=time.sleep) -> None:
        self.speed = speed
        self._monotonic = monotonic
        self._sleep = sleep
        self._origin: tuple[int, float] | None = None  # (sim ms, wall s) of the first message
        self.max_lateness_s = 0.0

    def wait(self, sim_ms: int) -> None:
        if self.speed is None:
            return
        now = self._monotonic()
        if self._origin is None:
            self._origin = (sim_ms, now)
            return
        sim0, wall0 = self._origin
        deadline = wall0 + (sim_ms - sim0) / 1000.0 / self.speed
        delay = deadline - now
        if delay <= 0:
            self.max_lateness_s = max(self.max_lateness_s, -delay)
            return
        while delay > 0:  # the sleep may return early (a sink serving its network while it waits)
            self._sleep(delay)
            delay = deadline - self._monotonic()
