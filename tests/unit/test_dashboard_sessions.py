"""The server-side session table: ids are not stored, sessions expire, logout and password changes end them."""
from __future__ import annotations

import sqlite3

from edgewave.cloud.dashboard import sessions
from edgewave.cloud.dashboard.sessions import SessionStore, credential_of


def test_a_session_is_found_by_its_id_which_the_file_does_not_hold(tmp_path):
    store = SessionStore(tmp_path / "dashboard.db", max_age_s=3600)
    sid = store.open("alice", credential_of("$argon2id$a"), "10.0.0.1")
    found = store.get(sid)
    assert found is not None and found.user == "alice" and found.credential == credential_of("$argon2id$a")
    assert store.get(sid + "x") is None and store.get("") is None
    stored = sqlite3.connect(tmp_path / "dashboard.db").execute("SELECT * FROM sessions").fetchall()
    assert len(stored) == 1 and sid not in repr(stored)


def test_logout_ends_the_session_for_every_copy_of_the_id(tmp_path):
    store = SessionStore(tmp_path / "dashboard.db", max_age_s=3600)
    sid, other = store.open("alice", "c", "a"), store.open("alice", "c", "b")
    assert store.revoke(sid) and not store.revoke(sid)
    assert store.get(sid) is None and store.get(other) is not None


def test_unused_sessions_expire_and_are_purged(tmp_path, monkeypatch):
    now = [1_000_000]
    monkeypatch.setattr(sessions.clock, "now_ms", lambda: now[0])
    store = SessionStore(tmp_path / "dashboard.db", max_age_s=600)
    kept, idle = store.open("alice", "c", "a"), store.open("victor", "c", "b")
    now[0] += 400_000
    assert store.get(kept) is not None            # used: its expiry moves on
    now[0] += 400_000
    assert store.get(kept) is not None and store.get(idle) is None
    assert store.count() == 1
    now[0] += 601_000
    store.open("carol", "c", "c")                 # a login purges what expired
    assert store.count() == 1 and store.get(kept) is None


def test_sessions_of_removed_users_or_older_passwords_end_at_start(tmp_path):
    store = SessionStore(tmp_path / "dashboard.db", max_age_s=3600)
    alice = store.open("alice", credential_of("$argon2id$old"), "a")
    victor = store.open("victor", credential_of("$argon2id$v"), "b")
    gone = store.open("mallory", credential_of("$argon2id$m"), "c")
    assert store.end_stale({"alice": credential_of("$argon2id$new"), "victor": credential_of("$argon2id$v")}) == 2
    assert store.get(alice) is None and store.get(gone) is None and store.get(victor) is not None
