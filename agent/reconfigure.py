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

Nothing a pushed payload holds can make judging it fail: the envelope is read within
``config.max_envelope_bytes`` and a fixed nesting, the signature is checked before any
RDF parser runs, the document's size, nesting and terms are checked before rdflib
parses it (in a child process: document_reader.py), and whatever is raised after that
(RecursionError, MemoryError, a bug, a child that gives no answer) is a rejection of kind
``decoder_error``, with the error in the ack's reason.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from edgewave.agent.config import AgentSettings
from edgewave.agent.engine import Engine, Match, parse_query
from edgewave.agent.document_reader import read_document, reading_of
from edgewave.agent.engine.config_check import ParsedDocument, check_config_document, unprocessable
from edgewave.agent.engine.per_instance import InstanceQuery
from edgewave.shared import clock
from edgewave.shared.bounded_json import load_json
from edgewave.shared.configdoc import (ENVELOPE_MAX_DEPTH, LONG_MAX, REJECTION_KINDS, ConfigRejected,
                                       DocumentLimits, SignificanceRule, verify_envelope)

if TYPE_CHECKING:
    from edgewave.agent.mapping import CompiledMapping

Triple = tuple[str, str, str]

APPLIED = "applied"
REJECTED = "rejected"

# Rejection kinds decided here; the others come with ConfigRejected (shared/configdoc.py).
STALE_VERSION = "stale_version"
NO_KEY = "no_key"                    # the gateway has no (readable) key to verify with
DECODER_ERROR = "decoder_error"      # judging raised something unexpected
APPLY_FAILED = "apply_failed"        # judged fine, but the running engine refused it
VERDICT_KINDS = REJECTION_KINDS + (STALE_VERSION, NO_KEY, DECODER_ERROR, APPLY_FAILED)
# The cloud signs envelopes with "version" near the start; enough to name an unreadable one.
_VERSION_PEEK = re.compile(rb'"version"\s*:\s*(\d{1,19})(?![\d.eE])')
_PEEK_BYTES = 4096


def document_limits(settings: AgentSettings) -> DocumentLimits:
    """The agent's limits on pushed documents (``config.max_document_*``)."""
    c = settings.config
    return DocumentLimits(max_bytes=c.max_document_bytes, max_nesting=c.max_document_nesting,
                          max_terms=c.max_document_terms)


@dataclass
class CompiledConfig:
    """A config document that passed every check, ready to be applied to an engine."""

    version: int
    format: str
    document: str
    patterns: dict[str, str] = field(default_factory=dict)      # query name -> query text
    # The patterns evaluated per window instance (instance_queries.py), parsed once, and their
    # report policies; the other patterns are the continuous engine's.
    instance_queries: dict[str, InstanceQuery] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    schema: frozenset[Triple] = frozenset()
    static: frozenset[Triple] = frozenset()
    significance: list[SignificanceRule] = field(default_factory=list)
    # The payload mappings (agent/mapping/), compiled; the local link subscribes to their filters.
    mappings: tuple[CompiledMapping, ...] = ()
    # What the document reader made of the document (document_reader.reading_of): the config
    # store keeps it, so that a restart need not read the document again.
    reading: str = ""


@dataclass(frozen=True)
class ConfigChange:
    """What applying a document changed, for the log and the tests."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    static_added: int
    static_removed: int
    schema_changed: bool


def compile_document(version: int, fmt: str, text: str, settings: AgentSettings,
                     limits: DocumentLimits | None = None, parsed: ParsedDocument | None = None) -> CompiledConfig:
    """Parse and validate a document completely; raises ConfigRejected with an operator's reason.

    The checks are the engine package's ``check_config_document``, the same the cloud runs
    before it signs a document, given what only this gateway knows: its streams, its
    entailment setting and the envelope's version. ``limits`` (see ``document_limits``)
    apply to what comes from outside; None for a document the config store holds, which
    passed them when it was pushed. The document is read (rdflib) by a child process
    (document_reader.py), unless ``parsed`` is what it read already; a child that gives no
    answer raises DocumentReaderFailed."""
    if parsed is None:
        parsed = read_document(text, fmt, limits)
    checked = check_config_document(text, fmt, limits=limits, version=version, entailment=settings.engine.entailment,
                                    knows_stream=settings.knows_stream, parsed=parsed)
    doc = checked.document
    return CompiledConfig(version=version, format=fmt, document=text, patterns=checked.patterns,
                          instance_queries=checked.instance_queries, reports=checked.reports,
                          schema=frozenset(doc.schema), static=frozenset(doc.static),
                          significance=list(doc.significance), mappings=checked.mappings,
                          reading=reading_of(parsed))


def build_engine(config: CompiledConfig | None, settings: AgentSettings,
                 on_match: Callable[[Match], None] | None = None) -> Engine:
    """A fresh engine running ``config`` (no patterns when None); ``push`` returns its matches."""
    engine = Engine(schema=sorted(config.schema) if config else [], entailment=settings.engine.entailment,
                    on_match=on_match)
    if config:
        for name, text in config.patterns.items():
            if name not in config.instance_queries:
                engine.add_query(parse_query(text))
        if config.static:
            engine.add_static(sorted(config.static))
    return engine


def apply_difference(engine: Engine, old: CompiledConfig | None, new: CompiledConfig) -> ConfigChange:
    """Change a running engine from ``old`` to ``new``, touching only what differs (the
    per-instance queries change beside it: instance_queries.py)."""
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
        if name not in old.instance_queries:
            engine.remove_query(name)
    for name in added:
        if name not in new.instance_queries:
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
    kind: str | None = None          # why it was rejected: one of VERDICT_KINDS


def judge(payload: bytes, settings: AgentSettings, key: bytes, applied: CompiledConfig | None,
          high_water: int | None) -> Verdict:
    """Decide about one envelope from the cloud without touching anything. Never raises."""
    try:
        return _judge(payload, settings, key, applied, high_water)
    except Exception as exc:     # RecursionError, MemoryError, a bug: the document fails, not the agent
        try:
            version = _peek_version(payload, settings.config.max_envelope_bytes)
        except Exception:        # little stack left after a RecursionError
            version = None
        return Verdict(version, REJECTED, unprocessable(exc), kind=DECODER_ERROR)


def _judge(payload: bytes, settings: AgentSettings, key: bytes, applied: CompiledConfig | None,
           high_water: int | None) -> Verdict:
    try:
        envelope = verify_envelope(payload, key, gateway=settings.gateway,
                                   max_bytes=settings.config.max_envelope_bytes)
    except ConfigRejected as exc:
        return Verdict(_peek_version(payload, settings.config.max_envelope_bytes), REJECTED, exc.reason,
                       kind=exc.kind)
    if applied is not None and envelope.version == applied.version:
        if envelope.document == applied.document and envelope.format == applied.format:
            return Verdict(envelope.version, APPLIED, "already applied", applied, unchanged=True)
    floor = max(v for v in (high_water, applied.version if applied else None, -1) if v is not None)
    if envelope.version <= floor:
        return Verdict(envelope.version, REJECTED,
                       f"stale version: {envelope.version} is not above {floor}", kind=STALE_VERSION)
    try:
        compiled = compile_document(envelope.version, envelope.format, envelope.document, settings,
                                    document_limits(settings))
    except ConfigRejected as exc:
        return Verdict(envelope.version, REJECTED, exc.reason, kind=exc.kind)
    except Exception as exc:     # past the signature: name the version in the ack
        return Verdict(envelope.version, REJECTED, unprocessable(exc), kind=DECODER_ERROR)
    return Verdict(envelope.version, APPLIED, None, compiled)


def ack_payload(gateway: str, verdict: Verdict, applied_version: int | None) -> bytes:
    """The JSON ack for ``ew/<gateway>/config/ack``."""
    return json.dumps({"gateway": gateway, "version": verdict.version, "status": verdict.status,
                       "reason": verdict.reason, "appliedVersion": applied_version,
                       "at": clock.now_ms()}).encode()


def _peek_version(payload: bytes, max_bytes: int) -> int | None:
    """The version an envelope claims, for the ack of one that failed; None when unreadable.

    Never raises: the payload is one that just failed. It is read as JSON within the
    envelope's limits; when it is not JSON within them (too large, too deep, not UTF-8),
    its first bytes are searched for the version the cloud writes there, so the cloud
    can still match the ack to its push."""
    try:
        try:
            raw = load_json(payload, max_bytes=max_bytes, max_depth=ENVELOPE_MAX_DEPTH)
            version = raw.get("version") if isinstance(raw, dict) else None
        except Exception:
            found = _VERSION_PEEK.search(bytes(payload[:_PEEK_BYTES]))
            version = int(found.group(1)) if found else None
    except Exception:
        return None
    if isinstance(version, int) and not isinstance(version, bool) and 0 <= version <= LONG_MAX:
        return version
    return None
