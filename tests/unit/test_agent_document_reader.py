"""A gateway's config documents are read by a child process: the same result and the same
refusals as reading in process, and a child that gives no answer fails the document, not the agent.

This test session has rdflib loaded, where ``read_document`` reads in process by default, so
each test asks for the child; a real agent's use of it is in test_agent_instances.py."""
from __future__ import annotations

import sqlite3
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


# -- a restart reads nothing: the config store keeps the reading --------------------------------------

def open_agent(tmp_path: Path):   # noqa: ANN201
    """An agent's start-up without the network: its config from the store, or the bootstrap file."""
    from edgewave.agent.runtime import Agent
    bootstrap = tmp_path / "bootstrap.trig"
    if not bootstrap.exists():
        bootstrap.write_text(config_document(1, patterns={"fire": FIRE, "average": AVERAGE}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), "significance": {"enabled": False},
                                      "config": {"key": KEY, "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent


def counting_reads(monkeypatch) -> list[str]:   # noqa: ANN001
    """Every document the agent has read (the reader's child, or rdflib in this process)."""
    from edgewave.agent import config_apply
    reads: list[str] = []

    def read(text: str, *args, **kwargs):   # noqa: ANN002, ANN003, ANN202
        reads.append(text)
        return read_document(text, *args, **kwargs)
    monkeypatch.setattr(reconfigure, "read_document", read)
    monkeypatch.setattr(config_apply, "read_document", read)
    return reads


def test_a_restart_compiles_the_stored_document_from_the_reading_kept_with_it(tmp_path, monkeypatch, caplog):
    reads = counting_reads(monkeypatch)
    first = open_agent(tmp_path)
    assert len(reads) == 1                          # the bootstrap file, read once
    first.configs.store.close()
    with caplog.at_level("INFO", logger="edgewave.agent"):
        second = open_agent(tmp_path)
    assert len(reads) == 1                          # the restart read nothing
    assert any("config event=loaded version=1" in r.getMessage() and "source=store reading=kept" in r.getMessage()
               for r in caplog.records)
    a, b = first.configs.applied, second.configs.applied
    assert (b.patterns, b.reports, b.schema, b.static) == (a.patterns, a.reports, a.schema, a.static)
    assert b.instance_queries["average"].compile().aggregate is not None


@pytest.mark.parametrize("change", ["other-code", "undecodable"])
def test_a_reading_from_other_code_or_one_that_does_not_decode_is_read_again(tmp_path, monkeypatch, caplog, change):
    reads = counting_reads(monkeypatch)
    open_agent(tmp_path).configs.store.close()
    column, value = ("reading_by", "0.0.1/0") if change == "other-code" else ("reading", '{"version": 1')
    conn = sqlite3.connect(tmp_path / "data" / "configs.db")
    conn.execute(f"UPDATE applied SET {column} = ?", (value,))
    conn.commit()
    conn.close()
    with caplog.at_level("INFO", logger="edgewave.agent"):
        again = open_agent(tmp_path)
    assert len(reads) == 2 and set(again.configs.applied.patterns) == {"fire", "average"}
    assert any("source=store reading=read" in r.getMessage() for r in caplog.records)


def test_a_reading_round_trips_and_names_the_code_that_wrote_it() -> None:
    text = config_document(1, patterns={"fire": FIRE, "average": AVERAGE})
    parsed = read_document(text, "trig", None, in_child=False)
    reading = document_reader.reading_of(parsed)
    again = document_reader.parsed_from(reading, document_reader.reading_tag())
    assert again is not None and (again.document, again.algebras) == (parsed.document, parsed.algebras)
    assert document_reader.parsed_from(reading, "another/1") is None
    assert document_reader.parsed_from("", document_reader.reading_tag()) is None
