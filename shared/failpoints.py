"""Crash-test hooks: a process killed at a named point of its work, as a power cut would kill it.

The crash tests need a crash at an exact point of a protocol (after the SQLite commit and
before Spark's, after ingest's fsync and before its landed acknowledgement), which no
signal sent from outside can hit. One environment variable names one point:
``EDGEWAVE_FAILPOINT=<point>:<argument>``. It is read once, when the process starts, and a
process without it is never killed by this module. What the argument means is the
point's: a batch id, a count, a text the payload must hold (the list: docs/testing.md).

The kill is SIGKILL, not an exception: no ``finally``, no atexit, no flushing of anything
but the log line saying so, exactly what a crash leaves behind.
"""
from __future__ import annotations

import logging
import os
import signal
from typing import NoReturn

ENV = "EDGEWAVE_FAILPOINT"

log = logging.getLogger("edgewave.failpoint")


def _armed() -> tuple[str, str] | None:
    point, sep, argument = os.environ.get(ENV, "").strip().partition(":")
    return (point, argument) if point and sep else None


ARMED = _armed()


def argument(point: str) -> str | None:
    """The argument ``EDGEWAVE_FAILPOINT`` gives ``point``; None when it names another point or none."""
    return ARMED[1] if ARMED is not None and ARMED[0] == point else None


def crash(point: str, detail: str = "") -> NoReturn:
    """Log that ``point`` is reached, then SIGKILL this process."""
    log.warning("failpoint %s reached%s: killing the process", point, f" {detail}" if detail else "")
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)            # not reached: SIGKILL cannot be caught


def crash_at(point: str, value: object) -> None:
    """Crash when the point's argument equals ``value`` (a batch id, say)."""
    if argument(point) == str(value):
        crash(point, f"at {value}")


class Countdown:
    """A point whose argument is a count: the n-th time ``tick`` is called there, crash."""

    def __init__(self, point: str) -> None:
        self.point = point
        text = argument(point) or ""
        self.left = int(text) if text.isdigit() and int(text) > 0 else None

    def tick(self) -> None:
        if self.left is None:
            return
        self.left -= 1
        if self.left == 0:
            crash(self.point)
