"""Reconfiguration by pushed RDF: verify, compile, dry-run, then swap in only the difference.

INSTANS (section 4) reconfigures the lower layer by sending it triples. Here a signed
config document arrives on ``ew/<gateway>/config``. It is checked in the order an
operator would want the reasons: signature and addressee, version above the applied
one, document syntax, each pattern's syntax (line and column), streams the gateway can
actually receive, and finally a trial build of a whole engine from it. Only a document
that survives all of that touches the running engine, and then only by difference:

- patterns whose text did not change stay registered, so their partial matches live on;
- static triples (thresholds that patterns join against) are removed/added in place;
- the schema is replaced only if it changed;
- significance rules are swapped in the filter, keeping its remembered values.

A rejected document changes nothing. Either way the cloud gets an ack.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

from edgewave.agent.config import AgentSettings
from edgewave.agent.engine import Engine, Match, parse_query
from edgewave.agent.engine.query import QuerySyntaxError
from edgewave.shared.configdoc import (ConfigRejected, SignificanceRule, load_config_document,
                                       verify_envelope)

Triple = tuple[str, str, str]

APPLIED = "applied"
REJECTED = "rejected"


@dataclass
class CompiledConfig:
    """A config document that passed every check, ready to be applied to an engine."""

    version: int
    format: str
    document: str
    patterns: dict[str, str] = field(default_factory=dict)      # query name -> query text
    schema: frozenset[Triple] = frozenset()
    static: frozenset[Triple] = frozenset()
    significance: list[SignificanceRule] = field(default_factory=list)


@dataclass(frozen=True)
class ConfigChange:
    """What applying a document changed, for the log and the tests."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    static_added: int
    static_removed: int
    schema_changed: bool


def compile_document(version: int, fmt: str, text: str, settings: AgentSettings) -> CompiledConfig:
    """Parse and validate a document completely; raises ConfigRejected with an operator's reason."""
    doc = load_config_document(text, fmt)
    if doc.version is not None and doc.version != version:
        raise ConfigRejected(f"version mismatch: envelope says {version}, document says {doc.version}")
    patterns: dict[str, str] = {}
    trial = Engine(schema=list(doc.schema), entailment=settings.engine.entailment, on_match=lambda m: None)
    for label, query_text in sorted(doc.patterns.items()):
        try:
            query = parse_query(query_text)
        except QuerySyntaxError as exc:
            line, column = getattr(exc, "line", "?"), getattr(exc, "column", "?")
            message = getattr(exc, "message", None) or str(exc)
            raise ConfigRejected(f"parse error in pattern {label} at line {line} column {column}: {message}") from exc
        if query.name in patterns:
            raise ConfigRejected(f"duplicate pattern name {query.name}")
        for window in query.windows.values():
            streams = window.streams() if hasattr(window, "streams") else (window.stream,)
            for stream in streams:
                if not settings.knows_stream(stream):
                    raise ConfigRejected(f"unknown stream {stream} in pattern {query.name}: "
                                         "no input.streams entry or default_stream rule reaches it")
        try:
            trial.add_query(query)
        except Exception as exc:
            raise ConfigRejected(f"pattern {query.name} cannot be compiled: {exc}") from exc
        patterns[query.name] = query_text
    try:
        trial.add_static(list(doc.static))
    except Exception as exc:
        raise ConfigRejected(f"static data rejected by the engine: {exc}") from exc
    return CompiledConfig(version=version, format=fmt, document=text, patterns=patterns,
                          schema=frozenset(doc.schema), static=frozenset(doc.static),
                          significance=list(doc.significance))


def build_engine(config: CompiledConfig | None, settings: AgentSettings,
                 on_match: Callable[[Match], None]) -> Engine:
    """A fresh engine running ``config`` (no patterns when None)."""
    engine = Engine(schema=sorted(config.schema) if config else [], entailment=settings.engine.entailment,
                    on_match=on_match)
    if config:
        for text in config.patterns.values():
            engine.add_query(parse_query(text))
        if config.static:
            engine.add_static(sorted(config.static))
    return engine


def apply_difference(engine: Engine, old: CompiledConfig | None, new: CompiledConfig) -> ConfigChange:
    """Change a running engine from ``old`` to ``new``, touching only what differs."""
    old_patterns = old.patterns if old else {}
    old_static = old.static if old else frozenset()
    old_schema = old.schema if old else frozenset()
    schema_changed = new.schema != old_schema
    if schema_changed:
        engine.set_schema(sorted(new.schema))
    removed = tuple(n for n, t in old_patterns.items() if new.patterns.get(n) != t)
    added = tuple(n for n, t in new.patterns.items() if old_patterns.get(n) != t)
    kept = tuple(n for n in new.patterns if n not in added)
    for name in removed:
        engine.remove_query(name)
    for name in added:
        engine.add_query(parse_query(new.patterns[name]))
    gone = old_static - new.static
    fresh = new.static - old_static
    if gone:
        engine.remove_static(sorted(gone))
    if fresh:
        engine.add_static(sorted(fresh))
    return ConfigChange(added, removed, kept, len(fresh), len(gone), schema_changed)


@dataclass(frozen=True)
class Verdict:
    """The outcome for one pushed document: what to ack, and the compiled config if applicable."""

    version: int | None
    status: str
    reason: str | None
    config: CompiledConfig | None = None
    unchanged: bool = False


def judge(payload: bytes, settings: AgentSettings, key: bytes, applied: CompiledConfig | None,
          high_water: int | None) -> Verdict:
    """Decide about one envelope from the cloud without touching anything."""
    try:
        envelope = verify_envelope(payload, key, gateway=settings.gateway)
    except ConfigRejected as exc:
        return Verdict(_peek_version(payload), REJECTED, exc.reason)
    if applied is not None and envelope.version == applied.version:
        if envelope.document == applied.document and envelope.format == applied.format:
            return Verdict(envelope.version, APPLIED, "already applied", applied, unchanged=True)
    floor = max(v for v in (high_water, applied.version if applied else None, -1) if v is not None)
    if envelope.version <= floor:
        return Verdict(envelope.version, REJECTED,
                       f"stale version: {envelope.version} is not above {floor}")
    try:
        compiled = compile_document(envelope.version, envelope.format, envelope.document, settings)
    except ConfigRejected as exc:
        return Verdict(envelope.version, REJECTED, exc.reason)
    return Verdict(envelope.version, APPLIED, None, compiled)


def ack_payload(gateway: str, verdict: Verdict, applied_version: int | None) -> bytes:
    """The JSON ack for ``ew/<gateway>/config/ack``."""
    return json.dumps({"gateway": gateway, "version": verdict.version, "status": verdict.status,
                       "reason": verdict.reason, "appliedVersion": applied_version,
                       "at": int(time.time() * 1000)}).encode()


def _peek_version(payload: bytes) -> int | None:
    try:
        version = json.loads(payload).get("version")
    except Exception:
        return None
    return version if isinstance(version, int) and not isinstance(version, bool) else None
