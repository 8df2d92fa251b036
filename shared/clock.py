"""The wall clock, in the milliseconds every table, status and event of edgewave stores.

One source, so that a time written by one module compares with a time written by another.
It is the real clock, never shifted: outbox rows, status documents, registry rows, config
pushes and dashboard sessions age by real time. Stream time in the agent (arrival times,
the engine's clock, ``emittedAt``) is a separate clock, ``agent/agent_clock.py``, which
tests may shift to step the clock or "reboot" a real agent; what stream time decides
(windows) follows it, what real time decides (an outbox row's age, a status's time) does not.
"""
from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the Unix epoch, from the system's wall clock."""
    return time.time_ns() // 1_000_000
