"""Alarms from the live feed: one open alarm per gateway, pattern and key; acknowledge, clear; the follower resumes."""
from __future__ import annotations

import sqlite3
import time

import pytest

from cloud_harness import landing_record
from edgewave.cloud.dashboard.alarms import ACKNOWLEDGED, ACTIVE, CLEARED, EVIDENCE_PER_ALARM, AlarmError, AlarmStore
from edgewave.cloud.dashboard.follower import FeedFollower
from edgewave.cloud.live_feed import LiveFeedWriter
from edgewave.shared.events import match_event, significant_event

EX = "http://example.org/"


def fire(room: str, n: int, gateway: str = "gw1", pattern: str = "fire") -> dict:
    """A match whose first variable is the room and whose other bindings differ every time."""
    t = 1_700_000_000_000 + n * 1000
    triple = ((f"<{EX}obs{n}>", f"<{EX}in>", f"<{EX}{room}>"), t)
    return match_event(gateway, pattern, {"room": f"<{EX}{room}>", "obs": f"<{EX}obs{n}>"}, t - 500, t, [triple],
                       t + 10)


@pytest.fixture
def feed(tmp_path):
    writer = LiveFeedWriter(tmp_path / "live.db", max_rows=1000)
    yield writer
    writer.close()


def write(feed: LiveFeedWriter, *events: dict) -> None:
    feed.append([landing_record(e, int(time.time() * 1000)) for e in events])


def test_a_flapping_key_keeps_one_open_alarm_until_it_is_cleared(tmp_path, feed):
    store = AlarmStore(tmp_path / "dashboard.db")
    follower = FeedFollower(tmp_path / "live.db", store)
    write(feed, fire("room3", 1), fire("room3", 2), fire("room2", 3))
    assert follower.step() == 3
    alarms = store.list()
    assert [(a.pattern, a.key, a.count, a.state) for a in alarms] == [
        ("fire", [("room", f"<{EX}room2>")], 1, ACTIVE), ("fire", [("room", f"<{EX}room3>")], 2, ACTIVE)]
    room3 = alarms[1]
    # Acknowledged is still open: another match adds to it.
    store.acknowledge(room3.id, "alice", "crew on the way")
    write(feed, fire("room3", 4))
    follower.step()
    again = store.get(room3.id)
    assert (again.state, again.count, again.acked_by, again.ack_comment) == (ACKNOWLEDGED, 3, "alice", "crew on the way")
    assert again.last_seen_ms == 1_700_000_004_000 and again.first_seen_ms == 1_700_000_001_000
    assert len(store.list(states=(ACTIVE, ACKNOWLEDGED))) == 2
    # Cleared: the next match of the key opens a new alarm.
    store.clear(room3.id, "alice")
    write(feed, fire("room3", 5))
    follower.step()
    room3_alarms = [a for a in store.list() if a.key == [("room", f"<{EX}room3>")]]
    assert [(a.state, a.count) for a in room3_alarms] == [(ACTIVE, 1), (CLEARED, 3)]
    # The evidence of each match is kept with its alarm, newest first.
    assert [e["id"] for e in store.evidence(room3.id)] == [fire("room3", n)["id"] for n in (4, 2, 1)]


def test_keys_come_from_the_settings_and_other_gateways_or_patterns_are_other_alarms(tmp_path, feed):
    store = AlarmStore(tmp_path / "dashboard.db", {"fire": [], "smoke": ["obs"]})
    follower = FeedFollower(tmp_path / "live.db", store)
    write(feed, fire("room1", 1), fire("room2", 2), fire("room1", 3, gateway="gw2"), fire("room1", 4, pattern="smoke"),
          fire("room1", 5, pattern="smoke"))
    follower.step()
    got = sorted((a.gateway, a.pattern, a.binding_key, a.count) for a in store.list())
    assert got == [("gw1", "fire", "[]", 2), ("gw1", "smoke", f'[["obs","<{EX}obs4>"]]', 1),
                   ("gw1", "smoke", f'[["obs","<{EX}obs5>"]]', 1), ("gw2", "fire", "[]", 1)]


def test_only_matches_make_alarms_and_the_lifecycle_refuses_what_makes_no_sense(tmp_path, feed):
    store = AlarmStore(tmp_path / "dashboard.db")
    follower = FeedFollower(tmp_path / "live.db", store)
    signif = significant_event("gw1", f"<{EX}t1>", f"<{EX}Temp>", "21", 1_700_000_000_000,
                               [(f"<{EX}o>", f"<{EX}v>", '"21"')], 1_700_000_000_000)
    write(feed, signif, fire("room1", 1))
    follower.step()
    (alarm,) = store.list()
    with pytest.raises(AlarmError, match="comment is empty"):
        store.acknowledge(alarm.id, "alice", "   ")
    store.clear(alarm.id, "alice")
    with pytest.raises(AlarmError, match="cleared"):
        store.acknowledge(alarm.id, "alice", "too late")
    with pytest.raises(AlarmError, match="no alarm"):
        store.clear(alarm.id + 100, "alice")


def test_a_restarted_follower_resumes_after_its_last_seq_and_keeps_acknowledgements(tmp_path, feed):
    store = AlarmStore(tmp_path / "dashboard.db")
    write(feed, fire("room1", 1), fire("room1", 2))
    FeedFollower(tmp_path / "live.db", store).step()
    (alarm,) = store.list()
    store.acknowledge(alarm.id, "alice", "looking")
    store.close()
    write(feed, fire("room1", 3))
    reopened = AlarmStore(tmp_path / "dashboard.db")
    follower = FeedFollower(tmp_path / "live.db", reopened)
    assert follower.after == 2
    assert follower.step() == 1
    (alarm,) = reopened.list()
    assert (alarm.state, alarm.count) == (ACKNOWLEDGED, 3)
    # A feed made again from scratch (seq starts over): what was folded already is not counted twice.
    (tmp_path / "live.db").unlink()
    fresh = LiveFeedWriter(tmp_path / "live.db", max_rows=1000)
    try:
        fresh.append([landing_record(fire("room1", 3), 0), landing_record(fire("room1", 4), 0)])
        follower._check_reset()
        follower.step()
    finally:
        fresh.close()
    assert reopened.get(alarm.id).count == 4


def test_evidence_is_bounded_per_alarm_and_the_buffer_serves_new_rows(tmp_path, feed):
    store = AlarmStore(tmp_path / "dashboard.db")
    follower = FeedFollower(tmp_path / "live.db", store, buffer_rows=10)
    write(feed, *(fire("room1", n) for n in range(EVIDENCE_PER_ALARM + 5)))
    follower.step()
    (alarm,) = store.list()
    assert alarm.count == EVIDENCE_PER_ALARM + 5
    assert len(store.evidence(alarm.id, limit=1000)) == EVIDENCE_PER_ALARM
    conn = sqlite3.connect(tmp_path / "dashboard.db")
    assert conn.execute("SELECT COUNT(*) FROM alarm_matches").fetchone() == (EVIDENCE_PER_ALARM,)
    conn.close()
    last = follower.newest_seq
    assert follower.items_after(last) == []
    assert [i["seq"] for i in follower.items_after(last - 3)] == [last - 2, last - 1, last]
    assert follower.items_after(1) is None          # older than the buffer: the caller reads the file
    assert store.rev > 0 and store.list(after_rev=store.rev) == []
