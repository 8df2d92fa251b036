"""One log line format for the agent, the cloud and the simulator."""
from __future__ import annotations

import io
import logging
import re
import subprocess
import sys

import pytest

from edgewave.shared.log_format import setup_logging

LINE = re.compile(r"ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=(\w+) logger=(\S+) (.*)")


def test_lines_are_key_value_in_utc_at_the_level_asked() -> None:
    out = io.StringIO()
    setup_logging("warning", out)
    setup_logging("warning", out)            # again: still one handler, one line per record
    logging.getLogger("edgewave.test").info("hidden event=x")
    logging.getLogger("edgewave.test").warning("outbox event=opened pending=%d", 3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    m = LINE.fullmatch(lines[0])
    assert m and m.groups() == ("WARNING", "edgewave.test", "outbox event=opened pending=3")


def test_a_traceback_follows_its_line() -> None:
    out = io.StringIO()
    setup_logging("INFO", out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("edgewave.test").exception("job event=failed")
    first, *rest = out.getvalue().splitlines()
    assert LINE.fullmatch(first) and rest[0].startswith("Traceback") and rest[-1] == "RuntimeError: boom"


def test_an_unknown_level_means_info_and_says_so() -> None:
    out = io.StringIO()
    setup_logging("verbose", out)
    assert logging.getLogger().level == logging.INFO
    assert "event=unknown_level level='verbose' using=INFO" in out.getvalue()


@pytest.mark.parametrize("argv", [
    ["edgewave.firmware_sim.cli", "--log-level", "DEBUG", "record", "--config", "/nonexistent.yaml",
     "--scenario", "/nonexistent.yaml", "--out", "-"],
    ["-c", "import logging, sys; from edgewave.cloud.cli import _setup_logging; _setup_logging('DEBUG'); "
           "logging.getLogger('edgewave.cloud').error('ingest event=x')"],
    ["-c", "import logging; from edgewave.agent import cli; cli.setup_logging('INFO'); "
           "logging.getLogger('edgewave.agent').error('agent event=x')"],
])
def test_the_clis_write_the_same_format(argv: list[str]) -> None:
    argv = argv if argv[0] == "-c" else ["-m", *argv]
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    logged = [line for line in done.stderr.splitlines() if line.startswith("ts=")]
    assert logged and all(LINE.fullmatch(line) for line in logged), done.stderr


def test_a_value_from_the_field_cannot_forge_a_log_line():
    """A user name, pattern name or topic may hold a newline or a terminal escape: the message
    stays one line, the characters written as escapes; a traceback still follows on its own lines."""
    out = io.StringIO()
    setup_logging("INFO", out)
    log = logging.getLogger("edgewave.test")
    log.warning("dashboard login failed user=%s", "bob\nts=2026-01-01T00:00:00.000Z level=INFO forged\r\x1b[2J\u2028")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed item=%s", "a\tb")
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[0].endswith(
        "user=bob\\nts=2026-01-01T00:00:00.000Z level=INFO forged\\r\\x1b[2J\\u2028")
    assert lines[1].endswith("failed item=a\\tb") and lines[2] == "Traceback (most recent call last):"
