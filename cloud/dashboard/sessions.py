"""Server-side sessions, so that logging out (or a password change) ends a session for good.

A signed cookie alone cannot be taken back: a copy stolen before logout would
work until it expires. So the cookie carries only a random session id (and the
form's CSRF token); who is logged in lives here, in the dashboard's own SQLite
file (``dashboard.state_db``, beside the alarms), keyed by a SHA-256 of the id so
that the file does not hold usable cookies. A session ends when

- its user logs out (the row is deleted: the cookie, or any copy of it, is refused),
- it was not used for ``session_max_age_s`` (expired rows are purged at start,
  at every login and logout, and when a request meets one),
- the user's password changed (``edgewave-cloud add-user --replace``, then a
  restart): each row keeps a fingerprint of the password hash it was opened
  with; at start, and when a request meets one, a row whose fingerprint is not
  the user's now is deleted,
- the user is no longer in cloud.yaml (deleted at start too).

A request refreshes ``last_seen`` at most once per ``TOUCH_EVERY_MS``, so most
requests only read.
"""
from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from edgewave.shared import clock
from edgewave.shared.sqlite_files import open_read_write

TOUCH_EVERY_MS = 60_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id_hash TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    credential TEXT NOT NULL,
    client TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires_ms);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (user);
"""


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def credential_of(password_hash: str) -> str:
    """A fingerprint of a user's password hash: a session opened under another password is over."""
    return hashlib.sha256(password_hash.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SessionRow:
    user: str
    credential: str
    last_seen_ms: int
    expires_ms: int


class SessionStore:
    """The table of open sessions (one connection, serialised by a lock: requests run in a thread pool)."""

    def __init__(self, path: str | Path, max_age_s: float) -> None:
        self.path = Path(path)
        self.max_age_ms = int(max_age_s * 1000)
        self._lock = threading.Lock()
        self.conn = open_read_write(self.path, synchronous="NORMAL", busy_timeout_s=10.0)
        self.conn.executescript(SCHEMA)
        self.purge()

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def open(self, user: str, credential: str, client: str) -> str:
        """A new session for ``user``; returns its id (for the cookie, never stored as such)."""
        session_id = secrets.token_urlsafe(32)
        now = clock.now_ms()
        with self._lock:
            self.conn.execute("INSERT INTO sessions (id_hash, user, credential, client, created_ms, last_seen_ms, "
                              "expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (_key(session_id), user, credential, client, now, now, now + self.max_age_ms))
        self.purge(now)
        return session_id

    def get(self, session_id: str) -> SessionRow | None:
        """The open session with this id, its expiry moved on; None when there is none or it expired."""
        if not isinstance(session_id, str) or not session_id:
            return None
        key, now = _key(session_id), clock.now_ms()
        with self._lock:
            row = self.conn.execute("SELECT user, credential, last_seen_ms, expires_ms FROM sessions "
                                    "WHERE id_hash = ?", (key,)).fetchone()
            if row is None:
                return None
            found = SessionRow(*row)
            if found.expires_ms <= now:
                self.conn.execute("DELETE FROM sessions WHERE id_hash = ?", (key,))
                return None
            if now - found.last_seen_ms >= TOUCH_EVERY_MS:
                self.conn.execute("UPDATE sessions SET last_seen_ms = ?, expires_ms = ? WHERE id_hash = ?",
                                  (now, now + self.max_age_ms, key))
        return found

    def revoke(self, session_id: str) -> bool:
        """End one session (logout, or one found under an old password); True if it was open."""
        if not isinstance(session_id, str) or not session_id:
            return False
        with self._lock:
            gone = self.conn.execute("DELETE FROM sessions WHERE id_hash = ?", (_key(session_id),)).rowcount
        return gone > 0

    def end_stale(self, credentials: dict[str, str]) -> int:
        """End the sessions of users no longer in cloud.yaml or opened under another password
        (``credentials``: user -> ``credential_of`` their hash now); returns how many."""
        with self._lock:
            rows = self.conn.execute("SELECT id_hash, user, credential FROM sessions").fetchall()
            stale = [(key,) for key, user, credential in rows if credentials.get(user) != credential]
            self.conn.executemany("DELETE FROM sessions WHERE id_hash = ?", stale)
        return len(stale)

    def purge(self, now_ms: int | None = None) -> int:
        """Delete expired sessions; returns how many."""
        with self._lock:
            return self.conn.execute("DELETE FROM sessions WHERE expires_ms <= ?",
                                     (clock.now_ms() if now_ms is None else now_ms,)).rowcount

    def count(self, user: str | None = None) -> int:
        """Open (unexpired) sessions, of ``user`` or of everybody."""
        sql, params = "SELECT COUNT(*) FROM sessions WHERE expires_ms > ?", [clock.now_ms()]
        if user is not None:
            sql += " AND user = ?"
            params.append(user)
        with self._lock:
            return int(self.conn.execute(sql, params).fetchone()[0])
