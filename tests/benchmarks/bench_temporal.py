"""Event processing beyond a window through `edgewave match`: throughput and memory of a SEQ
pattern and of an absence over a long stream, beside a conjunctive pattern on the same
stream (the baseline, same run), and the consumption strategies on BSBM pattern 1 beside
unrestricted.

The stream: 1,000 doors, one triple per millisecond of stream time (``door_lines``), a door
opened and then moving once every ten seconds, heartbeats in between, one door falling
silent now and then. Patterns (window 5 s):

* baseline: ``?d :opened ?o . ?d :motion ?m`` (conjunctive, unrestricted);
* SEQ: ``{ ?d :opened ?o } SEQ { ?d :motion ?m } FILTER(getDURATION() <= 2000)``;
* absence: ``?d :heartbeat ?h . FILTER NOT EXISTS { ?d :heartbeat ?next } WITHIN PT5S``.

Each runs in its own process over the same lines, piped in (``--stream -``), at N/10 and N
triples: the rate is triples in / CPU time of the process, and memory must stay flat (the
peak at N within 5 % + 2 MB of the peak at N/10), the target checked.

Usage: python tests/benchmarks/bench_temporal.py [--quick] [--triples N] [--offers N]
(default 1,000,000 triples; ``--triples 10000000`` for the figure in docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_bsbm  # noqa: E402
from bench_bsbm import _check, _cli, _line, _median  # noqa: E402
from bsbm.generator import Workload, query_for, write_schema_nt  # noqa: E402

EX = "http://ex.org/"
DOORS = 1000
HEAD = f"PREFIX : <{EX}>\nREGISTER RSTREAM <q> AS SELECT * FROM NAMED WINDOW <w> ON :s [RANGE PT5S STEP PT1S]\n"
PATTERNS = {
    "baseline (conjunctive)": "WHERE { WINDOW <w> { ?d :opened ?o . ?d :motion ?m } }",
    "SEQ + getDURATION": "WHERE { WINDOW <w> { { ?d :opened ?o } SEQ { ?d :motion ?m } "
                         "FILTER(getDURATION() <= 2000) } }",
    "absence (WITHIN PT5S)": "WHERE { WINDOW <w> { ?d :heartbeat ?h . "
                             "FILTER NOT EXISTS { ?d :heartbeat ?next } WITHIN PT5S } }",
}


def door_lines(n: int) -> Iterator[str]:
    """``n`` lines of ``<ms>\t<triple>``, one per ms, made as they are read (no list of 10M).

    Door ``i % DOORS`` speaks at ms ``i``, so each door once a second: "opened" in the first
    second of every ten, "motion" in the second, a "heartbeat" in the other eight. Door 7
    skips its heartbeats for 30 s of every minute: those silences are the absences."""
    for i in range(n):
        door = i % DOORS
        second = (i // 1000) % 10
        kind = "opened" if second == 0 else "motion" if second == 1 else "heartbeat"
        if kind == "heartbeat" and door == 7 and (i // 30_000) % 2:
            kind = "idle"
        yield f'{i}\t<{EX}door{door}> <{EX}{kind}> "{i}" .\n'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100,000 triples and 2,000 offers (CI smoke)")
    parser.add_argument("--triples", type=int, default=1_000_000, help="the long stream's length")
    parser.add_argument("--offers", type=int, default=20_000, help="BSBM offers for the consumption strategies")
    args = parser.parse_args(argv)
    if args.quick:
        args.triples, args.offers = 100_000, 2_000
    bench_bsbm.QUICK = args.quick  # a quick run is too small for the memory target
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        print(f"Temporal patterns over {args.triples:,} triples (and {args.triples // 10:,} for the memory check), "
              "piped through --stream -, each in its own process")
        for label, where in PATTERNS.items():
            query = d / "q.rq"
            query.write_text(HEAD + where)
            runs = [_median([_cli(["--query", str(query), "--stream", "-"], stdin_lines=door_lines(n))])
                    for n in (args.triples // 10, args.triples)]
            print(_line(f"{label}, {args.triples:,}", runs[1]))
            _check(runs[1]["peak_mb"] <= runs[0]["peak_mb"] * 1.05 + 2,
                   f"{label}: peak {runs[1]['peak_mb']:.1f} MB after {args.triples:,} triples vs "
                   f"{runs[0]['peak_mb']:.1f} MB after a tenth: flat within 5% + 2 MB", missed)

        print(f"\nConsumption strategies on BSBM pattern 1 (5 s window), {args.offers:,} offers")
        workload = Workload("small")
        write_schema_nt(d / "schema.nt", workload)
        stream = d / "stream.tsv"
        with stream.open("w") as out:
            out.writelines(workload.lines(args.offers))
        base = None
        for strategy in ("UNRESTRICTED", "RECENT", "CHRONOLOGICAL"):
            query = d / "bsbm.rq"
            query.write_text(query_for(workload, 1, 5_000) + f"\nCONSUME {strategy}\n")
            r = _median([_cli(["--schema", str(d / "schema.nt"), "--query", str(query), "--stream", str(stream)])])
            base = base or r
            print(_line(f"CONSUME {strategy}", r) + f"  ({r['rate_cpu'] / base['rate_cpu']:.2f}x unrestricted)")
    if missed:
        print(f"\nmissed: {len(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
