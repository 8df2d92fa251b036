"""Who may see the dashboard and who may change things: users, roles, sessions, CSRF, login limits.

- Users and their argon2 password hashes live in cloud.yaml (``dashboard.users``);
  ``edgewave-cloud add-user`` makes an entry. The role is read from the settings on
  every request, so a session never outlives a user's removal or demotion (after a restart).
- Roles: ``viewer`` sees everything; ``operator`` may also push, acknowledge and roll
  back. Every POST endpoint goes through ``form_for`` with the role it needs.
- The session is a signed cookie (Starlette's SessionMiddleware): HttpOnly,
  SameSite=Lax, Secure when ``dashboard.secure_cookies`` is set (behind TLS).
- Every form carries the session's CSRF token (the login form too: its token lives in
  the anonymous session the login page starts); a POST without it is refused.
- Failed logins are counted per user name and per client address over
  ``login_window_s``; past the limit the login is refused (429) without checking the
  password, so guessing is slow whichever of the two an attacker varies.
"""
from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from edgewave.cloud.settings import DASHBOARD_ROLES, DashboardSettings

log = logging.getLogger("edgewave.cloud.dashboard.auth")

VIEWER, OPERATOR = DASHBOARD_ROLES
ROLE_RANK = {VIEWER: 0, OPERATOR: 1}
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"

_hasher = PasswordHasher()   # argon2id with argon2-cffi's defaults (RFC 9106 low-memory profile)


def hash_password(password: str) -> str:
    """An argon2id hash for cloud.yaml's ``dashboard.users.<name>.password_hash``."""
    return _hasher.hash(password)


@dataclass(frozen=True)
class User:
    name: str
    role: str

    def may(self, role: str) -> bool:
        """Whether this user has ``role`` or a higher one."""
        return ROLE_RANK[self.role] >= ROLE_RANK[role]


class Users:
    """The users of cloud.yaml, and password checks that take as long for an unknown name."""

    def __init__(self, settings: DashboardSettings) -> None:
        self._entries = dict(settings.users)
        self._dummy_hash = _hasher.hash(secrets.token_hex(16))

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: Any) -> User | None:
        entry = self._entries.get(name) if isinstance(name, str) else None
        return None if entry is None else User(name, entry["role"])

    def verify(self, name: str, password: str) -> User | None:
        """The user if ``password`` is theirs; None otherwise (an unknown name costs one hash too)."""
        entry = self._entries.get(name)
        try:
            _hasher.verify(entry["password_hash"] if entry else self._dummy_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        return User(name, entry["role"]) if entry else None


class LoginLimiter:
    """Failed logins per user name and per client address within a sliding window."""

    MAX_KEYS = 10_000

    def __init__(self, per_user: int, per_address: int, window_s: float) -> None:
        self.per_user = per_user
        self.per_address = per_address
        self.window_s = window_s
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, user: str, address: str, now: float | None = None) -> float | None:
        """Seconds until a login for ``user`` from ``address`` may be tried again; None if it may now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = []
            for key, limit in ((f"user:{user}", self.per_user), (f"addr:{address}", self.per_address)):
                times = self._recent(key, now)
                if len(times) >= limit:
                    waits.append(times[len(times) - limit] + self.window_s - now)
            return max(waits) if waits else None

    def failed(self, user: str, address: str, now: float | None = None) -> int:
        """Count a failed login; returns the user name's failures within the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._failures) >= self.MAX_KEYS:
                for key in list(self._failures):
                    self._recent(key, now)
            for key in (f"user:{user}", f"addr:{address}"):
                self._failures.setdefault(key, deque()).append(now)
            return len(self._failures[f"user:{user}"])

    def succeeded(self, user: str) -> None:
        """A good password clears the user's failures (not the address's: other names may be guessed from it)."""
        with self._lock:
            self._failures.pop(f"user:{user}", None)


# -- sessions and CSRF -------------------------------------------------------------------------

def csrf_token(request: Request) -> str:
    """The session's CSRF token, made on first use (the login page starts an anonymous session for it)."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or len(token) < 32:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def csrf_ok(request: Request, form: FormData | None) -> bool:
    """Whether the request carries the session's CSRF token (form field or X-CSRF-Token header)."""
    expected = request.session.get("csrf")
    sent = (form.get(CSRF_FIELD) if form is not None else None) or request.headers.get(CSRF_HEADER)
    return isinstance(expected, str) and isinstance(sent, str) and hmac.compare_digest(expected, sent)


def start_session(request: Request, user: User) -> None:
    """A fresh session for ``user``: nothing of the anonymous one (its CSRF token included) carries over."""
    request.session.clear()
    request.session.update({"user": user.name, "csrf": secrets.token_urlsafe(32),
                            "login_ms": int(time.time() * 1000)})


def current_user(request: Request) -> User | None:
    """The logged-in user, with the role cloud.yaml gives them now; None if not logged in."""
    users: Users = request.app.state.users
    return users.get(request.session.get("user"))


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def form_for(request: Request, role: str) -> FormData:
    """The form of a POST that needs ``role``, after the checks every state-changing request passes.

    401 without a session, 403 for a user without the role, 403 without the CSRF token.
    """
    user = current_user(request)
    if user is None:
        raise HTTPException(401, "log in first")
    if not user.may(role):
        log.warning("dashboard refused user=%s role=%s needs=%s path=%s", user.name, user.role, role,
                    request.url.path)
        raise HTTPException(403, f"this needs the {role} role; you are a {user.role}")
    form = await request.form()
    if not csrf_ok(request, form):
        log.warning("dashboard refused user=%s reason=csrf path=%s", user.name, request.url.path)
        raise HTTPException(403, "the form's security token is missing or stale: reload the page and try again")
    return form
