"""`edgewave-cloud run`: the ingest workers, the Spark job and the dashboard as supervised child processes.

Separate processes keep the parts independent: ingest keeps taking events off
the broker while the Spark job restarts, a Spark crash never holds an
unacknowledged event, and the dashboard's readers never slow either. A child
that dies is restarted with a growing delay; a child that exits with code 2 (a
configuration error: bad cloud.yaml, no Java, checkpoint/database mismatch)
stops the service, since restarting cannot fix it. SIGTERM or SIGINT stops every
child gracefully.
"""
from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from typing import Callable, Sequence

from edgewave.shared.shutdown import stop_on_signals

log = logging.getLogger(__name__)

EXIT_CONFIG_ERROR = 2
STOP_TIMEOUT_S = 60.0


class Child:
    """One supervised child process."""

    def __init__(self, name: str, argv: list[str], *, one_shot: bool = False) -> None:
        self.name = name
        self.argv = argv
        self.one_shot = one_shot      # done for good when it exits 0 (a retiring ingest worker)
        self.finished = False
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.next_start = 0.0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv)
        log.info("service started child=%s pid=%d", self.name, self.proc.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("service child=%s did not stop in %ss; killing", self.name, STOP_TIMEOUT_S)
            self.proc.kill()
            self.proc.wait()


def run_service(config: str, spark_args: list[str], log_level: str = "INFO", dashboard: bool = False,
                ingest_workers: int = 1, retire_workers: Sequence[int] = (),
                on_retired: Callable[[], None] | None = None) -> int:
    """Run ingest (``ingest_workers`` processes), the Spark job and the dashboard (when it has users)
    until a signal; returns the exit code.

    ``retire_workers`` are ingest workers of an earlier, larger run: each lands what
    its session still holds and ends it (see ``ingest``), then ``on_retired`` runs.
    """
    base = [sys.executable, "-m", "edgewave.cloud.cli", "--log-level", log_level]
    children = [Child("ingest" if i == 0 else f"ingest-{i}", base + ["ingest", "--config", config, "--worker", str(i)])
                for i in range(ingest_workers)]
    children += [Child(f"ingest-{i}-retiring", base + ["ingest", "--config", config, "--worker", str(i), "--retire"],
                       one_shot=True) for i in retire_workers]
    retiring = [c for c in children if c.one_shot]
    children.append(Child("spark", base + ["spark", "--config", config] + spark_args))
    if dashboard:
        children.append(Child("dashboard", base + ["dashboard", "--config", config]))
    else:
        log.info("service dashboard=off reason='no users under dashboard.users in the config'")
    stopping = threading.Event()
    stop_on_signals(log, "service", stopping.set)
    for child in children:
        child.start()
    code = 0
    try:
        while not stopping.is_set():
            for child in children:
                if child.finished:
                    continue
                if child.proc is None:
                    if time.monotonic() >= child.next_start:
                        child.start()
                    continue
                rc = child.proc.poll()
                if rc is None:
                    continue
                if child.one_shot and rc == 0:
                    child.finished = True
                    log.info("service child=%s finished", child.name)
                    if all(c.finished for c in retiring) and on_retired is not None:
                        on_retired()
                    continue
                if rc == EXIT_CONFIG_ERROR:
                    log.error("service child=%s exited with a configuration error; stopping", child.name)
                    code = EXIT_CONFIG_ERROR
                    stopping.set()
                    break
                child.restarts += 1
                delay = min(30.0, 2.0 ** min(child.restarts, 5))
                log.warning("service child=%s exited rc=%d; restart %d in %.0fs", child.name, rc, child.restarts,
                            delay)
                child.proc = None
                child.next_start = time.monotonic() + delay
            stopping.wait(0.5)
    finally:
        for child in reversed(children):
            child.stop()
    return code
