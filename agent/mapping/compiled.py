"""A mapping compiled once into closures: payload bytes to the triples of one event.

``compile_mappings`` reads the triples maps (``rml_graph``), groups them by MQTT source
(triples maps with the same topic filter, payload format, stream, base IRI and time
reference run together on one message) and turns every term map into a function of the
iteration's value: JSONPath into selectors, templates into their parts, datatypes into
their lexical rules, constants into ready terms. Nothing is looked up by name per
message. ``CompiledMapping.map`` then decodes within limits, iterates, builds the
triples, and either returns all of them or raises ``PayloadRejected``: never anything
else, and never part of an event.

edgewave references (in ``rml:reference`` and inside templates; not JSONPath, so they
cannot clash with a payload's keys):

- ``ew:topic[N]``: segment N (from 0) of the message's topic;
- ``ew:arrivalMs``, ``ew:arrivalTime``: when the message arrived (epoch ms, xsd:dateTime);
- ``ew:resultMs``, ``ew:resultTime``: the payload's own time when it has one (a SenML
  record's resolved absolute time; the value at the source's ``ew:timeReference``), else
  the arrival time;
- ``ew:timeSource``: the IRI ``ew:PayloadTime`` or ``ew:ArrivalTime``, whichever gave
  ``ew:resultTime``.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable

from .errors import (MALFORMED, MISSING_KEY, NO_TRIPLES, TOO_MANY_TRIPLES, UNMAPPED_VALUE, WRONG_TYPE, MappingError,
                     PayloadRejected)
from .jsonpath import _Parser, compile_path, compile_reference
from .limits import PayloadLimits
from .payload_formats import SENML_FORMATS, decoder
from .rml_graph import UNSAFE_IRI, SourceSpec, TermMapSpec, TriplesMapSpec, read_triples_maps
from .senml import MAX_TIME_MS, resolve
from .senml_units import SENML_UNITS
from .terms import (blank_term, check_base, check_language, escape_lexical, iri_safe, iri_term, is_absolute,
                    iso_time, lexical_rule, literal_suffix, natural_literal, parse_template, value_lexical)
from . import vocabulary as v

Triple = tuple[str, str, str]
TermFunction = Callable[[Any, "Context"], list]

_TOPIC_SEGMENT = re.compile(r"ew:topic\[(\d{1,3})\]")
_EW_REFERENCES = ("ew:arrivalMs", "ew:arrivalTime", "ew:resultMs", "ew:resultTime", "ew:timeSource")
_IRI_FORBIDDEN_TEXT = re.compile(r'[\x00-\x20<>"{}|^`\\\ud800-\udfff]')
_PAYLOAD_TIME_IRI = v.PAYLOAD_TIME[1:-1]
_ARRIVAL_TIME_IRI = v.ARRIVAL_TIME[1:-1]
_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?")


class Context:
    """What one message gives besides its payload: topic segments and times."""

    __slots__ = ("segments", "arrival_ms", "result_ms", "payload_time")

    def __init__(self, segments: list[str], arrival_ms: int, result_ms: int, payload_time: bool) -> None:
        self.segments = segments
        self.arrival_ms = arrival_ms
        self.result_ms = result_ms
        self.payload_time = payload_time


def _value_key(value: Any) -> tuple[str, object]:
    t = type(value)
    if t is bool:
        return ("boolean", value)
    if t is int or t is float:
        return ("number", float(value))
    return ("string", value if t is str else repr(value))


def parse_payload_time(value: Any) -> int:
    """Epoch ms of a payload's time: an ISO 8601 date-time (without a zone: UTC, as Tasmota sends its
    ``Time``) or a number of epoch seconds. PayloadRejected(wrong_type) for anything else."""
    if type(value) is str and len(value) <= 40:
        m = _DATE_TIME.fullmatch(value.strip())
        if m:
            year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
            fraction, zone = m.group(7), m.group(8)
            try:
                moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
                if zone and zone != "Z":
                    sign = 1 if zone[0] == "+" else -1
                    digits = zone[1:].replace(":", "")
                    moment -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            except (ValueError, OverflowError):
                raise PayloadRejected(WRONG_TYPE, f"time {value!r} is not a date-time") from None
            ms = int(moment.timestamp()) * 1000 + (int((fraction[1:] + "00")[:3]) if fraction else 0)
            if 0 <= ms <= MAX_TIME_MS:
                return ms
    elif type(value) in (int, float) and 0 <= value * 1000 <= MAX_TIME_MS:
        return round(value * 1000)
    raise PayloadRejected(WRONG_TYPE, f"time {str(value)[:60]!r} is not a date-time or epoch seconds")


class _Compiler:
    """Compiles the term maps of one group of triples maps (one MQTT source)."""

    def __init__(self, source: SourceSpec, default_base: str | None) -> None:
        self.source = source
        self.senml = source.payload_format in SENML_FORMATS
        self.default_base = default_base
        self.blank_counter = itertools.count()

    # --- references -------------------------------------------------------------------

    def reference(self, text: str, where: str) -> TermFunction:
        """A function (item, context) -> list of values for an rml:reference or a template's reference."""
        m = _TOPIC_SEGMENT.fullmatch(text)
        if m:
            index = int(m.group(1))

            def segment(item: Any, ctx: Context) -> list:
                if index < len(ctx.segments):
                    return [ctx.segments[index]]
                raise PayloadRejected(MISSING_KEY, f"the topic has no segment {index}")
            return segment
        if text.startswith("ew:"):
            return self.time_reference(text, where)
        try:
            select = compile_reference(text)
        except MappingError as exc:
            raise MappingError(f"{where}: {exc}") from None

        def values(item: Any, ctx: Context) -> list:
            return [value for value in select(item) if value is not None]
        return values

    def time_reference(self, text: str, where: str) -> TermFunction:
        if text not in _EW_REFERENCES:
            raise MappingError(f"{where}: {text!r} is not an edgewave reference "
                               f"(ew:topic[N], {', '.join(_EW_REFERENCES)})")
        if text == "ew:arrivalMs":
            return lambda item, ctx: [ctx.arrival_ms]
        if text == "ew:arrivalTime":
            return lambda item, ctx: [iso_time(ctx.arrival_ms)]
        if self.senml:      # the item is a resolved record: its own time
            if text == "ew:resultMs":
                return lambda item, ctx: [item.time_ms]
            if text == "ew:resultTime":
                return lambda item, ctx: [iso_time(item.time_ms)]
            return lambda item, ctx: [_PAYLOAD_TIME_IRI if item.payload_time else _ARRIVAL_TIME_IRI]
        if text == "ew:resultMs":
            return lambda item, ctx: [ctx.result_ms]
        if text == "ew:resultTime":
            return lambda item, ctx: [iso_time(ctx.result_ms)]
        return lambda item, ctx: [_PAYLOAD_TIME_IRI if ctx.payload_time else _ARRIVAL_TIME_IRI]

    # --- term maps --------------------------------------------------------------------

    def base_for(self, spec: TriplesMapSpec) -> str | None:
        base = spec.base_iri or self.source.base_iri or self.default_base
        return check_base(base, f"triples map {spec.iri}") if base is not None else None

    def term_map(self, tm: TermMapSpec, base: str | None) -> TermFunction:
        if tm.kind == "constant":
            constant = [tm.value]
            return lambda item, ctx: constant
        if tm.kind == "blank":
            counter, prefix = self.blank_counter, "_:ew" + format(id(self) % 65536, "x") + "x"
            return lambda item, ctx: [f"{prefix}{next(counter)}"]
        to_term = self.term_builder(tm, base)
        if tm.kind == "template" and tm.term_type in (v.IRI, v.URI) and tm.value_map is None \
                and tm.value_table is None and not _IRI_FORBIDDEN_TEXT.search(
                    "".join(text for kind, text in parse_template(tm.value) if kind == "text")):
            # The values are percent-encoded and the constant text is checked here: nothing to check per term.
            parts = parse_template(tm.value)
            prefix = "" if parts and parts[0][0] == "text" and is_absolute(parts[0][1]) else base
            to_term = lambda text: f"<{prefix}{text}>"      # noqa: E731
        if tm.kind == "reference":
            values = self.reference(tm.value, tm.where)
        else:
            values = self.template(tm, base)
        required, where = tm.required, tm.where

        def terms(item: Any, ctx: Context) -> list:
            found = values(item, ctx)
            if found:
                return [to_term(value) for value in found]
            if required:
                raise PayloadRejected(MISSING_KEY, f"no value for {where.rsplit(', ', 1)[-1]} "
                                                   f"({tm.value})")
            return found
        return terms

    def term_builder(self, tm: TermMapSpec, base: str | None) -> Callable[[Any], str]:
        """How one value becomes a term for this term map (value maps first, then the term type)."""
        if tm.value_map is not None:
            table = dict(tm.value_map)

            def mapped(value: Any) -> str:
                term = table.get(_value_key(value))
                if term is None:
                    raise PayloadRejected(UNMAPPED_VALUE, f"{str(value)[:60]!r} is not in the value map ({tm.value})")
                return term
            return mapped
        if tm.value_table is not None:
            def unit(value: Any) -> str:
                term = SENML_UNITS.get(value) if type(value) is str else None
                if term is None:
                    raise PayloadRejected(UNMAPPED_VALUE, f"{str(value)[:60]!r} is no SenML unit edgewave knows")
                return term
            return unit
        template = tm.kind == "template"    # a template's values are already text
        if tm.term_type == v.LITERAL:
            if tm.datatype is None and tm.language is None:
                if template:
                    return lambda text: f'"{escape_lexical(text)}"'
                return natural_literal
            rule = lexical_rule(tm.datatype)
            language = check_language(tm.language) if tm.language is not None else None
            suffix = literal_suffix(tm.datatype, language)
            if language is not None:
                rule = value_lexical
            return lambda value: f'"{escape_lexical(rule(value))}"{suffix}'
        if tm.term_type == v.BLANK_NODE:
            return lambda value: blank_term(value_lexical(value))
        return lambda value: iri_term(value_lexical(value), base)

    def template(self, tm: TermMapSpec, base: str | None) -> TermFunction:
        parts = parse_template(tm.value)
        encode = tm.term_type in (v.IRI, v.URI)
        keep_unicode = tm.term_type == v.IRI
        absolute = bool(parts) and parts[0][0] == "text" and is_absolute(parts[0][1])
        if tm.term_type in (v.IRI, v.URI, UNSAFE_IRI) and not absolute and base is None:
            raise MappingError(f"{tm.where}: template {tm.value!r} makes relative IRIs and there is no "
                               "base IRI (ew:baseIRI on the source, or the gateway's default)")
        pieces: list[Callable[[Any, Context], list]] = []
        for kind, text in parts:
            if kind == "text":
                constant = [text]
                pieces.append(lambda item, ctx, constant=constant: constant)
            else:
                values = self.reference(text, tm.where)
                if encode:
                    pieces.append(lambda item, ctx, values=values: [iri_safe(value_lexical(x), keep_unicode)
                                                                    for x in values(item, ctx)])
                else:
                    pieces.append(lambda item, ctx, values=values: [value_lexical(x) for x in values(item, ctx)])
        limit = self.max_triples

        def fill(item: Any, ctx: Context) -> list:
            chosen = [piece(item, ctx) for piece in pieces]
            if all(len(c) == 1 for c in chosen):
                return ["".join(c[0] for c in chosen)]
            count = 1
            for c in chosen:
                count *= len(c)
            if count > limit:
                raise PayloadRejected(TOO_MANY_TRIPLES, f"template {tm.value!r} yields {count} values")
            return ["".join(combination) for combination in itertools.product(*chosen)]
        return fill

    max_triples = 256

    # --- triples maps -----------------------------------------------------------------

    def triples_map(self, spec: TriplesMapSpec) -> Callable[[Any, Context, list], None]:
        where = f"triples map {spec.iri}"
        try:
            iterate = compile_path(spec.iterator)
        except MappingError as exc:
            raise MappingError(f"{where}, rml:iterator: {exc}") from None
        if self.senml:
            steps = _Parser(spec.iterator).steps()
            if len(steps) != 1 or steps[0][0] not in ("wild", "has", "compare"):
                raise MappingError(f"{where}: a SenML iterator selects records: '$[*]' or a filter such as "
                                   f"\"$[?(@.name == 'temperature')]\", not {spec.iterator!r}")
        base = self.base_for(spec)
        subject = self.term_map(spec.subject, base)
        type_pairs = [(v.RDF_TYPE, c) for c in spec.classes]
        pairs: list[tuple[Any, Any]] = []
        for predicate_maps, object_maps in spec.predicate_objects:
            if all(p.kind == "constant" for p in predicate_maps):
                predicates: Any = [p.value for p in predicate_maps]
            else:
                predicates = [self.term_map(p, base) for p in predicate_maps]
            pairs.append((predicates, [self.term_map(o, base) for o in object_maps]))
        limit = self.max_triples

        def run(document: Any, ctx: Context, out: list) -> None:
            for item in iterate(document):
                if item is None:
                    continue
                for s in subject(item, ctx):
                    for p, o in type_pairs:
                        out.append((s, p, o))
                    for predicates, objects in pairs:
                        ps = predicates if type(predicates[0]) is str else [
                            t for f in predicates for t in f(item, ctx)]
                        for make in objects:
                            for o in make(item, ctx):
                                for p in ps:
                                    out.append((s, p, o))
                if len(out) > limit:
                    raise PayloadRejected(TOO_MANY_TRIPLES, f"more than {limit} triples")
        return run


@dataclass
class CompiledMapping:
    """The compiled triples maps of one MQTT source; ``map`` turns one message into one event's triples."""

    topic_filter: str
    payload_format: str
    stream: str | None
    name: str
    limits: PayloadLimits
    _runs: tuple
    _time_select: Callable[[Any], list] | None

    def map(self, payload: bytes, topic: str, arrival_ms: int) -> tuple[Triple, ...]:
        """All triples of one message, or PayloadRejected(reason, detail); never another exception."""
        try:
            return self._map(payload, topic, arrival_ms)
        except PayloadRejected:
            raise
        except Exception as exc:     # a bug must not take the agent's intake down: counted, with its name
            raise PayloadRejected(MALFORMED, f"decoder error: {type(exc).__name__}: {str(exc)[:120]}") from None

    def _map(self, payload: bytes, topic: str, arrival_ms: int) -> tuple[Triple, ...]:
        limits = self.limits
        document = self._decode(payload, limits)
        if self.payload_format in SENML_FORMATS:
            document = resolve(document, arrival_ms)
        result_ms, payload_time = arrival_ms, False
        if self._time_select is not None:
            found = [x for x in self._time_select(document) if x is not None]
            if found:
                result_ms, payload_time = parse_payload_time(found[0]), True
        ctx = Context(topic.split("/"), arrival_ms, result_ms, payload_time)
        out: list[Triple] = []
        for run in self._runs:
            run(document, ctx, out)
        if not out:
            raise PayloadRejected(NO_TRIPLES, f"nothing in the payload maps ({self.name})")
        if len(out) > 1:
            out = list(dict.fromkeys(out))
        return tuple(out)

    @property
    def _decode(self) -> Callable[[bytes, PayloadLimits], Any]:
        return decoder(self.payload_format)


def _local_name(term: str) -> str:
    if term.startswith("<"):
        body = term[1:-1].rstrip("/#")
        return re.split(r"[/#]", body)[-1] or body
    return ""


def compile_mappings(triples: Iterable[tuple[str, str, str]], default_base_iri: str | None = None,
                     limits: PayloadLimits = PayloadLimits()) -> list[CompiledMapping]:
    """Every triples map in ``triples`` compiled, one CompiledMapping per MQTT source.

    ``triples`` are N-Triples term triples (as ``shared/ntriples.parse_lines`` yields them),
    so a gateway needs no rdflib to apply a mapping. MappingError names what is outside
    the supported subset, a bad template or a triples map without what it needs.
    """
    if default_base_iri is not None:
        check_base(default_base_iri, "default base IRI")
    specs = read_triples_maps(triples)
    groups: dict[tuple, list[TriplesMapSpec]] = {}
    for spec in specs:
        s = spec.source
        groups.setdefault((s.topic_filter, s.payload_format, s.stream, s.base_iri, s.time_reference), []).append(spec)
    compiled = []
    for members in groups.values():
        source = members[0].source
        compiler = _Compiler(source, default_base_iri)
        compiler.max_triples = limits.max_triples
        runs = tuple(compiler.triples_map(spec) for spec in members)
        time_select = compile_path(source.time_reference) if source.time_reference else None
        name = next((m.source.name for m in members if m.source.name), None) or _local_name(members[0].iri) \
            or source.topic_filter
        compiled.append(CompiledMapping(source.topic_filter, source.payload_format, source.stream, name, limits,
                                        runs, time_select))
    return compiled
