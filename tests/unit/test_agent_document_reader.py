"""A gateway's config documents are read by a child process: the same result and the same
refusals as reading in process, and a child that gives no answer fails the document, not the agent.

This test session has rdflib loaded, where ``read_document`` reads in process by default, so
each test asks for the child; a real agent's use of it is in test_agent_instances.py."""
from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest
from agent_harness import AVERAGE, FIRE, KEY, config_document

from edgewave.agent import document_reader, reconfigure
from edgewave.agent.config import settings_from_dict
from edgewave.agent.document_reader import DocumentReaderFailed, read_document
from edgewave.agent.engine.config_check import check_config_document, parse_document
from edgewave.agent.reconfigure import DECODER_ERROR, REJECTED, compile_document, document_limits, judge
from edgewave.shared.configdoc import ConfigRejected, DocumentLimits, sign_envelope

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings_from_dict({"gateway": "gw1", "config": {"key": KEY}})
SPARQL_ERROR = AVERAGE.replace("GROUP BY", "GROUP BY BY")


def test_the_demo_document_reads_the_same_as_in_process() -> None:
    text = (REPO / "configs" / "gateway-config.trig").read_text()
    here = parse_document(text, "trig", DocumentLimits())
    there = read_document(text, "trig", DocumentLimits(), in_child=True)
    for part in ("schema", "static", "mappings"):   # rdflib's graphs iterate in no fixed order
        assert sorted(getattr(there.document, part)) == sorted(getattr(here.document, part))
        setattr(there.document, part, sorted(getattr(there.document, part)))
        setattr(here.document, part, sorted(getattr(here.document, part)))
    assert there.document == here.document
    assert there.algebras == here.algebras and there.algebras     # the demo has a per-instance query


@pytest.mark.parametrize("text", [
    "@prefix ew: <https://edgewave.dev/ns#> .\new:config { ew:p ew:query \"unterminated }\n",
    config_document(1, patterns={"fire": FIRE}) + "<urn:a> <urn:p> " + "[ <urn:p> " * 40 + "1" + " ]" * 40 + " .\n",
    config_document(1, patterns={"average": SPARQL_ERROR}),
], ids=["syntax", "too-deep", "sparql-syntax"])
def test_a_refused_document_is_refused_with_the_words_of_the_in_process_check(text: str) -> None:
    with pytest.raises(ConfigRejected) as here:
        check_config_document(text, "trig")
    with pytest.raises(ConfigRejected) as there:
        parsed = read_document(text, "trig", document_limits(SETTINGS), in_child=True)
        compile_document(1, "trig", text, SETTINGS, document_limits(SETTINGS), parsed)
    assert (there.value.reason, there.value.kind) == (here.value.reason, here.value.kind)


def test_a_document_read_by_the_child_runs_its_per_instance_query() -> None:
    text = config_document(1, patterns={"fire": FIRE, "average": AVERAGE})
    compiled = compile_document(1, "trig", text, SETTINGS, parsed=read_document(text, "trig", None, in_child=True))
    assert set(compiled.instance_queries) == {"average"} and set(compiled.patterns) == {"fire", "average"}
    assert compiled.instance_queries["average"].compile().aggregate is not None


@pytest.mark.parametrize("failure", ["exits", "times-out"])
def test_a_reader_that_gives_no_answer_rejects_the_document_and_the_agent_goes_on(monkeypatch, failure: str) -> None:
    if failure == "exits":
        monkeypatch.setattr(sys, "executable", "/bin/false")
    else:
        monkeypatch.setattr(document_reader, "READ_TIMEOUT_S", 0.001)
    monkeypatch.setattr(reconfigure, "read_document", partial(read_document, in_child=True))
    text = config_document(2, patterns={"fire": FIRE})
    with pytest.raises(DocumentReaderFailed):
        read_document(text, "trig", DocumentLimits(), in_child=True)
    verdict = judge(sign_envelope("gw1", 2, text, "trig", KEY), SETTINGS, KEY.encode(), None, None)
    assert (verdict.status, verdict.kind, verdict.version) == (REJECTED, DECODER_ERROR, 2)
    assert "document reader" in verdict.reason or "longer than" in verdict.reason
