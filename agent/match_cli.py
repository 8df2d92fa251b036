"""`edgewave match`: the engine alone over recorded streams, one JSON object per match.

    edgewave match --schema S.ttl --static X.nt --query Q.rq [--query Q2.rq]
                   --stream FILE|-|IRI=FILE [--stream IRI2=FILE2] [--no-entailment]
    edgewave match --explain [--schema S.ttl] --query Q.rq [--query Q2.rq]

* ``--schema`` (repeatable): RDFS (+ owl:inverseOf, owl:SymmetricProperty) in Turtle,
  N-Triples, RDF/XML, N3 or JSON-LD, chosen by file extension (``.ttl``, ``.nt``,
  ``.rdf``/``.owl``/``.xml``, ``.n3``, ``.jsonld``).
* ``--static`` (repeatable): static triples, same formats; N-Triples goes through
  edgewave's own parser, malformed lines are skipped and reported like stream lines.
* ``--query`` (repeatable): an RSP-QL file; a syntax error stops before any matching,
  naming the file, line and column.
* ``--stream`` (repeatable): a recorded stream (``<ms>\\t<N-Triples statement>`` per
  line). ``FILE`` or ``-`` (standard input) feeds every stream the queries name;
  ``IRI=FILE`` feeds only the stream ``IRI``. Several streams are merged by timestamp.
  A stream IRI no query reads, or a query stream nothing feeds, is warned about on
  stderr (a slip in an IRI would otherwise just match nothing). Any input file may start
  with a UTF-8 byte-order mark.

* ``--explain``: print the network the queries compile to (``Engine.describe``: alpha
  memories, join nodes, windows, productions, what the queries share, what the schema
  entails into each memory; for a per-instance query its node tree and what is read off
  at close) and stop; no stream is read.

* ``--per-instance``: evaluate every query on each window instance. Without it, a
  conjunctive query is matched continuously and a query that needs a window's content
  as a whole (aggregates, OPTIONAL, negation, UNION, BIND, VALUES, expressions in SELECT,
  solution modifiers, REGISTER ISTREAM/DSTREAM) is evaluated per instance.
* ``--report non-empty|window-close|on-change|periodic:DURATION``: which instances a
  per-instance query reports (default ``non-empty``); ``--lateness DURATION``: how long past its end an
  instance waits for late triples (default 0).

Output: ``{"pattern": name, "bindings": {var: N-Triples term}, "start": ms, "end": ms}``
per line on stdout for a continuous match (a match of an absence adds ``"expected"``: the
statements that did not arrive by ``end``, its deadline), ``{"query": name, "window": {"start": ms,
"end": ms}, "stream": "RSTREAM"|"ISTREAM"|"DSTREAM", "rows": [{var: term}, ...]}`` per
reported instance of a per-instance query (an unbound variable is absent from its row;
the instances still holding triples at the end of the input are closed then), written in
batches. On stderr, a summary (key=value): triples in,
entailed, matches, triples/s, peak memory, the triples chained rules made (``derived``) and
the matches too deep to make any (``derivations_cut``), the absences fired, and malformed
lines (the first ten with their
line numbers and reasons, and the total). Malformed lines never stop the run.
Exit status: 0 after a run, 2 for unusable arguments (a missing file, a bad query or
schema).
"""
from __future__ import annotations

import argparse
import gc
import heapq
import io
import json
import os
import re
import resource
import sys
import time
from itertools import islice
from typing import IO, Iterator

from edgewave.agent.engine import Engine, Match
from edgewave.agent.engine.absence import AbsenceMatch
from edgewave.agent.engine.per_instance.front import InstanceQuery
from edgewave.agent.engine.per_instance.reporting import REPORT_POLICIES, ReportPolicy
from edgewave.agent.engine.query import Query
from edgewave.agent.engine.steps import stream_key
from edgewave.shared.ntriples import NTriplesError, Triple, clear_term_caches
from edgewave.shared.rdf_files import RdfFileError, read_text, read_triples
from edgewave.shared.recorded import read_recorded, text_chunks


_IRI_PREFIX = re.compile(r"^(<[^>]*>|[A-Za-z][A-Za-z0-9+.\-]*:[^=]*)=(.+)$")
REPORT_FIRST = 10
COLLECT_EVERY = 1_000_000  # streamed triples between two full cyclic collections (see main)
BATCH = 512


class UsageError(Exception):
    """Arguments the run cannot start with (reported, exit status 2)."""


def load_triples(path: str, errors: list[NTriplesError]) -> list[Triple]:
    """Triples of a schema or static-data file (``shared.rdf_files``), as canonical terms."""
    try:
        return read_triples(path, errors)
    except RdfFileError as exc:
        raise UsageError(str(exc)) from None


def _stream_arg(arg: str) -> tuple[str | None, str]:
    """``IRI=FILE`` -> (IRI, FILE); ``FILE`` or ``-`` -> (None, FILE)."""
    m = _IRI_PREFIX.match(arg)
    if m and not os.path.exists(arg):
        iri = m.group(1)
        return (iri if iri.startswith("<") else f"<{iri}>"), m.group(2)
    return None, arg


def _open(path: str) -> IO[str]:
    """A recorded stream as text; undecodable bytes survive as surrogates, which
    ``read_recorded`` reports as invalid UTF-8 against their line.

    ``utf-8-sig`` drops a byte-order mark at the start, as editors on Windows write one;
    a BOM anywhere else is still an error of its line."""
    if path == "-":
        return text_chunks(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="surrogateescape",
                                            newline="\n"))
    try:
        return text_chunks(open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n"))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None


def _merged(
    sources: list[tuple[str | None, str, IO[str]]], errors: list[tuple[str, NTriplesError]]
) -> Iterator[tuple[int, Triple, str | None]]:
    """One stream's items, or several merged by timestamp (stable: ties keep file order)."""

    def items(index: int, stream: str | None, name: str, fh: IO[str]) -> Iterator[tuple[int, int, Triple, str | None]]:
        own: list[NTriplesError] = []
        for ts, triple in read_recorded(fh, own):
            if own:
                errors.extend((name, e) for e in own)
                own.clear()
            yield ts, index, triple, stream
        errors.extend((name, e) for e in own)

    if len(sources) == 1:
        stream, name, fh = sources[0]
        for ts, _, triple, s in items(0, stream, name, fh):
            yield ts, triple, s
        return
    iterators = [items(i, stream, name, fh) for i, (stream, name, fh) in enumerate(sources)]
    for ts, _, triple, stream in heapq.merge(*iterators, key=lambda item: (item[0], item[1])):
        yield ts, triple, stream


def _unfed_streams(queries: list[Query | InstanceQuery],
                   sources: list[tuple[str | None, str, IO[str]]]) -> list[str]:
    """Why a run may match nothing by a slip of an IRI: a ``--stream IRI=FILE`` that no query
    reads, or a query stream that no ``--stream`` feeds (a file without IRI feeds them all)."""
    named = {s: q.name for q in queries for w in q.windows.values() for s in w.streams()}
    made = {stream_key(q.name) for q in queries if isinstance(q, Query) and q.construct}   # chained rules feed these
    fed = {stream for stream, _, _ in sources}
    lines = [f"stream {stream} ({path}) is read by no query: its triples match nothing"
             for stream, path, _ in sources if stream is not None and stream not in named]
    if None not in fed:
        lines += [f"no --stream feeds {stream}, which query {name} reads"
                  for stream, name in named.items() if stream not in fed and stream_key(stream) not in made]
    return lines


def peak_memory_mb() -> float:
    """This process's peak resident memory, in MB.

    Linux's ``VmHWM``, not ``ru_maxrss``: when a process is started by fork (or vfork) and
    exec, ``ru_maxrss`` keeps the parent's resident size from before the exec, so this
    command reports its parent's size when started from a large test harness or benchmark
    (docs/benchmarks.md). ``ru_maxrss`` only where there is no ``/proc``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _report_errors(label: str, errors: list[tuple[str, NTriplesError]], err: IO[str]) -> None:
    if not errors:
        return
    for name, exc in errors[:REPORT_FIRST]:
        print(f"edgewave match: {label} {name}:{exc}", file=err)
    more = len(errors) - REPORT_FIRST
    if more > 0:
        print(f"edgewave match: {label} ... and {more} more", file=err)


def run(args: argparse.Namespace, out: IO[str], err: IO[str], hold: list | None = None) -> int:
    """One `edgewave match` run; ``hold``, if given, receives the engine, so that the
    caller decides when its millions of small objects are freed (see ``console``)."""
    started = time.perf_counter()
    static_errors: list[tuple[str, NTriplesError]] = []
    schema: list[Triple] = []
    for path in args.schema or ():
        errs: list[NTriplesError] = []
        schema += load_triples(path, errs)
        if errs:
            raise UsageError(f"{path}: {errs[0]}")
    static: list[Triple] = []
    for path in args.static or ():
        errs = []
        static += load_triples(path, errs)
        static_errors += [(path, e) for e in errs]

    from edgewave.agent.engine.per_instance import InstanceEvaluator, InstanceQuery, parse_for_evaluation

    queries: list[Query] = []
    instance_queries: list[InstanceQuery] = []
    for path in args.query:
        try:
            text = read_text(path)
        except RdfFileError as exc:
            raise UsageError(str(exc)) from None
        try:
            parsed = parse_for_evaluation(text, per_instance=args.per_instance)
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
        (instance_queries if isinstance(parsed, InstanceQuery) else queries).append(parsed)

    buffer: list[str] = []
    dumps = json.dumps
    write = out.write
    # Unrestricted consumption repeats bindings (one offer, several matches): the JSON of
    # "pattern" and "bindings" is cached by value, so its escaping is paid once.
    heads: dict[tuple, str] = {}

    def on_match(match: Match) -> None:
        bindings = match.bindings
        cached_as = (match.pattern, *bindings.values())
        head = heads.get(cached_as)
        if head is None:
            if len(heads) >= 4096:
                heads.clear()
            head = heads[cached_as] = dumps({"pattern": match.pattern, "bindings": bindings})[:-1]
        if type(match) is AbsenceMatch:
            buffer.append(f'{head}, "start": {match.start}, "end": {match.end}, '
                          f'"expected": {dumps(list(match.expected))}}}')
        else:
            buffer.append(f'{head}, "start": {match.start}, "end": {match.end}}}')
        if len(buffer) >= BATCH:
            write("\n".join(buffer) + "\n")
            buffer.clear()

    engine = Engine(schema=schema, entailment=not args.no_entailment, on_match=on_match)
    if hold is not None:
        hold.append(engine)
    for query in queries:
        try:
            engine.add_query(query)
        except ValueError as exc:
            raise UsageError(f"query {query.name}: {exc}") from None
    if args.explain:
        from edgewave.agent.engine.per_instance.front import describe_instance_query

        if queries or not instance_queries:
            write(engine.describe())
        for query in instance_queries:
            write("\n" + describe_instance_query(query))
        return 0
    evaluators = [InstanceEvaluator(q, schema, entailment=not args.no_entailment, report=args.report,
                                    lateness_ms=args.lateness) for q in instance_queries]
    for evaluator in evaluators:
        evaluator.add_static(static)

    def report(results: list) -> None:
        """Reported instances go out at once: one can hold thousands of rows (a batch of 512
        of them held 36 MB), and they come at most once per step of a window."""
        if results:
            buffer.extend(dumps(result.as_json()) for result in results)
            write("\n".join(buffer) + "\n")
            buffer.clear()

    engine.add_static(static)
    # The engine holds what it needs of these; the term caches hold every IRI of the
    # schema (22,527 classes in the large BSBM one), which the stream rarely names again.
    del schema, static
    clear_term_caches()

    sources = []
    for arg in args.stream:
        stream, path = _stream_arg(arg)
        sources.append((stream, path, _open(path)))
    for line in _unfed_streams([*queries, *instance_queries], sources):
        print(f"edgewave match: warning: {line}", file=err)
    stream_errors: list[tuple[str, NTriplesError]] = []
    loaded = time.perf_counter()
    push = engine.push
    pushed = 0
    gc.freeze()  # what was loaded stays: the collections below need not walk it
    try:
        if len(sources) == 1 and sources[0][0] is None and not evaluators:
            _, name, fh = sources[0]
            own: list[NTriplesError] = []
            items = read_recorded(fh, own)
            while True:
                before = engine.triples_in
                engine.push_many(islice(items, COLLECT_EVERY))
                if engine.triples_in - before < COLLECT_EVERY:
                    break  # the stream ended
                gc.collect()
            stream_errors += [(name, e) for e in own]
        elif len(sources) == 1 and not queries and len(evaluators) == 1:
            # one per-instance query over one stream: its evaluator's own loop, no merging
            stream, name, fh = sources[0]
            own = []
            evaluator = evaluators[0]
            # the lines whose triples the windows only time are checked, not built (read_recorded)
            items = read_recorded(fh, own, evaluator.only_time(stream))
            while True:
                n = evaluator.push_many(islice(items, COLLECT_EVERY), stream, report)
                engine.triples_in += n  # counted as the engine counts them, with no pattern to feed
                if n < COLLECT_EVERY:
                    break  # the stream ended
                gc.collect()
            stream_errors += [(name, e) for e in own]
        else:
            for ts, triple, stream in _merged(sources, stream_errors):
                if queries:
                    push(triple, ts, stream)
                else:
                    engine.triples_in += 1  # counted as the engine counts them, with no pattern to feed
                for evaluator in evaluators:
                    report(evaluator.push(triple, ts, stream))
                if len(buffer) >= BATCH:
                    write("\n".join(buffer) + "\n")
                    buffer.clear()
                pushed += 1
                if pushed % COLLECT_EVERY == 0:
                    gc.collect()
    finally:
        for _, path, fh in sources:
            if path != "-":
                fh.close()
    for evaluator in evaluators:
        report(evaluator.finish())
    if buffer:
        write("\n".join(buffer) + "\n")
        buffer.clear()
    out.flush()
    finished = time.perf_counter()

    # The counters only: engine.stats() also walks every memory (docs/benchmarks.md).
    seconds = finished - loaded
    rate = engine.triples_in / seconds if seconds > 0 else 0.0
    peak_mb = peak_memory_mb()
    _report_errors("static", static_errors, err)
    _report_errors("malformed", stream_errors, err)
    per_query = " ".join([f"matches[{name}]={n}" for name, n in engine.matches_per_query().items()] +
                         [f"instances[{e.query.name}]={e.instances_reported} entailed[{e.query.name}]={e.entailed} "
                          f"late_triples[{e.query.name}]={e.late_triples}" for e in evaluators])
    print(
        f"edgewave match: triples_in={engine.triples_in} entailed={engine.entailed} "
        f"matches={engine.matches} malformed={len(stream_errors)} static={len(engine.static_triples())} "
        f"seconds={seconds:.3f} triples_per_s={rate:.0f} total_seconds={finished - started:.3f} "
        f"peak_memory_mb={peak_mb:.1f} entailment={'off' if args.no_entailment else 'on'} "
        f"derived={engine.derived_triples} derivations_cut={engine.network.derivations_cut} "
        f"absences_fired={engine.absences_fired} {per_query}",
        file=err,
    )
    return 0


def _report_policy(text: str) -> str:
    try:
        ReportPolicy.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _milliseconds(text: str) -> int:
    from edgewave.agent.engine.rspql import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgewave", description="edgewave engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser(
        "match",
        help="run the engine over recorded streams, one JSON object per match",
        description="Run the engine over recorded streams; one JSON object per match on stdout, a summary on stderr.",
    )
    m.add_argument("--schema", action="append", metavar="FILE", help="RDFS schema (Turtle, N-Triples, RDF/XML, ...)")
    m.add_argument("--static", action="append", metavar="FILE", help="static triples, joined with every window")
    m.add_argument("--query", action="append", required=True, metavar="FILE", help="an RSP-QL pattern")
    m.add_argument(
        "--stream",
        action="append",
        metavar="FILE|-|IRI=FILE",
        help="a recorded stream (<ms>\\t<statement> lines); IRI=FILE feeds only that stream",
    )
    m.add_argument("--no-entailment", action="store_true", help="switch the epsilon-network off")
    m.add_argument("--per-instance", action="store_true",
                   help="evaluate every query on each window instance (a conjunctive query is matched continuously "
                        "otherwise)")
    m.add_argument("--report", type=_report_policy, default="non-empty", metavar="POLICY",
                   help=f"which instances a per-instance query reports: {', '.join(REPORT_POLICIES)} "
                        "(default: non-empty)")
    m.add_argument("--lateness", type=_milliseconds, default=0, metavar="DURATION",
                   help="how long past its end an instance stays open for late triples (PT2S, 500ms; default 0)")
    m.add_argument(
        "--explain", action="store_true", help="print the compiled network for the queries and schema, match nothing",
    )
    return parser


def main(argv: list[str] | None = None, hold: list | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.explain and not args.stream:
        parser.error("the following arguments are required: --stream (unless --explain)")
    # The engine allocates a few tuples per triple and frees them a window later, none in
    # a cycle (nothing it builds refers back to itself), so reference counting frees them
    # and the cyclic collector's automatic runs would only walk the live windows again and
    # again, even with raised thresholds (docs/benchmarks.md). It is off for the run, and one
    # full collection every COLLECT_EVERY triples frees what cycles there are (a skipped
    # malformed line keeps its exception's traceback, and that is a cycle). The
    # endless-stream benchmark (bench_bsbm.py --memory) shows memory flat over 10 million.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return run(args, sys.stdout, sys.stderr, hold)
    except UsageError as exc:
        print(f"edgewave match: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def console() -> None:
    """The ``edgewave`` command: ``main``, then exit without freeing the engine.

    A run ends holding millions of tuples (memories, tokens, terms); freeing them
    one by one at interpreter exit takes a tenth of a run and serves nothing, so the
    process flushes its output and leaves with ``os._exit``.
    """
    hold: list = []
    code = main(hold=hold)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console()
