"""Status documents are checked against a schema where they enter the cloud; what is already stored
is read with a type check; config versions stay within what the cloud itself can push.

Real SQLite throughout; the agent's status document is built by agent/status.py's own code.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlite_utils

from edgewave.agent.outbox import OutboxStats
from edgewave.agent.status import COUNTER_NAMES, Counters, StatusReporter, encode_status, status_document
from edgewave.cloud import registry
from edgewave.cloud.dashboard import queries
from edgewave.cloud.database import transaction
from edgewave.cloud.registry import (LONG_MAX, MAX_REPORTED_VERSION, PushError, StatusError, check_status,
                                     ensure_registry_schema, parse_ack, parse_status, record_ack, record_status,
                                     reserve_version)


# -- what a real agent sends ---------------------------------------------------------------------

class _Landed:
    landed, resends, events = 120, 2, 7

    def __init__(self, state: str) -> None:
        self._state = state

    def oldest_age_s(self) -> float:
        return 1.25

    def state(self) -> str:
        return self._state


def real_status(tmp_path: Path, *, landed: str = "older_cloud", state: str = "online") -> dict:
    """StatusReporter.document() of agent/status.py, with every part present (uplink, outbox, key)."""
    settings = SimpleNamespace(gateway="gw1", status=SimpleNamespace(state_file="status.json"),
                               data_path=lambda name: tmp_path / name)
    counters = Counters()
    for i, name in enumerate(COUNTER_NAMES):
        counters.add(name, i * 1000)
    writer = SimpleNamespace(
        outbox=SimpleNamespace(stats=lambda: OutboxStats(depth=42, bytes=12_600, oldest_age_ms=5_300, dropped=3,
                                                         dropped_full=1, dropped_expired=2, refused=0)),
        unwritten=0, unwritten_bytes=0, acks_held=0, grouped=2)
    uplink = SimpleNamespace(forwarded=500, bytes_forwarded=40_000, inflight=4, bad_landed_acks=0,
                             landed=_Landed(landed))
    configs = SimpleNamespace(version=7, key_status=lambda: {
        "keyId": "0123456789abcdef", "nextKeyId": "fedcba9876543210", "switched": False,
        "overlapUntil": 1_767_600_120_000})
    reporter = StatusReporter(settings, counters,
                              pipeline=SimpleNamespace(engine_counters={"entailed": 9, "triples_in": 99}),
                              configs=configs, writer=writer, uplink=uplink)
    return reporter.document(state)


def test_every_status_a_real_agent_sends_is_kept_whole(tmp_path):
    doc = real_status(tmp_path)
    assert doc["warnings"] and doc["configKey"] and doc["outbox"]["landedAcks"] == "older_cloud"
    assert doc["outbox"]["oldestUnlandedAgeMs"] == 1250
    assert parse_status(encode_status(doc)) == doc
    for variant in (real_status(tmp_path, landed="end_to_end"), real_status(tmp_path, state="offline"),
                    status_document("gw1", "online"),                   # before the first config: version null
                    status_document("gw1", "offline", config_version=3, counters={}, outbox=None)):
        assert parse_status(encode_status(variant)) == json.loads(encode_status(variant))


@pytest.mark.parametrize("payload, expected", [
    (b'{"state": "online", "config_version": 3}', {"state": "online", "config_version": 3}),   # an older agent
    (b'{"state": "online"}', {"state": "online"}),
    (b"offline", {"state": "offline"}),                                                      # a plain-text Will
    (b'"offline"', {"state": "offline"}),
    (b"", {}),
    (b'{"state": "online", "at": 1767600120000, "extra": {"deep": [1, 2]}}', {"state": "online"}),  # unknown: not kept
    (b'{"outbox": {"depth": 1, "futureField": "x", "futureCount": 5}}',
     {"outbox": {"depth": 1, "futureField": "x", "futureCount": 5}}),
])
def test_old_agents_statuses_and_fields_left_out_are_accepted(payload, expected):
    assert parse_status(payload) == expected


MB = 1024 * 1024

HOSTILE = {
    "outbox.unwritten a string": ({"state": "online", "outbox": {"unwritten": "x"}}, "outbox.unwritten"),
    "counters.messages_in a string": ({"counters": {"messages_in": "abc"}}, "counters.messages_in"),
    "a counter that is a bool": ({"counters": {"matches": True}}, "counters.matches"),
    "a counter that is a float": ({"counters": {"matches": 1.5}}, "counters.matches"),
    "a counter beyond 64 bits": ({"counters": {"matches": 2 ** 64}}, "counters.matches"),
    "counters a list": ({"counters": [1, 2]}, "status counters must be an object"),
    "outbox a string": ({"outbox": "full"}, "status outbox must be an object"),
    "config version 2^63 - 1": ({"configVersion": LONG_MAX}, "configVersion"),
    "config version beyond what the cloud pushes": ({"configVersion": MAX_REPORTED_VERSION + 1}, "configVersion"),
    "config version a string": ({"config_version": "7"}, "config_version"),
    "state an object": ({"state": {"a": 1}}, "status state must be text"),
    "state of 10,000 characters": ({"state": "x" * 10_000}, "status state has 10000 characters"),
    "oldestAgeMs a float": ({"outbox": {"oldestAgeMs": 1e300}}, "outbox.oldestAgeMs"),
    "landedAcks a number": ({"outbox": {"landedAcks": 1}}, "outbox.landedAcks"),
    "warnings a string": ({"warnings": "disk full"}, "status warnings must be a list"),
    "a warning that is an object": ({"warnings": [{"a": 1}]}, "warnings[0]"),
    "a thousand warnings": ({"warnings": ["w"] * 1000}, "warnings has 1000 items"),
    "ten thousand counters": ({"counters": {f"c{i}": i for i in range(10_000)}}, "counters has 10000 fields"),
    "a counter name of markup": ({"counters": {"<script>": 1}}, "field name '<script>'"),
    "configKey.switched a string": ({"configKey": {"switched": "yes"}}, "configKey.switched"),
    "an outbox field holding an object": ({"outbox": {"new": {"a": 1}}}, "outbox.new"),
    "time negative": ({"time": -5}, "status time -5 is outside"),
    "a list, not an object": ([1, 2, 3], "must be a JSON object"),
    "a list of objects": ([{"state": "online"}], "must be a JSON object"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_status_is_refused_with_the_field_named(name):
    doc, reason = HOSTILE[name]
    with pytest.raises(StatusError, match=_re(reason)):
        parse_status(json.dumps(doc).encode())


@pytest.mark.parametrize("payload, reason", [
    (b"[" * MB, "nesting"),
    (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "nesting"),
    (b'{"counters": {"x": 123456789012345678901234567890}}', "digits"),
    (b'{"counters": {"x": NaN}}', "NaN"),
    (b'{"state": "' + b"x" * (2 * MB) + b'"}', "bytes"),
])
def test_a_megabyte_of_nesting_or_a_broken_number_is_refused(payload, reason):
    with pytest.raises(StatusError, match=reason):
        parse_status(payload)


def _re(text: str) -> str:
    import re
    return re.escape(text)


# -- config versions: bounded by what the cloud pushes -----------------------------------------------

@pytest.fixture
def db(tmp_path):
    database = sqlite_utils.Database(tmp_path / "cloud.db")
    ensure_registry_schema(database)
    yield database
    database.close()


def _status(db, gateway: str, status: dict, at: int = 1000) -> None:
    with transaction(db) as conn:
        record_status(conn, gateway, status, at)


def test_a_reported_version_counts_up_to_the_bound_and_the_next_version_always_fits(db):
    _status(db, "gw1", {"configVersion": 4})
    assert reserve_version(db, "gw1", "trig", "doc", 1) == 5            # the documented behaviour, kept
    _status(db, "gw2", {"configVersion": MAX_REPORTED_VERSION})
    assert reserve_version(db, "gw2", "trig", "doc", 1) == MAX_REPORTED_VERSION + 1


def test_a_row_stored_before_the_checks_fails_that_gateway_alone_and_records_nothing(db):
    # What ingest stored before statuses were checked: 2^63 - 1, whose successor SQLite cannot hold.
    with transaction(db) as conn:
        conn.execute("INSERT INTO gateways (gateway, state, config_version, last_status, first_seen_ms, "
                     "last_seen_ms) VALUES ('gw1', 'online', ?, '{}', 1, 1)", (LONG_MAX,))
        conn.execute("INSERT INTO gateways (gateway, state, config_version, last_status, first_seen_ms, "
                     "last_seen_ms) VALUES ('gw3', 'online', 'seven', '{}', 1, 1)")
    with pytest.raises(PushError, match=r"gw1 reports config version 9223372036854775807.*not pushed"):
        reserve_version(db, "gw1", "trig", "doc", 1)
    assert db.execute("SELECT COUNT(*) FROM config_pushes WHERE gateway = 'gw1'").fetchone() == (0,)
    assert reserve_version(db, "gw2", "trig", "doc", 1) == 1
    assert reserve_version(db, "gw3", "trig", "doc", 1) == 1            # a version that is not a number: none


def test_no_version_left_is_a_failure_not_an_overflow(db):
    with transaction(db) as conn:
        conn.execute("INSERT INTO config_pushes (gateway, version, status) VALUES ('gw1', ?, 'applied')",
                     (LONG_MAX,))
    with pytest.raises(PushError, match="no config version left"):
        reserve_version(db, "gw1", "trig", "doc", 1)


def test_an_applied_ack_for_a_version_never_pushed_does_not_raise_the_next_version(db):
    with transaction(db) as conn:
        record_ack(conn, "gw1", parse_ack(json.dumps({"status": "applied", "version": LONG_MAX}).encode()), 5)
    assert db.execute("SELECT config_version FROM gateways WHERE gateway = 'gw1'").fetchall() == []
    assert reserve_version(db, "gw1", "trig", "doc", 1) == 1
    with transaction(db) as conn:
        record_ack(conn, "gw1", parse_ack(b'{"status": "applied", "version": 1}'), 6)
    assert db.execute("SELECT config_version FROM gateways WHERE gateway = 'gw1'").fetchone() == (1,)
    assert reserve_version(db, "gw1", "trig", "doc", 1) == 2


def test_a_failed_push_is_recorded_for_its_gateway(db):
    version = reserve_version(db, "gw1", "trig", "doc", 1)
    registry.record_push_failure(db, "gw1", "broker did not acknowledge", 10, version)
    registry.record_push_failure(db, "gw2", "no key for gateway 'gw2'", 11)
    assert db.execute("SELECT status, reason FROM config_pushes").fetchall() == [("failed",
                                                                                   "broker did not acknowledge")]
    assert db.execute("SELECT gateway, version, reason FROM push_failures ORDER BY id").fetchall() == [
        ("gw1", version, "broker did not acknowledge"), ("gw2", None, "no key for gateway 'gw2'")]


# -- the dashboard reads whatever is stored -----------------------------------------------------------

STORED_BEFORE_THE_CHECKS = [
    {"state": "online", "outbox": {"unwritten": "x", "depth": "deep", "oldestAgeMs": [1]}},
    {"state": "online", "counters": {"messages_in": "abc", "matches": 1e308, "dropped": None, "bytes_in": True}},
    {"state": "online", "counters": "lots", "outbox": 7},
    {"state": ["not", "text"], "configVersion": {"v": 1}},
    {"state": "online", "outbox": {"oldestAgeMs": 10 ** 30, "unwritten": 10 ** 30}},
]


def _store_raw(path: Path, gateway: str, text: str, *, state=None, version=None, last_ms=None) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT OR REPLACE INTO gateways VALUES (?, ?, ?, ?, ?, ?)",
                     (gateway, state, version, text, last_ms, last_ms))
        conn.execute("INSERT INTO status_history (gateway, received_ms, state, config_version, payload) "
                     "VALUES (?, ?, ?, ?, ?)", (gateway, last_ms, state, version, text))
    conn.close()


@pytest.mark.parametrize("text", [json.dumps(d) for d in STORED_BEFORE_THE_CHECKS]
                         + ['{"counters": {"x": Infinity}, "outbox": {"depth": NaN}}', "not json", "[1, 2]",
                            '{"a":' * 5000 + "1" + "}" * 5000, '{"counters": {"x": ' + "9" * 5000 + "}}"])
def test_rows_written_before_the_checks_read_typed(tmp_path, db, text):
    now = 10_000_000
    _status(db, "gw-ok", {"state": "online", "counters": {"messages_in": 5}, "outbox": {"depth": 2}}, now)
    _store_raw(tmp_path / "cloud.db", "gw-bad", text, state="online", version="seven", last_ms=now)
    with queries.Reader(tmp_path / "cloud.db").query() as q:
        rows = {r.gateway: r for r in queries.gateway_rows(q, now, 60, 60)}
        bad = queries.gateway_row(q, "gw-bad", now, 60, 60)
        history = queries.status_history(q, "gw-bad")
    assert rows["gw-ok"].counter("messages_in") == 5 and rows["gw-ok"].outbox_depth == 2
    for row in (rows["gw-bad"], bad):
        json.dumps({"counters": row.counters, "depth": row.outbox_depth, "oldest": row.oldest_unsent_ms,
                    "drops": row.drops, "saved": row.bytes_saved, "version": row.config_version}, allow_nan=False)
        assert all(type(v) is int for v in row.counters.values())
        assert row.config_version is None
        assert row.health in queries.HEALTH_ORDER
    for h in history:
        json.dumps(h.status, allow_nan=False)
        for name in ("messages_in", "matches", "dropped", "bytes_in", "x"):
            assert h.counter(name) is None or type(h.counter(name)) is int
        assert h.outbox("depth") is None or type(h.outbox("depth")) is int


def test_the_configuration_pages_read_a_stored_version_that_is_not_a_number(tmp_path, db):
    from edgewave.cloud.dashboard import config_pages

    _store_raw(tmp_path / "cloud.db", "gw1", "{}", state="online", version="seven", last_ms=1)
    _store_raw(tmp_path / "cloud.db", "gw2", "{}", state="online", version=LONG_MAX, last_ms=1)
    with queries.Reader(tmp_path / "cloud.db").query() as q:
        assert config_pages._applied_version(q, "gw1") is None
        assert config_pages._applied_version(q, "gw2") == LONG_MAX
