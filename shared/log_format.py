"""One log line format for every tier: ``ts=... level=... logger=... <message>`` on stderr.

Messages are already ``key=value`` (``outbox event=opened path=... pending=3``), so with
this prefix an operator greps and parses the agent's, the cloud's and the simulator's
logs the same way (journald, ``var/demo/*.log``). Times are UTC with milliseconds.

A message is one line, whatever it quotes: control characters in it (a newline in a user
name, a pattern name or a topic from the field) are written as escapes (``\\n``, ``\\x1b``),
so no value can forge a line of its own. A traceback follows on lines of its own.
"""
from __future__ import annotations

import logging
import re
import sys
import time
from typing import IO

__all__ = ["LEVELS", "KeyValueFormatter", "setup_logging"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


class KeyValueFormatter(logging.Formatter):
    """``ts=2026-01-05T08:02:00.123Z level=INFO logger=edgewave.agent <message>``, a
    traceback (if any) on the lines after it."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if _CONTROL.search(message):
            message = _CONTROL.sub(_escape, message)
        line = (f"ts={self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z "
                f"level={record.levelname} logger={record.name} {message}")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class _KeyValueHandler(logging.StreamHandler):
    """The handler ``setup_logging`` installs (told apart from others by its class)."""


def setup_logging(level: str, stream: IO[str] | None = None) -> None:
    """Send every logger's records at ``level`` or above to ``stream`` (stderr) as key=value lines.

    Replaces the handler an earlier call installed, so calling it again (a CLI re-reading
    its level) does not double the lines; handlers someone else put on the root logger (a
    test's log capture) stay. An unknown level name logs a warning and means INFO: a typo
    in a config file must not keep a service from starting.
    """
    handler = _KeyValueHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, _KeyValueHandler)] + [handler]
    name = str(level).strip().upper()
    root.setLevel(name if name in LEVELS else logging.INFO)
    if name not in LEVELS:
        logging.getLogger("edgewave").warning("logging event=unknown_level level=%r using=INFO known=%s",
                                              str(level), ",".join(LEVELS))
