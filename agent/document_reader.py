"""Config documents read by a short-lived child process, so the agent never imports rdflib.

Reading a config document takes rdflib (TriG, and the SPARQL parser for per-instance
queries): some 15 MB of modules and a parse that peaks near 40 MB, which would stay with a
gateway's agent for its whole life (Python does not give imported modules back), on a
device whose agent should live in 40 MB. So the agent has each document it applies read
here: ``read_document`` runs ``python -m edgewave.agent.document_reader``, which parses the
document within its limits (``config_check.parse_document``) and writes back, as JSON, what
the document says and each per-instance query's algebra (per_instance/algebra.py). The
agent then runs the rest of the one check (``check_config_document`` with ``parsed=``) in
its own process, with the same messages as the cloud.

The price: a process start per document applied (about 0.5 s of CPU on the benchmark VM,
a few seconds on a Raspberry Pi 3), paid when the cloud pushes a document and at the first
start from a bootstrap file; the child's memory is returned when it exits. A restart pays
nothing: the config store keeps the reading beside the document (``reading_of``), tagged
by the code that wrote it (``reading_tag``), and ``parsed_from`` gives it back. A child
that crashes, runs past ``READ_TIMEOUT_S`` or answers nonsense fails the document
(``DocumentReaderFailed``), never the agent.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

from edgewave.agent.engine.config_check import ParsedDocument, parse_document
from edgewave.agent.engine.per_instance.algebra import from_json, to_json
from edgewave.agent.engine.query import QuerySyntaxError
from edgewave.shared.alert_text import AlertText
from edgewave.shared.configdoc import ConfigDocument, ConfigRejected, DocumentLimits, SignificanceRule

# A document within the default limits reads in well under a second on the benchmark VM; a
# Raspberry Pi is several times slower, and a hostile document within the limits slower still.
READ_TIMEOUT_S = 120.0


class DocumentReaderFailed(RuntimeError):
    """The child process did not give an answer (crashed, timed out, or wrote something else)."""


def read_document(text: str, fmt: str, limits: DocumentLimits | None, *,
                  in_child: bool | None = None) -> ParsedDocument:
    """``parse_document(text, fmt, limits)``, run in a child process; raises ConfigRejected as it
    does, and DocumentReaderFailed when the child gives no answer.

    ``in_child`` None: in a child unless this process has loaded rdflib already. An agent run
    by ``edgewave-agent run`` never has; a process that has (one that embeds the agent beside
    the cloud's own checks, a test session) would gain no memory from the child, only its cost."""
    if in_child is None:
        in_child = "rdflib" not in sys.modules
    if not in_child:
        return parse_document(text, fmt, limits)
    request = {"text": text, "format": fmt, "limits": dataclasses.asdict(limits) if limits is not None else None}
    try:
        child = subprocess.run([sys.executable, "-m", "edgewave.agent.document_reader"],
                               input=json.dumps(request).encode(), capture_output=True, timeout=READ_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise DocumentReaderFailed(f"reading the document took longer than {READ_TIMEOUT_S:.0f} s") from None
    if child.returncode != 0:
        last = (child.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise DocumentReaderFailed(f"the document reader exited with {child.returncode}: {last[:300]}")
    try:
        answer = json.loads(child.stdout)
        if "rejected" in answer:
            raise ConfigRejected(answer["rejected"]["reason"], answer["rejected"]["kind"])
        return decode(answer["parsed"])
    except ConfigRejected:
        raise
    except Exception as exc:
        raise DocumentReaderFailed(f"the document reader's answer is unreadable: {type(exc).__name__}: {exc}") from exc


# What ``encode`` writes; a change to it, or to what ``parse_document`` returns, changes this
# number, so that readings the config store kept from before are read afresh.
READING_FORMAT = 1


def reading_tag() -> str:
    """Which code wrote a reading: the agent's version and ``READING_FORMAT``."""
    from edgewave.agent.window_journal import engine_version   # importlib.metadata: only when asked
    return f"{engine_version()}/{READING_FORMAT}"


def reading_of(parsed: ParsedDocument) -> str:
    """What the reader made of a document, as the config store keeps it."""
    return json.dumps(encode(parsed), separators=(",", ":"))


def parsed_from(reading: str, tag: str) -> ParsedDocument | None:
    """A kept reading, if this code wrote it and it decodes; None: read the document again."""
    if not reading or tag != reading_tag():
        return None
    try:
        return decode(json.loads(reading))
    except Exception:      # a reading that does not decode costs a read, never the document
        return None


def encode(parsed: ParsedDocument) -> dict[str, Any]:
    """A ParsedDocument as JSON values."""
    doc = parsed.document
    algebras = {}
    for sparql, outcome in parsed.algebras.items():
        if isinstance(outcome, QuerySyntaxError):
            algebras[sparql] = {"error": [outcome.message, outcome.line, outcome.column, list(outcome.expected)]}
        else:
            algebras[sparql] = {"algebra": to_json(outcome)}
    return {
        "version": doc.version, "patterns": doc.patterns, "reports": doc.reports,
        "alerts": {name: dataclasses.asdict(alert) for name, alert in doc.alerts.items()},
        "schema": doc.schema, "static": doc.static, "mappings": doc.mappings,
        "significance": [dataclasses.asdict(rule) for rule in doc.significance],
        "algebras": algebras,
    }


def decode(data: dict[str, Any]) -> ParsedDocument:
    """What ``encode`` wrote, as the ParsedDocument again."""
    def triples(rows: list) -> list[tuple[str, str, str]]:
        return [(s, p, o) for s, p, o in rows]

    doc = ConfigDocument(
        version=data["version"], patterns=dict(data["patterns"]), reports=dict(data["reports"]),
        alerts={name: AlertText(**fields) for name, fields in data["alerts"].items()},
        schema=triples(data["schema"]), static=triples(data["static"]), mappings=triples(data["mappings"]),
        significance=[SignificanceRule(**fields) for fields in data["significance"]])
    algebras: dict[str, Any] = {}
    for sparql, outcome in data["algebras"].items():
        if "error" in outcome:
            message, line, column, expected = outcome["error"]
            algebras[sparql] = QuerySyntaxError(message, line, column, expected)
        else:
            algebras[sparql] = from_json(outcome["algebra"])
    return ParsedDocument(doc, algebras)


def main() -> int:
    """The child: a request on stdin, the answer on stdout (exit 0 whenever there is one)."""
    request = json.loads(sys.stdin.buffer.read())
    limits = DocumentLimits(**request["limits"]) if request["limits"] is not None else None
    try:
        answer = {"parsed": encode(parse_document(request["text"], request["format"], limits))}
    except ConfigRejected as exc:
        answer = {"rejected": {"reason": exc.reason, "kind": exc.kind}}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
