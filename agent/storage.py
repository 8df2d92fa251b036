"""Opening the agent's files at start-up, retried while the disk refuses them.

An agent that exits because its outbox or config store cannot be opened (disk full, I/O
error, read-only) would, under systemd, be a restart loop with a traceback every few
seconds, and gain nothing: until the agent connects, the local broker keeps the sensor
messages for its persistent session, and they arrive once the disk recovers. So it
waits, connected to nothing, and says so once a minute.
"""
from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from typing import Callable

log = logging.getLogger("edgewave.agent")

REMINDER_EVERY_S = 60.0
# What a disk that refuses writes reports outside SQLite (which says "disk I/O error" or
# "database or disk is full" for all of these).
DISK_REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS})


def wait_for_storage(open_storage: Callable[[], None], stop: threading.Event, retry_s: float,
                     data_dir: str) -> bool:
    """Call ``open_storage`` until it succeeds, every ``retry_s`` while the disk refuses it;
    False if ``stop`` is set first. Other errors (a bad bootstrap document, no permission)
    are raised: waiting would not mend them."""
    failing_since = logged = 0.0
    while True:
        try:
            open_storage()
        except (sqlite3.OperationalError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in DISK_REFUSALS:
                raise
            now = time.monotonic()
            if not failing_since:
                failing_since = logged = now
                log.error("agent event=storage_unavailable data_dir=%s error=%r action=%r", data_dir, str(exc),
                          f"retrying every {retry_s:g} s before connecting; "
                          "the local broker keeps the sensor messages meanwhile")
            elif now - logged >= REMINDER_EVERY_S:
                logged = now
                log.error("agent event=storage_still_unavailable for_s=%.0f error=%r", now - failing_since, str(exc))
            if stop.wait(retry_s):
                return False
            continue
        if failing_since:
            log.info("agent event=storage_recovered after_s=%.1f", time.monotonic() - failing_since)
        return True
