"""Random differential cases: schema, static data, patterns and a timestamped stream.

The vocabulary is deliberately tiny (a few classes, properties and individuals) so that random
streams join and random patterns match, often only through entailment. Each case *plants* one
to three instantiations of its pattern in the data, mostly in a weakened form that matches only
through the schema (a subclass, a subproperty, a domain or range, the inverse or symmetric
triple), then adds noise. Generation is shaped by what the engine must get right:

* class and property hierarchies (multiple inheritance, several levels, sometimes a cycle),
  domains and ranges, owl:inverseOf pairs and owl:SymmetricProperty;
* literal-valued properties (integers, decimals, dateTimes, plain strings) with FILTERs on
  them; they never get a range, an inverse or symmetry (that would put literals in subject
  position);
* RDF-star annotations ``<< s p o >> :confidence n`` and quoted-triple patterns whose inner
  variables join the rest of the pattern;
* 2-6 triple patterns that share variables, with some constants, occasionally a variable
  class (``?x a ?c``) or a variable predicate;
* three query shapes: C-SPARQL (``FROM STREAM``, one default window that also reads static
  data, over one or two streams), RSP-QL with one named window plus static patterns, and
  RSP-QL with two windows of different widths over two streams plus static patterns; with
  ``queries=2`` a second pattern sharing a prefix of the first, removed mid-stream sometimes;
* strictly increasing, distinct timestamps (so each match has one last triple) with gaps equal
  to the window widths now and then (window edges), a triple pushed with ``stream=None`` or on
  a stream no window reads now and then, and sometimes static triples removed mid-stream;
* entailment switched off in one case out of five.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from edgewave.shared.ntriples import make_quoted

from .reference import RefQuery, RefWindow, Triple

EX = "http://example.org/diff#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
SUBPROPERTY = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
DOMAIN = "<http://www.w3.org/2000/01/rdf-schema#domain>"
RANGE = "<http://www.w3.org/2000/01/rdf-schema#range>"
INVERSE = "<http://www.w3.org/2002/07/owl#inverseOf>"
SYMMETRIC = "<http://www.w3.org/2002/07/owl#SymmetricProperty>"

CLASSES = [f"<{EX}C{i}>" for i in range(6)]
OBJECT_PROPERTIES = [f"<{EX}p{i}>" for i in range(5)]
VALUE_PROPERTIES = [f"<{EX}v{i}>" for i in range(3)]
CONFIDENCE = f"<{EX}confidence>"  # annotates quoted triples (RDF-star), as in RSP-QL*
INDIVIDUALS = [f"<{EX}i{i}>" for i in range(4)]
STREAMS = ["<urn:ew:stream:a>", "<urn:ew:stream:b>", "<urn:ew:stream:unread>"]


def integer(n: int) -> str:
    return f'"{n}"^^<{XSD}integer>'


def decimal(n: int) -> str:
    return f'"{n}.5"^^<{XSD}decimal>'


def datetime_literal(n: int) -> str:
    return f'"2024-05-01T12:00:{n:02d}Z"^^<{XSD}dateTime>'


def value_literal(n: int) -> str:
    """Mostly integers; some decimals, dateTimes and plain strings, so FILTERs meet type errors."""
    kind = n % 7
    if kind == 3:
        return decimal(n)
    if kind == 5:
        return datetime_literal(n)
    if n == 13:
        return f'"{n}"'
    return integer(n)


def render(term) -> str:
    """A pattern term in RSP-QL: quoted-triple patterns as << s p o >>."""
    if isinstance(term, tuple):
        return "<< " + " ".join(render(part) for part in term) + " >>"
    return term


@dataclass
class QuerySpec:
    """One registered pattern of a case, in a form both the RSP-QL text and the reference use."""

    name: str
    style: str  # "csparql", "rspql1" or "rspql2"
    windows: list[RefWindow]
    patterns: list[tuple[Triple, int | None]]
    filters: list[str] = field(default_factory=list)

    def reference_query(self) -> RefQuery:
        return RefQuery(self.patterns, self.windows, self.filters)

    def rspql(self, iso_durations: bool = True) -> str:
        """The pattern as the engine's users write it."""

        def duration(ms: int) -> str:
            if iso_durations:
                return "PT" + f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "S"
            return f"{ms}ms"

        filters = "".join(f"\n  FILTER({f})" for f in self.filters)
        if self.style == "csparql":
            (window,) = self.windows
            streams = "".join(f"\nFROM STREAM {s} [RANGE {duration(window.width_ms)}]" for s in window.streams)
            body = "\n".join(f"  {render(s)} {p} {render(o)} ." for (s, p, o), _ in self.patterns)
            return f"REGISTER QUERY {self.name} AS\nSELECT *{streams}\nWHERE {{\n{body}{filters}\n}}\n"
        declarations = "".join(
            f"\nFROM NAMED WINDOW <urn:ew:window:{i}> ON {w.streams[0]} "
            f"[RANGE {duration(w.width_ms)} STEP {duration(max(1, w.width_ms // 2))}]"
            for i, w in enumerate(self.windows)
        )
        blocks = []
        for i in range(len(self.windows)):
            triples = " ".join(f"{render(s)} {p} {render(o)} ." for (s, p, o), w in self.patterns if w == i)
            if triples:
                blocks.append(f"  WINDOW <urn:ew:window:{i}> {{ {triples} }}")
        static = [f"  {render(s)} {p} {render(o)} ." for (s, p, o), w in self.patterns if w is None]
        body = "\n".join(blocks + static)
        return f"REGISTER RSTREAM <{self.name}> AS\nSELECT *{declarations}\nWHERE {{\n{body}{filters}\n}}\n"


@dataclass
class Case:
    schema: list[Triple]
    static: list[Triple]
    stream: list[tuple[Triple, int, str | None]]  # (triple, timestamp, stream IRI; None: every stream)
    queries: list[QuerySpec]
    entailment: bool = True
    iso_durations: bool = True
    remove_after: int | None = None  # remove every query but the first after this many arrivals
    static_removed: tuple[int, list[Triple]] | None = None  # (after this many arrivals, triples)

    def vocabulary(self) -> tuple[list[str], list[str]]:
        return CLASSES, OBJECT_PROPERTIES + VALUE_PROPERTIES + [CONFIDENCE]


# ----------------------------------------------------------------------------- strategies


@st.composite
def schemas(draw) -> list[Triple]:
    triples: set[Triple] = set()

    def hierarchy(terms: list[str], relation: str) -> None:
        for i in range(1, len(terms)):
            for j in draw(st.sets(st.integers(0, i - 1), max_size=2)):
                triples.add((terms[i], relation, terms[j]))

    hierarchy(CLASSES, SUBCLASS)
    hierarchy(OBJECT_PROPERTIES, SUBPROPERTY)
    hierarchy(VALUE_PROPERTIES, SUBPROPERTY)
    if draw(st.integers(0, 7)) == 0:  # a cycle: the classes on it are equivalent
        triples.add((CLASSES[0], SUBCLASS, draw(st.sampled_from(CLASSES[1:]))))
    if draw(st.integers(0, 7)) == 0:
        triples.add((OBJECT_PROPERTIES[0], SUBPROPERTY, draw(st.sampled_from(OBJECT_PROPERTIES[1:]))))
    for p in OBJECT_PROPERTIES:
        if draw(st.integers(0, 2)) == 0:
            triples.add((p, DOMAIN, draw(st.sampled_from(CLASSES))))
        if draw(st.integers(0, 2)) == 0:
            triples.add((p, RANGE, draw(st.sampled_from(CLASSES))))
    for v in VALUE_PROPERTIES + [CONFIDENCE]:
        if draw(st.integers(0, 2)) == 0:
            triples.add((v, DOMAIN, draw(st.sampled_from(CLASSES))))
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.lists(st.sampled_from(OBJECT_PROPERTIES), min_size=2, max_size=2, unique=True))
        triples.add((a, INVERSE, b))
    for p in draw(st.sets(st.sampled_from(OBJECT_PROPERTIES), max_size=2)):
        triples.add((p, RDF_TYPE, SYMMETRIC))
    return sorted(triples)


@st.composite
def instance_triples(draw) -> Triple:
    kind = draw(st.sampled_from(["object", "object", "type", "value", "object", "object", "type", "value",
                                 "annotation"]))
    s = draw(st.sampled_from(INDIVIDUALS))
    if kind == "annotation":
        quoted = make_quoted((s, draw(st.sampled_from(OBJECT_PROPERTIES)), draw(st.sampled_from(INDIVIDUALS))))
        return quoted, CONFIDENCE, integer(draw(st.integers(0, 30)))
    if kind == "object":
        return s, draw(st.sampled_from(OBJECT_PROPERTIES)), draw(st.sampled_from(INDIVIDUALS))
    if kind == "type":
        return s, RDF_TYPE, draw(st.sampled_from(CLASSES))
    value = draw(st.integers(0, 30))
    return s, draw(st.sampled_from(VALUE_PROPERTIES)), value_literal(value)


@st.composite
def patterns(draw, windows: int, static_patterns: bool) -> tuple[list[tuple[Triple, int | None]], list[str]]:
    """2-6 connected triple patterns and 0-2 FILTERs over their variables."""
    count = draw(st.integers(2, 6))
    nodes = ["?a"]  # variables standing for individuals
    values: list[str] = []  # variables standing for literals
    result: list[tuple[Triple, int | None]] = []
    for i in range(count):
        if draw(st.integers(0, 9)) == 0:
            subject = draw(st.sampled_from(INDIVIDUALS))
        else:
            subject = draw(st.sampled_from(nodes))
        kind = draw(st.sampled_from(["object", "object", "type", "type", "value", "any", "annotation"]))
        if kind == "annotation":  # << s p o >> :confidence ?n, the inner triple joining the rest
            inner_object = draw(st.sampled_from(nodes + INDIVIDUALS[:1]))
            inner_predicate = draw(st.sampled_from(OBJECT_PROPERTIES + ["?qp"]))
            subject = (subject, inner_predicate, inner_object)
            predicate = CONFIDENCE
            obj = f"?n{len(values)}"
            values.append(obj)
        elif kind == "object":
            predicate = draw(st.sampled_from(OBJECT_PROPERTIES))
            choice = draw(st.integers(0, 5))
            if choice == 0:
                obj = draw(st.sampled_from(INDIVIDUALS))
            elif choice <= 2 and len(nodes) < 4:
                obj = f"?{'abcd'[len(nodes)]}"
                nodes.append(obj)
            else:
                obj = draw(st.sampled_from(nodes))
        elif kind == "type":
            predicate = RDF_TYPE
            obj = "?class" if draw(st.integers(0, 12)) == 0 else draw(st.sampled_from(CLASSES))
        elif kind == "value":
            predicate = draw(st.sampled_from(VALUE_PROPERTIES))
            if draw(st.integers(0, 6)) == 0:
                obj = integer(draw(st.integers(0, 30)))
            else:
                obj = f"?n{len(values)}"
                values.append(obj)
        else:  # a variable predicate, rarely
            if draw(st.integers(0, 5)) != 0:
                predicate, obj = draw(st.sampled_from(OBJECT_PROPERTIES)), draw(st.sampled_from(nodes))
            else:
                predicate, obj = "?pred", draw(st.sampled_from(nodes))
        if draw(st.integers(0, 1)) and isinstance(subject, str) and subject.startswith("?") and obj in nodes \
                and obj != subject:
            subject, obj = obj, subject  # the new variable on either side
        window: int | None = draw(st.integers(0, windows - 1))
        if static_patterns and i > 0 and draw(st.integers(0, 4)) == 0:
            window = None
        result.append(((subject, predicate, obj), window))
    if all(w is None for _, w in result):
        (first, _), rest = result[0], result[1:]
        result = [(first, 0)] + rest

    filters: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        options = []
        if values:
            options += ["cmp", "cmp", "sum"] if len(values) > 1 else ["cmp", "cmp"]
            options += ["datetime", "string"]
        options += ["iri", "regex", "or"]
        kind = draw(st.sampled_from(options))
        op = draw(st.sampled_from(["<", ">", "<=", ">=", "=", "!="]))
        bound = draw(st.integers(0, 30))
        # rdflib orders values of different types where SPARQL raises a type error ("13" > 5 is
        # true in rdflib), so comparisons are guarded by a type test; errors are still exercised
        # through arithmetic, which rdflib gets right (unguarded comparisons: test_filters.py)
        if kind == "cmp":
            variable = draw(st.sampled_from(values))
            if draw(st.booleans()):
                filters.append(f"isNumeric({variable}) && {variable} {op} {bound}")
            else:
                filters.append(f"{variable} * 1 {op} {bound}")
        elif kind == "sum":
            a, b = draw(st.lists(st.sampled_from(values), min_size=2, max_size=2, unique=True))
            filters.append(f"{a} + {b} {op} {bound * 2}")
        elif kind == "datetime":
            variable = draw(st.sampled_from(values))
            filters.append(f"DATATYPE({variable}) = <{XSD}dateTime> && {variable} {op} {datetime_literal(bound)}")
        elif kind == "string":
            filters.append(f'STR({draw(st.sampled_from(values))}) {op} "{bound}"')
        elif kind == "iri":
            filters.append(f"{draw(st.sampled_from(nodes))} != {draw(st.sampled_from(INDIVIDUALS))}")
        elif kind == "regex":
            filters.append(f'REGEX(STR({draw(st.sampled_from(nodes))}), "i[{draw(st.integers(0, 3))}-3]$")')
        else:
            a = draw(st.sampled_from(nodes))
            b = draw(st.sampled_from(values)) if values else "?a"
            filters.append(f"{a} = {draw(st.sampled_from(INDIVIDUALS))} || !BOUND({b}) || isLiteral({b})")
    return result, filters


def _below(schema: list[Triple], relation: str, term: str) -> list[str]:
    """``term`` and everything under it in a hierarchy (subclasses, subproperties)."""
    found, todo = {term}, [term]
    while todo:
        upper = todo.pop()
        for s, p, o in schema:
            if p == relation and o == upper and s not in found:
                found.add(s)
                todo.append(s)
    return sorted(found)


@st.composite
def planted(draw, schema: list[Triple], pattern_list: list[tuple[Triple, int | None]]
            ) -> list[tuple[Triple, int | None]]:
    """Triples that (through the schema) instantiate the whole pattern once: matches to find.

    Each instantiated pattern triple is replaced, most of the time, by a weaker triple that only
    entails it: a subclass, a subproperty, a triple whose domain or range gives the type, the
    inverse or symmetric form. The reference decides what really matches.
    """
    assignment: dict[str, str] = {}

    def value(term) -> str:
        if isinstance(term, tuple):
            return make_quoted(tuple(value(part) for part in term))
        if not term.startswith("?"):
            return term
        if term not in assignment:
            if term == "?class":
                assignment[term] = draw(st.sampled_from(CLASSES))
            elif term in ("?pred", "?qp"):
                assignment[term] = draw(st.sampled_from(OBJECT_PROPERTIES))
            elif term.startswith("?n"):
                n = draw(st.integers(0, 30))
                assignment[term] = value_literal(n)
            else:
                assignment[term] = draw(st.sampled_from(INDIVIDUALS))
        return assignment[term]

    out = []
    for (s, p, o), window in pattern_list:
        s, p, o = value(s), value(p), value(o)
        options: list[Triple] = [(s, p, o)]
        if p == RDF_TYPE:
            options += [(s, RDF_TYPE, c) for c in _below(schema, SUBCLASS, o) if c != o]
            for c in _below(schema, SUBCLASS, o):
                for prop, rel, cls in schema:
                    if cls == c and rel == DOMAIN:
                        target = integer(7) if prop in VALUE_PROPERTIES else draw(st.sampled_from(INDIVIDUALS))
                        options.append((s, prop, target))
                    elif cls == c and rel == RANGE:
                        options.append((draw(st.sampled_from(INDIVIDUALS)), prop, s))
        elif s.startswith("<<"):
            pass  # annotations are streamed as they are
        elif not o.startswith('"'):
            for q in _below(schema, SUBPROPERTY, p):
                options.append((s, q, o))
                for a, rel, b in schema:
                    if rel == INVERSE and (a == q or b == q):
                        options.append((o, b if a == q else a, s))
                    elif rel == RDF_TYPE and a == q and b == SYMMETRIC:
                        options.append((o, q, s))
        else:
            options += [(s, q, o) for q in _below(schema, SUBPROPERTY, p)]
        out.append((draw(st.sampled_from(options)), window))
    return out


def _windows(draw, style: str, streams: tuple[str, ...] | None = None) -> list[RefWindow]:
    widths = [5, 10, 20, 40]
    if style == "csparql":
        streams = streams or tuple(STREAMS[: draw(st.integers(1, 2))])
        return [RefWindow(streams, draw(st.sampled_from(widths)), with_static=True)]
    if style == "rspql1":
        return [RefWindow((STREAMS[0],), draw(st.sampled_from(widths)))]
    return [RefWindow((STREAMS[0],), draw(st.sampled_from(widths))),
            RefWindow((STREAMS[1],), draw(st.sampled_from(widths)))]


@st.composite
def cases(draw, styles: tuple[str, ...] = ("csparql", "rspql1", "rspql2"), csparql_static: bool = True,
          queries: int = 1) -> Case:
    """A random case; ``csparql_static=False`` gives C-SPARQL cases no static data at all.

    With ``queries=2`` a second pattern of the same shape is registered too: it starts with a
    prefix of the first one's triple patterns (so the network shares join nodes between them)
    and its windows may have other widths.
    """
    style = draw(st.sampled_from(styles))
    no_static = style == "csparql" and not csparql_static
    windows = _windows(draw, style)
    pattern_list, filters = draw(patterns(len(windows), static_patterns=style != "csparql"))
    specs = [QuerySpec("diff", style, windows, pattern_list, filters)]
    for n in range(1, queries):
        prefix = pattern_list[: draw(st.integers(1, len(pattern_list)))]
        more, more_filters = draw(patterns(len(windows), static_patterns=style != "csparql"))
        more = more[: draw(st.integers(0, len(more)))]
        other_windows = _windows(draw, style, windows[0].streams if style == "csparql" else None)
        kept_filters = [f for f in filters if draw(st.booleans())]
        specs.append(QuerySpec(f"diff{n + 1}", style, other_windows, prefix + more,
                               [f for f in kept_filters + more_filters if _filter_fits(f, prefix + more)]))

    schema = draw(schemas())
    planted_stream, planted_static = [], []
    for spec in specs:
        for _ in range(draw(st.integers(1, 3))):
            for triple, window in draw(planted(schema, spec.patterns)):
                if window is None or (spec.windows[window].with_static and not no_static
                                      and draw(st.integers(0, 4)) == 0):
                    planted_static.append(triple)
                else:
                    planted_stream.append((triple, draw(st.sampled_from(spec.windows[window].streams))))
    used_streams = sorted({s for spec in specs for w in spec.windows for s in w.streams})
    noise = [(draw(instance_triples()),
              STREAMS[2] if draw(st.integers(0, 15)) == 0 else draw(st.sampled_from(used_streams)))
             for _ in range(draw(st.integers(0, 8)))]
    arrivals = draw(st.permutations(planted_stream + noise))
    widths = sorted({w.width_ms for spec in specs for w in spec.windows})
    gaps = sorted({1, 2, 3} | {max(1, w // 4) for w in widths} | {max(1, w // 2) for w in widths} | set(widths))
    stream = []
    ts = draw(st.integers(0, 5))
    for triple, name in arrivals[:20]:
        ts += draw(st.sampled_from(gaps))  # gaps equal to the widths put triples on window edges
        if draw(st.integers(0, 11)) == 0:
            name = None  # push(..., stream=None) feeds every stream
        stream.append((triple, ts, name))
    static = sorted(set(planted_static + draw(st.lists(instance_triples(), max_size=0 if no_static else 3))))
    return Case(
        schema=schema,
        static=static,
        stream=stream,
        queries=specs,
        entailment=draw(st.integers(0, 4)) != 0,
        iso_durations=draw(st.booleans()),
        remove_after=draw(st.none() | st.integers(0, len(stream))) if queries > 1 else None,
        static_removed=_static_removal(draw, static, len(stream)),
    )


def _static_removal(draw, static: list[Triple], arrivals: int) -> tuple[int, list[Triple]] | None:
    """Sometimes remove a few static triples before some arrival (a changed threshold, say)."""
    if not static or draw(st.integers(0, 2)) != 0:
        return None
    return draw(st.integers(0, arrivals)), draw(st.lists(st.sampled_from(static), min_size=1, max_size=2, unique=True))


def _filter_fits(expression: str, pattern_list: list[tuple[Triple, int | None]]) -> bool:
    """A FILTER may only mention variables of its pattern (the parser would reject others in SELECT)."""
    import re

    names = set(RefQuery(pattern_list, []).variables())
    return all(v[1:] in names for v in re.findall(r"\?[A-Za-z0-9_]+", expression))
