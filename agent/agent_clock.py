"""The agent's clocks: the wall clock for stream time, and the boot clock for how long it was down.

Stream time (arrival times, the engine's clock) follows the wall clock, because events
carry it to the cloud, which compares it with its own. But the wall clock may be stepped
while the agent is down (NTP, an operator, a gateway without a battery-backed clock that
boots in 1970). To age restored windows correctly (window_journal.py), the agent also
records ``CLOCK_BOOTTIME`` (counts across suspend, never stepped) and the kernel's boot id:
on the same boot the true time the agent was down is the boot clock's difference,
whatever happened to the wall clock.

Test hook: ``EDGEWAVE_AGENT_CLOCK`` (read once, at start) shifts the wall clock and names
the boot, e.g. ``wall_offset_ms=-3600000,boot_id=test-boot-2``, so tests can step the
clock or "reboot" between two runs of a real agent process. Not for production use.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from edgewave.shared import clock

TEST_HOOK_ENV = "EDGEWAVE_AGENT_CLOCK"
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def _read_boot_id() -> str:
    """The kernel's id of this boot; empty where there is none (then every start is a new boot)."""
    try:
        return BOOT_ID_PATH.read_text().strip()
    except OSError:
        return ""


class AgentClock:
    """Wall-clock milliseconds (for stream time) and boot-clock milliseconds (for elapsed time)."""

    def __init__(self, wall_offset_ms: int = 0, boot_id: str | None = None) -> None:
        self.wall_offset_ms = wall_offset_ms
        self.boot_id = _read_boot_id() if boot_id is None else boot_id

    def wall_ms(self) -> int:
        return clock.now_ms() + self.wall_offset_ms

    @staticmethod
    def boot_ms() -> int:
        """Milliseconds since boot, suspend included; never stepped."""
        if _BOOTTIME is not None:
            return int(time.clock_gettime(_BOOTTIME) * 1000)
        return int(time.monotonic() * 1000)

    @classmethod
    def from_environment(cls) -> "AgentClock":
        """The real clocks, or those the test hook describes. A malformed hook is an error:
        a test that thinks it stepped the clock must not run on the real one."""
        spec = os.environ.get(TEST_HOOK_ENV, "").strip()
        if not spec:
            return cls()
        values: dict[str, str] = {}
        for part in spec.split(","):
            name, sep, value = part.partition("=")
            if not sep or name.strip() not in ("wall_offset_ms", "boot_id"):
                raise ValueError(f"{TEST_HOOK_ENV}: expected wall_offset_ms=<int>,boot_id=<text>, got {spec!r}")
            values[name.strip()] = value.strip()
        return cls(int(values.get("wall_offset_ms", "0")), values.get("boot_id"))


CLOCK = AgentClock.from_environment()
