"""Dashboard users, roles and the failed-login limiter."""
from __future__ import annotations

import pytest

from edgewave.cloud.dashboard.auth import LoginLimiter, User, Users, hash_password
from edgewave.cloud.settings import DashboardSettings, SettingsError


def test_passwords_verify_only_for_their_user():
    users = Users(DashboardSettings(users={"alice": {"role": "operator", "password_hash": hash_password("pw-of-alice")},
                                           "victor": {"role": "viewer", "password_hash": hash_password("pw-of-victor")}}))
    assert users.verify("alice", "pw-of-alice") == User("alice", "operator")
    assert users.verify("alice", "pw-of-victor") is None
    assert users.verify("mallory", "pw-of-alice") is None          # unknown names cost a hash too
    assert users.get("victor") == User("victor", "viewer") and users.get(None) is None


def test_roles_rank_operator_above_viewer():
    assert User("a", "operator").may("viewer") and User("a", "operator").may("operator")
    assert User("v", "viewer").may("viewer") and not User("v", "viewer").may("operator")


@pytest.mark.parametrize("entry, message", [
    ({"role": "admin", "password_hash": "$argon2id$x"}, "role must be one of viewer, operator"),
    ({"role": "viewer", "password_hash": "plaintext"}, "must be an argon2 hash"),
    ({"role": "viewer", "password_hash": "$argon2id$x", "pasword": "x"}, "unknown key"),
    ("just-a-string", "must be a mapping"),
])
def test_bad_user_entries_are_named(entry, message):
    with pytest.raises(SettingsError, match=message):
        DashboardSettings(users={"bob": entry})


def test_failures_per_user_lock_that_name_for_the_window():
    limiter = LoginLimiter(per_user=3, per_address=100, window_s=60)
    for t in (0, 1, 2):
        assert limiter.retry_after("alice", "10.0.0.1", now=t) is None
        limiter.failed("alice", "10.0.0.1", now=t)
    assert limiter.retry_after("alice", "10.0.0.9", now=3) == pytest.approx(57)   # from any address
    assert limiter.retry_after("bob", "10.0.0.1", now=3) is None                  # other names still may
    assert limiter.retry_after("alice", "10.0.0.1", now=60.5) is None             # the first failure expired


def test_failures_per_address_lock_every_name_from_it():
    limiter = LoginLimiter(per_user=100, per_address=4, window_s=60)
    for i in range(4):
        limiter.failed(f"guess{i}", "10.0.0.1", now=i)
    assert limiter.retry_after("alice", "10.0.0.1", now=5) == pytest.approx(55)
    assert limiter.retry_after("alice", "10.0.0.2", now=5) is None


def test_a_good_login_clears_the_users_failures_not_the_addresss():
    limiter = LoginLimiter(per_user=2, per_address=3, window_s=60)
    limiter.failed("alice", "10.0.0.1", now=0)
    limiter.failed("alice", "10.0.0.1", now=1)
    limiter.succeeded("alice")
    assert limiter.retry_after("alice", "10.0.0.2", now=2) is None
    limiter.failed("bob", "10.0.0.1", now=2)
    assert limiter.retry_after("carol", "10.0.0.1", now=3) is not None


def test_an_attempt_takes_its_slot_before_verification_and_a_good_one_gives_it_back():
    limiter = LoginLimiter(per_user=3, per_address=4, window_s=60)
    assert [limiter.attempt("alice", "10.0.0.1", now=t) for t in (0, 0, 0)] == [None, None, None]
    assert limiter.attempt("alice", "10.0.0.1", now=0) == pytest.approx(60)     # the fourth waits, uncounted
    assert limiter.failures("alice") == 3
    assert limiter.attempt("bob", "10.0.0.1", now=1) is None                    # the address's fourth slot
    limiter.succeeded("bob", "10.0.0.1")                                        # bob's password was good
    assert limiter.failures("bob") == 0
    assert limiter.attempt("carol", "10.0.0.1", now=2) is None                  # so the slot is free again
    assert limiter.attempt("dave", "10.0.0.1", now=2) is not None
