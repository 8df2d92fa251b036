"""`edgewave-cloud dashboard`: the dashboard under uvicorn, and the key that signs its session cookies.

The key is read from ``dashboard.secret_key_file``; on first start the file is
made (random, mode 0600), so sessions survive a restart and nobody has to invent a
key. Delete the file to log everybody out.
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import stat
from pathlib import Path
from typing import Iterator

from edgewave.cloud.settings import CloudSettings, SettingsError

log = logging.getLogger("edgewave.cloud.dashboard")


def load_secret_key(path: str | Path) -> str:
    """The session-signing key in ``path``, made there (mode 0600) if the file does not exist."""
    path = Path(path)
    for _ in range(2):
        try:
            key = path.read_text().strip()
        except FileNotFoundError:
            pass
        else:
            if len(key) < 32:
                raise SettingsError(f"dashboard.secret_key_file {path} holds fewer than 32 characters; "
                                    f"delete it and a new key is made")
            mode = path.stat().st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                log.warning("dashboard secret_key_file=%s is readable by others (mode %o); chmod 600 it",
                            path, stat.S_IMODE(mode))
            return key
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue   # another dashboard made it just now: read theirs
        except OSError as exc:
            raise SettingsError(f"cannot create dashboard.secret_key_file {path}: {exc}") from exc
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(48) + "\n")
        log.info("dashboard made secret_key_file=%s", path)
    return path.read_text().strip()


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that SIGTERM/SIGINT end it with exit code 0 like every other
        edgewave-cloud process (uvicorn re-raises the signal after its graceful shutdown)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


def run_dashboard(settings: CloudSettings) -> int:
    """Serve the dashboard until SIGTERM/SIGINT; returns the exit code (2 when it cannot be configured)."""
    import uvicorn

    from .app import create_app

    d = settings.dashboard
    if not d.users:
        log.warning("dashboard has no users: nobody can log in; add one with "
                    "`edgewave-cloud add-user NAME --role operator` and put it under dashboard.users")
    app = create_app(settings, load_secret_key(d.secret_key_file))
    proxies = d.trusted_proxies
    config = uvicorn.Config(app, host=d.host, port=d.port, log_config=None, access_log=False,
                            server_header=False, proxy_headers=bool(proxies), forwarded_allow_ips=proxies or "",
                            timeout_graceful_shutdown=5)
    server = _server_class()(config)
    log.info("dashboard starting url=http://%s:%d database=%s users=%d secure_cookies=%s", d.host, d.port,
             settings.database, len(d.users), d.secure_cookies)
    server.run()
    if not server.started:
        log.error("dashboard could not start (is port %d on %s already in use?)", d.port, d.host)
        return 1
    log.info("dashboard stopped")
    return 0
