"""How every long-running command stops: SIGTERM (systemd, docker stop) and SIGINT (Ctrl-C)
both ask it to finish its current work and exit, logged so an operator sees why it ended."""
from __future__ import annotations

import logging
import signal
from typing import Any, Callable


def stop_on_signals(log: logging.Logger, what: str, stop: Callable[[], None]) -> None:
    """Call ``stop`` on SIGTERM or SIGINT after logging ``<what> stopping signal=N``.

    ``stop`` must only set a flag or event: it runs inside the signal handler, on the main
    thread, between two bytecodes of whatever that thread was doing."""

    def _stop(signum: int, frame: Any) -> None:
        log.info("%s stopping signal=%d", what, signum)
        stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
