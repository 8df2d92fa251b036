"""Who may see the dashboard and who may change things: users, roles, sessions, CSRF, login limits.

- Users and their argon2 password hashes live in cloud.yaml (``dashboard.users``);
  ``edgewave-cloud add-user`` makes an entry. The role is read from the settings on
  every request, so a session never outlives a user's removal or demotion (after a restart).
- Roles: ``viewer`` sees everything; ``operator`` may also push, acknowledge and roll
  back. Every POST endpoint goes through ``form_for`` with the role it needs.
- The session cookie (Starlette's SessionMiddleware, signed: HttpOnly, SameSite=Lax,
  Secure when ``dashboard.secure_cookies`` is set, behind TLS) carries a random
  session id and the CSRF token; who is logged in is kept server-side
  (``sessions.py``), so logout and a password change end a session for good.
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
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from edgewave.cloud.settings import DASHBOARD_ROLES, DashboardSettings

from .sessions import SessionStore, credential_of

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
        self._credentials = {name: credential_of(entry["password_hash"]) for name, entry in self._entries.items()}
        self._dummy_hash = _hasher.hash(secrets.token_hex(16))

    def __len__(self) -> int:
        return len(self._entries)

    def credentials(self) -> dict[str, str]:
        """Each user's ``credential_of`` their password hash: sessions opened under another are over."""
        return dict(self._credentials)

    def credential(self, name: str) -> str | None:
        return self._credentials.get(name)

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
            return self._wait(user, address, now)

    def _wait(self, user: str, address: str, now: float) -> float | None:
        waits = []
        for key, limit in ((f"user:{user}", self.per_user), (f"addr:{address}", self.per_address)):
            times = self._recent(key, now)
            if len(times) >= limit:
                waits.append(times[len(times) - limit] + self.window_s - now)
        return max(waits) if waits else None

    def attempt(self, user: str, address: str, now: float | None = None) -> float | None:
        """Before a password is verified: None, and the attempt is counted as failed until
        ``succeeded`` says otherwise; or the seconds to wait, and nothing counted. Checking and
        counting in one step is what holds the limit against concurrent attempts: each takes a
        slot before the slow hash is verified, so no more than the limit are ever verified."""
        now = time.monotonic() if now is None else now
        with self._lock:
            wait = self._wait(user, address, now)
            if wait is None:
                self._count(user, address, now)
            return wait

    def failed(self, user: str, address: str, now: float | None = None) -> int:
        """Count a failed login; returns the user name's failures within the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._count(user, address, now)
            return len(self._failures[f"user:{user}"])

    def failures(self, user: str) -> int:
        with self._lock:
            return len(self._failures.get(f"user:{user}", ()))

    def _count(self, user: str, address: str, now: float) -> None:
        if len(self._failures) >= self.MAX_KEYS:
            for key in list(self._failures):
                self._recent(key, now)
        for key in (f"user:{user}", f"addr:{address}"):
            self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, user: str, address: str | None = None) -> None:
        """A good password clears the user's failures (not the address's: other names may be
        guessed from it), and the address's slot that ``attempt`` took for this login."""
        with self._lock:
            self._failures.pop(f"user:{user}", None)
            times = self._failures.get(f"addr:{address}") if address is not None else None
            if times:
                times.pop()


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


SESSION_KEY = "sid"
USER_SCOPE_KEY = "edgewave.user"
"""Where a request keeps the user its session resolved to (``resolve_user``), for the rest of the request."""


def _sessions(request: Request) -> SessionStore:
    return request.app.state.sessions


def start_session(request: Request, user: User) -> None:
    """A fresh session for ``user``: nothing of the anonymous one (its CSRF token included) carries over."""
    users: Users = request.app.state.users
    session_id = _sessions(request).open(user.name, users.credential(user.name) or "", client_address(request))
    request.session.clear()
    request.session.update({SESSION_KEY: session_id, "csrf": secrets.token_urlsafe(32)})
    request.scope[USER_SCOPE_KEY] = user


def end_session(request: Request) -> None:
    """Logout: the session is deleted server-side, so this cookie and every copy of it are refused from now on."""
    _sessions(request).revoke(request.session.get(SESSION_KEY))
    request.session.clear()
    request.scope[USER_SCOPE_KEY] = None


def resolve_user(request: Request) -> User | None:
    """The user of the request's session (one look-up in the session table); see ``current_user``."""
    session_id = request.session.get(SESSION_KEY)
    found = _sessions(request).get(session_id) if session_id else None
    user = None
    if found is not None:
        users: Users = request.app.state.users
        user = users.get(found.user)
        if user is not None and users.credential(user.name) != found.credential:
            log.info("dashboard session ended user=%s reason=password_changed", user.name)
            _sessions(request).revoke(session_id)
            user = None
    request.scope[USER_SCOPE_KEY] = user
    return user


def current_user(request: Request) -> User | None:
    """The logged-in user, with the role cloud.yaml gives them now; None if not logged in (or logged out)."""
    if USER_SCOPE_KEY in request.scope:
        return request.scope[USER_SCOPE_KEY]
    return resolve_user(request)


class SessionWatch:
    """Whether a long-lived response's session still holds (a server-sent event stream):
    looked up again every ``every_s``, so a stream ends within seconds of its user logging out,
    being removed or changing password, instead of streaming on until the browser closes it.
    The browser's EventSource then reconnects, gets 401 and stops."""

    def __init__(self, request: Request, every_s: float = 2.0) -> None:
        self.request = request
        self.every_s = every_s
        self._checked = time.monotonic()

    async def ended(self) -> bool:
        now = time.monotonic()
        if now - self._checked < self.every_s:
            return False
        self._checked = now
        self.request.scope.pop(USER_SCOPE_KEY, None)
        user = await run_in_threadpool(resolve_user, self.request)
        if user is None:
            log.info("dashboard stream ended path=%s reason='session ended'", self.request.url.path)
        return user is None


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
