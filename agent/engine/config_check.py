"""The one judgement of a config document's patterns, shared by the agent and the cloud.

A gateway compiles a pushed document in a trial engine before it applies it; the cloud
must refuse, before it signs and publishes, every document that trial would refuse, and
say so in the same words, or an operator learns of a bad pattern only from a rejected
ack. So both call ``check_config_document``: the agent when it applies a document
(``edgewave.agent.reconfigure.compile_document``), the cloud in ``push-config``, the
dashboard's push and upload forms and ``make-config``. It lives in the engine package
because it needs the engine and the cloud may import the engine but not the agent; like
the rest of the package it does no I/O.

What only a gateway knows stays the caller's to supply: the streams its sensor input
reaches (``knows_stream``, from the agent's ``input.streams`` and ``default_stream``), the
version the envelope carries (``version``), its document limits and whether it entails.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Union

from edgewave.shared.alert_text import AlertText, TemplateError, check_alert_text
from edgewave.shared.configdoc import ConfigDocument, ConfigRejected, DocumentLimits, load_config_document
from edgewave.shared.topics import filters_overlap

from .engine import Engine
from .per_instance.algebra import Op
from .per_instance.front import InstanceQuery, parse_for_evaluation, sparql_algebra
from .per_instance.reporting import DEFAULT_POLICY, ReportPolicy
from .query import QuerySyntaxError
from .steps import stream_key

if TYPE_CHECKING:
    from edgewave.agent.mapping import CompiledMapping

DEFAULT_LIMITS = DocumentLimits()
# A mapping's name is part of its counters' names (payload_rejected.<mapping>.<reason>), which
# the cloud takes as at most 64 letters, digits and _.:- (cloud/registry.py).
_MAPPING_NAME = re.compile(r"[A-Za-z0-9_:-]{1,30}")


@dataclass(frozen=True)
class CheckedDocument:
    """A document that passed every check: what it says, and its patterns by the name they register."""

    document: ConfigDocument
    patterns: dict[str, str]      # the name after REGISTER -> the query text
    alerts: dict[str, AlertText]  # the name after REGISTER -> its alert text, where it has one
    # The patterns evaluated per window instance (docs/engine.md), parsed, and their report policies.
    instance_queries: dict[str, InstanceQuery]
    reports: dict[str, str]
    # The RML mappings of sensor payloads, compiled (docs/mappings.md), in document order.
    mappings: tuple[CompiledMapping, ...] = ()


@dataclass(frozen=True)
class ParsedDocument:
    """A document as parsing leaves it: what it says, and what parsing each per-instance query's
    SPARQL part gave (its algebra, or the syntax error).

    Parsing is the part of the check that needs rdflib. A gateway has it done by a short-lived
    child process (``edgewave.agent.document_reader``) and hands the result to
    ``check_config_document``, which then runs the rest, in the same order and with the same
    messages, without rdflib in the gateway's own memory."""

    document: ConfigDocument
    algebras: Mapping[str, Union[Op, QuerySyntaxError]]   # by the SPARQL part's text

    def algebra_of(self, sparql: str) -> Op:
        outcome = self.algebras.get(sparql)
        if isinstance(outcome, QuerySyntaxError):
            raise QuerySyntaxError(outcome.message, outcome.line, outcome.column, outcome.expected)
        if outcome is None:   # parse_document saw every pattern: only a different text gets here
            raise QuerySyntaxError("this query's SPARQL part was not parsed with its document", 1, 1, ())
        return outcome


def parse_document(text: str, fmt: str, limits: DocumentLimits | None = DEFAULT_LIMITS) -> ParsedDocument:
    """Read ``text`` (rdflib) and parse the SPARQL part of each pattern evaluated per window
    instance; raises ConfigRejected as ``load_config_document`` does. A pattern's own errors
    are kept for ``check_config_document`` to raise in its turn."""
    doc = load_config_document(text, fmt, limits)
    algebras: dict[str, Union[Op, QuerySyntaxError]] = {}

    def recorded(sparql: str) -> Op:
        try:
            algebras[sparql] = sparql_algebra(sparql)
        except QuerySyntaxError as exc:
            algebras[sparql] = exc
            raise
        return algebras[sparql]

    for query_text in doc.patterns.values():
        try:
            parse_for_evaluation(query_text, algebra_of=recorded)
        except QuerySyntaxError:
            pass  # the check refuses it, in its turn
    return ParsedDocument(doc, algebras)


def unprocessable(exc: BaseException) -> str:
    """The reason given for a document whose judging raised something unexpected (RecursionError,
    MemoryError, a bug): the document fails, not the one judging it."""
    return f"document could not be processed: {type(exc).__name__}: {str(exc)[:200]}"


def check_version(declared: int | None, version: int) -> None:
    """Raise ConfigRejected when the document's own ``ew:version`` is not the envelope's ``version``.

    Separate from ``check_config_document`` because the cloud knows the version only once it
    has reserved one for a gateway."""
    if declared is not None and declared != version:
        raise ConfigRejected(f"version mismatch: envelope says {version}, document says {declared}")


def check_config_document(text: str, fmt: str, *, limits: DocumentLimits | None = DEFAULT_LIMITS,
                          version: int | None = None, entailment: bool = True,
                          knows_stream: Callable[[str], bool] | None = None,
                          parsed: ParsedDocument | None = None) -> CheckedDocument:
    """Parse ``text`` and compile every pattern of it in a trial engine with its schema and static data
    (a per-instance query compiles its own network when it is parsed).

    Raises ConfigRejected with the reason a gateway puts in its ack, checked in the order the
    gateway checks: the document's limits and syntax, ``version`` against the document's own
    (when given), then per pattern (by label) its syntax, a name registered twice, the streams
    it reads (when ``knows_stream`` is given), its alert text (shared/alert_text.py: a message
    naming only variables the pattern binds), its compilation, and last the static data.
    The payload mappings come before the patterns: the streams they feed are streams
    patterns may read. ``limits`` None: a document accepted before (a gateway's config store).
    ``parsed``: ``parse_document``'s result for ``text``, read elsewhere within ``limits``
    (then nothing here needs rdflib)."""
    doc = parsed.document if parsed is not None else load_config_document(text, fmt, limits)
    algebra_of = parsed.algebra_of if parsed is not None else None
    if version is not None:
        check_version(doc.version, version)
    mappings = check_mappings(doc)
    mapped = {stream_key(m.stream) for m in mappings}
    patterns: dict[str, str] = {}
    alerts: dict[str, AlertText] = {}
    instance_queries: dict[str, InstanceQuery] = {}
    reports: dict[str, str] = {}
    trial = Engine(schema=list(doc.schema), entailment=entailment, on_match=lambda m: None)
    queries: dict[str, object] = {}
    for label, query_text in sorted(doc.patterns.items()):
        try:
            queries[label] = parse_for_evaluation(query_text, algebra_of=algebra_of)
        except QuerySyntaxError:
            pass  # refused below, in its turn
    # The streams chained rules of this document make (rules.py) are streams patterns may read.
    made = {stream_key(q.name) for q in queries.values() if not isinstance(q, InstanceQuery) and q.construct}
    for label, query_text in sorted(doc.patterns.items()):
        try:
            query = queries[label] if label in queries else parse_for_evaluation(query_text, algebra_of=algebra_of)
        except QuerySyntaxError as exc:
            raise ConfigRejected(f"parse error in pattern {label} at line {exc.line} column {exc.column}: "
                                 f"{exc.message or exc}") from exc
        per_instance = isinstance(query, InstanceQuery)
        report = doc.reports.get(label)
        if report is not None:
            if not per_instance:
                raise ConfigRejected(f"pattern {query.name}: ew:report applies to per-instance queries only; "
                                     "a continuous pattern reports each match")
            try:
                ReportPolicy.parse(report)
            except ValueError as exc:
                raise ConfigRejected(f"pattern {query.name}: ew:{exc}") from exc
        if query.name in patterns:
            raise ConfigRejected(f"duplicate pattern name {query.name}")
        if knows_stream is not None:
            for window in query.windows.values():
                for stream in window.streams():
                    key = stream_key(stream)
                    if not knows_stream(stream) and key not in made and key not in mapped:
                        raise ConfigRejected(f"unknown stream {stream} in pattern {query.name}: "
                                             "no input.streams entry, default_stream rule or mapping reaches it")
        alert = doc.alerts.get(label)
        if alert is not None:
            binds = list(query.compile().read_off.variables) if per_instance else query.projection()
            try:
                check_alert_text(alert, query.name, binds)
            except TemplateError as exc:
                raise ConfigRejected(str(exc)) from exc
            alerts[query.name] = alert
        if per_instance:
            instance_queries[query.name] = query      # compiled as it was parsed
            reports[query.name] = report or DEFAULT_POLICY
        else:
            try:
                trial.add_query(query)
            except Exception as exc:
                raise ConfigRejected(f"pattern {query.name} cannot be compiled: {exc}") from exc
        patterns[query.name] = query_text
    try:
        trial.add_static(list(doc.static))
    except Exception as exc:
        raise ConfigRejected(f"static data rejected by the engine: {exc}") from exc
    return CheckedDocument(doc, patterns, alerts, instance_queries, reports, mappings)


def check_mappings(doc: ConfigDocument) -> tuple[CompiledMapping, ...]:
    """The document's payload mappings, compiled; raises ConfigRejected naming what is wrong.

    Besides what the mapping compiler refuses (a topic filter a gateway may not subscribe to
    among it), each mapping must name the stream its observations enter, and no two mappings'
    topic filters may overlap (a message would otherwise reach two mappings, or one twice)."""
    if not doc.mappings:
        return ()
    from edgewave.agent.mapping import MappingError, compile_mappings   # only documents with mappings need it
    try:
        mappings = tuple(compile_mappings(doc.mappings))
    except MappingError as exc:
        raise ConfigRejected(f"mapping rejected: {exc}") from exc
    names: set[str] = set()
    for index, mapping in enumerate(mappings):      # each topic filter checked by the compiler
        if not _MAPPING_NAME.fullmatch(mapping.name):
            raise ConfigRejected(f"mapping {mapping.name[:60]!r} ({mapping.topic_filter}): its name must be 1 to 30 "
                                 "letters, digits, _, : or - (it names the mapping's counters in the gateway's "
                                 "status): give its source an ew:name")
        if mapping.name in names:
            raise ConfigRejected(f"two mappings are named {mapping.name}: give their sources distinct ew:name")
        names.add(mapping.name)
        if mapping.stream is None:
            raise ConfigRejected(f"mapping {mapping.name} names no stream: its source needs ew:stream <IRI>")
        for other in mappings[:index]:
            if filters_overlap(other.topic_filter, mapping.topic_filter):
                raise ConfigRejected(f"mappings {other.name} ({other.topic_filter}) and {mapping.name} "
                                     f"({mapping.topic_filter}) have overlapping topic filters: "
                                     "each message must have one mapping")
    return mappings
