"""The configuration pages' pieces: push status that always ends, diffs, highlighting, and evidence views."""
from __future__ import annotations

import json

from edgewave.cloud.dashboard.configs import TIMED_OUT, Push, diff_lines
from edgewave.cloud.dashboard.evidence import evidence_of
from edgewave.cloud.dashboard.highlight import highlight


def push(status: str, pushed_ms: int = 1_000_000, reason: str = "") -> Push:
    return Push("gw1", 3, "trig", "", pushed_ms, status, reason, None)


def test_a_push_status_always_ends():
    assert push("pending").shown_status(now_ms=1_000_000 + 29_000, ack_timeout_s=30) == "pending"
    assert push("pending").shown_status(now_ms=1_000_000 + 31_000, ack_timeout_s=30) == TIMED_OUT
    assert push("timeout").shown_status(now_ms=1_000_001, ack_timeout_s=30) == TIMED_OUT
    assert push("applied").shown_status(now_ms=10 ** 12, ack_timeout_s=30) == "applied"
    assert push("rejected", reason="pattern 'x': bad").shown_status(now_ms=10 ** 12, ack_timeout_s=30) == "rejected"


def test_the_diff_of_two_versions_numbers_its_lines():
    old = "a\nb\nc\nd\n"
    new = "a\nB\nc\nd\ne\n"
    lines = [(l.kind, l.text, l.old_no, l.new_no) for l in diff_lines(old, new, "v1", "v2")]
    assert lines == [("file", "--- v1", None, None), ("file", "+++ v2", None, None), ("hunk", "@@ -1,4 +1,5 @@", None, None),
                     ("ctx", "a", 1, 1), ("del", "b", 2, None), ("add", "B", None, 2), ("ctx", "c", 3, 3),
                     ("ctx", "d", 4, 4), ("add", "e", None, 5)]
    assert diff_lines(old, old, "v1", "v1") == []


def test_patterns_are_highlighted_and_escaped():
    html = str(highlight('SELECT ?room WHERE { ?s ex:in <http://x/a> . FILTER(?t < 5) } # "<b>"'))
    assert '<span class="hl-kw">SELECT</span>' in html and '<span class="hl-var">?room</span>' in html
    assert '<span class="hl-pn">ex:in</span>' in html and '<span class="hl-iri">&lt;http://x/a&gt;</span>' in html
    assert '&lt; <span class="hl-num">5</span>' in html and '<span class="hl-com"># &#34;&lt;b&gt;&#34;</span>' in html
    assert "<b>" not in html


def test_evidence_marks_entailed_triples_with_their_source_and_axioms_and_works_without():
    triples = ['<http://x/o1> <http://x/type> <http://x/Smoke> .', '<http://x/o1> <http://x/v> "1" .']
    row = {"id": "urn:edgewave:event:1", "gateway": "gw1", "kind": "match", "pattern": "fire", "window_start": 1000,
           "window_end": 2000, "emitted_at": 2100, "ingest_ms": 2200, "bindings": [{"variable": "o", "value": "<http://x/o1>"}],
           "triples": triples}
    older = evidence_of(row)                      # an agent from before `entailed`
    assert [t.entailed for t in older.triples] == [False, False] and not older.reports_entailment
    assert older.bindings == [("o", "<http://x/o1>")] and (older.window_start, older.window_end) == (1000, 2000)
    none = evidence_of({**row, "entailed": []})   # says so: nothing was entailed
    assert none.reports_entailment and not any(t.entailed for t in none.triples)
    axioms = ["<http://x/AcmeSmoke> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://x/Smoke> ."]
    source = "<http://x/o1> <http://x/type> <http://x/AcmeSmoke> ."
    marked = evidence_of({**row, "entailed": [{"triple": triples[0], "from": source, "axioms": axioms},
                                              {"no": "triple"}, "junk"]})
    assert [(t.entailed, t.source, t.axioms) for t in marked.triples] == [(True, source, axioms), (False, None, [])]
    assert marked.as_json()["triples"][0]["entailed"] is True


def test_a_stored_config_version_that_is_not_a_number_reads_as_unknown(tmp_path):
    """A gateway row written before status documents were checked may hold any value."""
    import sqlite3

    from edgewave.cloud.dashboard.configs import applied_version
    from edgewave.cloud.dashboard.queries import Reader

    db = sqlite3.connect(tmp_path / "cloud.db")
    db.execute("CREATE TABLE gateways (gateway TEXT PRIMARY KEY, config_version)")
    db.execute("CREATE TABLE config_pushes (gateway TEXT, version INTEGER, status TEXT)")
    db.executemany("INSERT INTO gateways VALUES (?, ?)", [("gw1", "abc"), ("gw2", 7), ("gw3", 1.5)])
    db.execute("INSERT INTO config_pushes VALUES ('gw3', 4, 'applied')")
    db.commit()
    db.close()
    with Reader(tmp_path / "cloud.db").query() as q:
        assert applied_version(q, "gw1") is None
        assert applied_version(q, "gw2") == 7
        assert applied_version(q, "gw3") == 4      # the version it last acknowledged applying
        assert applied_version(q, "gw-unknown") is None


def test_push_signs_for_a_provisioned_gateway_without_a_key_in_cloud_yaml(tmp_path):
    """The gateway page offers the upload form's signing for gateways `gateway add` provisioned."""
    from edgewave.cloud.dashboard.app import _has_key
    from edgewave.cloud.settings import CloudSettings, FleetSettings, GatewaySettings

    settings = CloudSettings(fleet=FleetSettings(secrets_dir=str(tmp_path / "secrets")),
                             gateways={"gw1": GatewaySettings(key="k1")})
    key = settings.fleet.key_path("gw2")
    key.parent.mkdir(parents=True)
    key.write_text("k2\n")
    assert _has_key(settings, "gw1") and _has_key(settings, "gw2") and not _has_key(settings, "gw3")
