"""add-user's edit of cloud.yaml: the entry goes in, everything else (comments, nulls, indentation) stays."""
from __future__ import annotations

import pytest
import yaml

from edgewave.cloud.dashboard.user_entries import UserEntryError, check_name_free, with_user

ENTRY = {"role": "viewer", "password_hash": "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"}


def test_a_file_without_a_dashboard_section_gets_one():
    text = "database: var/cloud/cloud.db   # the aggregates\nbroker:\n  username: null\n"
    new = with_user(text, "olga", ENTRY)
    assert new.startswith(text)
    assert yaml.safe_load(new)["dashboard"] == {"users": {"olga": ENTRY}}


def test_an_empty_file_gets_the_entry():
    assert yaml.safe_load(with_user("", "olga", ENTRY)) == {"dashboard": {"users": {"olga": ENTRY}}}


def test_four_space_indentation_and_comments_are_kept():
    text = ("dashboard:\n    port: 8090      # where it listens\n    users:\n        bob:\n"
            "            role: operator\n            password_hash: $argon2id$x\n    state_db: null\n")
    new = with_user(text, "olga", ENTRY)
    assert "    port: 8090      # where it listens\n" in new and "    state_db: null\n" in new
    assert "        olga:\n            role: viewer\n" in new
    assert yaml.safe_load(new)["dashboard"]["users"] == {"bob": {"role": "operator", "password_hash": "$argon2id$x"},
                                                         "olga": ENTRY}


def test_a_taken_name_needs_replace(tmp_path):
    config = tmp_path / "cloud.yaml"
    config.write_text("dashboard:\n  users:\n    olga: {role: operator, password_hash: $argon2id$x}\n")
    with pytest.raises(UserEntryError, match="already has 'olga'"):
        check_name_free(config, "olga", replace=False)
    assert check_name_free(config, "olga", replace=True) is True
    assert check_name_free(config, "bob", replace=False) is False


@pytest.mark.parametrize("text, reason", [("- a\n- b\n", "top level"), ("dashboard: 3\n", "dashboard is not"),
                                          ("dashboard:\n  users: [a]\n", "users is not"), ("a: [\n", "not valid")])
def test_a_file_that_cannot_take_the_entry_is_refused(text, reason):
    with pytest.raises(UserEntryError, match=reason):
        with_user(text, "olga", ENTRY)
