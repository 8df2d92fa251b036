"""The Sparkwave paper's BSBM workload (section 4) through `edgewave match`, with a baseline.

Every engine run is the real command, ``python -m edgewave.agent.match_cli match``, in its
own process, from the recorded N-Triples file to JSON matches on stdout (a file): the
throughput printed is triples in / time of the whole process (startup, schema, parsing,
output included). Because the development machines are shared, that time is the process's
CPU time (user + sys), and the wall rate is shown beside it. Each configuration runs
``--repeat`` times, the configurations interleaved in rounds. The 150,000 triples/s target
is checked on the median run; the targets that compare two configurations (entailment
off, the large schema, static data) on their best runs (see ``_median``).

Reference in the same run: ``bsbm/plain_rete.py``, the plain hash-join Rete the issue's
figures come from (about 50,000 triples/s where the target is 150,000, i.e. 3x), run on the
same file in its own process, measured the same way. Absolute rates move by tens of percent
between our VMs; the ratio to this reference does not, so it is printed beside the target.

Baseline (the C-SPARQL way): at each window slide, materialise the window's triples plus
the schema with rdflib + owlrl (RDFS closure) and run the pattern as SPARQL over it. It is
run on a smaller stream with a 1 s window sliding by 1 s (every triple is evaluated once:
the baseline's most favourable setting); the engine runs the same stream and both must
report the same set of matched offers.

Usage: python tests/benchmarks/bench_bsbm.py [--quick] [--offers N] [--memory] [--no-baseline]
``--memory`` adds the endless-stream check: 1 million and 10 million triples generated
lazily and piped into `edgewave match --stream -`, comparing peak memory.
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bsbm.generator import (  # noqa: E402
    DC,
    VOC,
    Workload,
    query_for,
    write_schema_nt,
    write_static_nt,
)

TARGET_RATE = 150_000
MAX_ENTAILMENT_COST = 0.25
MAX_SCHEMA_DROP = 0.10
MAX_STATIC_DROP = 0.20
MAX_MEMORY_MB = 300
REFERENCE_RATIO = 150_000 / 50_000  # the target over its plain-Rete figure
PLAIN_RETE = HERE / "bsbm" / "plain_rete.py"


def _cli(args: list[str], stdin_lines=None, program: list[str] | None = None) -> dict:
    """Run `edgewave match` (or ``program``) in a fresh process; its figures and matched offers.

    The matches go to a file, as ``edgewave match ... > matches.jsonl`` does, and are read
    once the process has ended. Reading them from a pipe while it runs put this process
    on the other core, and the child's CPU time read 15 % higher and twice as spread
    (1.18 s mean against 1.03 s, five interleaved pairs of pattern 1 at 5 s).
    """
    cmd = [sys.executable, *(program or ["-m", "edgewave.agent.match_cli", "match"]), *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err_file:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin_lines is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err_file,
        )
        if stdin_lines is not None:
            try:
                batch = []
                for line in stdin_lines:
                    batch.append(line)
                    if len(batch) >= 10_000:
                        proc.stdin.write("".join(batch).encode())
                        batch.clear()
                proc.stdin.write("".join(batch).encode())
            finally:
                proc.stdin.close()
        proc.wait()
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        err_file.seek(0)
        err = err_file.read().decode()
        if proc.returncode != 0:
            raise RuntimeError(f"edgewave match failed ({proc.returncode}): {err}")
        out.seek(0)
        offers: set[str] = set()
        count = 0
        for line in out:
            count += 1
            offer = json.loads(line).get("bindings", {}).get("offer")
            if offer is not None:
                offers.add(offer)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = dict(re.findall(r"(\w+)=([\w.]+)", err.strip().splitlines()[-1]))
    triples = int(summary["triples_in"])
    return {
        "triples": triples,
        "matches": count,
        "offers": offers,
        "wall": wall,
        "cpu": cpu,
        "rate_wall": triples / wall,
        "rate_cpu": triples / cpu if cpu else 0.0,
        "peak_mb": float(summary["peak_memory_mb"]),
        "entailed": int(summary.get("entailed", 0)),
    }


def _median(runs: list[dict]) -> dict:
    """The median run, with the best CPU-time rate of all the runs beside it as ``best_cpu``.

    The median is the figure a target on a rate is checked on. A target that compares two
    configurations is checked on their best runs: identical runs here take 0.96-1.51 s of
    CPU with no steal reported (the host's other tenants share caches and memory
    bandwidth), noise only ever adds time, and the fastest run is the one least disturbed.
    """
    ordered = sorted(runs, key=lambda r: r["rate_cpu"])
    return {**ordered[len(runs) // 2], "best_cpu": ordered[-1]["rate_cpu"]}


def baseline(workload: Workload, offers: int, width_ms: int) -> tuple[set[str], float, int]:
    """Re-evaluate pattern 1 per window slide with rdflib + owlrl; (offers, CPU seconds, triples)."""
    import owlrl
    import rdflib

    q = query_for(workload, 1, width_ms)
    body = q[q.index("WINDOW <w> {") + len("WINDOW <w> {") : q.index("  }\n")]
    sparql = (
        f"PREFIX bsbm-voc: <{VOC}>\nPREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>\n"
        f"PREFIX dc: <{DC}>\nSELECT DISTINCT ?offer WHERE {{ {body} }}"
    )
    schema_nt = "".join(f"{s} {p} {o} .\n" for s, p, o in workload.schema())
    items = list(workload.offers(offers, entailment=True))
    started = time.process_time()  # CPU time, like the engine's rates
    found: set[str] = set()
    first = items[0][0]
    slide_end = first + width_ms  # windows [end - width, end), sliding by the width
    i = 0
    while i < len(items):
        window = []
        while i < len(items) and items[i][0] < slide_end:
            window.append(items[i][1])
            i += 1
        if window:
            graph = rdflib.Graph()
            graph.parse(data=schema_nt + "".join(f"{s} {p} {o} .\n" for s, p, o in window), format="nt")
            owlrl.DeductiveClosure(owlrl.RDFS_Semantics, axiomatic_triples=False, datatype_axioms=False).expand(graph)
            found |= {f"<{row[0]}>" for row in graph.query(sparql)}
        slide_end += width_ms
    return found, time.process_time() - started, len(items)


def _line(label: str, r: dict) -> str:
    return (
        f"{label:<44} {r['rate_cpu']:>9,.0f} tr/s cpu  {r['rate_wall']:>9,.0f} tr/s wall  "
        f"best {r['best_cpu']:>9,.0f}  "
        f"peak {r['peak_mb']:6.1f} MB  matches {r['matches']:>7,}  offers {len(r['offers']):>6,}"
    )


QUICK = False  # set by main: a quick run is too small for the targets (startup dominates)


def _check(ok: bool, text: str, missed: list[str]) -> None:
    if QUICK:
        print(f"  [quick run, not checked: {'met' if ok else 'missed'}] {text}")
        return
    print(f"  [{'met' if ok else 'MISSED'}] {text}")
    if not ok:
        missed.append(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a small run in seconds (CI smoke)")
    parser.add_argument("--offers", type=int, default=None, help="offers per stream (11 triples each)")
    parser.add_argument("--memory", action="store_true", help="also run the 1M vs 10M triples memory check")
    parser.add_argument("--no-baseline", action="store_true", help="skip the rdflib + owlrl baseline")
    parser.add_argument("--memory-only", action="store_true", help="run only the 1M vs 10M triples memory check")
    parser.add_argument("--repeat", type=int, default=None, help="runs per configuration (5): the median and the best are kept")
    args = parser.parse_args(argv)
    global QUICK
    QUICK = args.quick
    offers = args.offers or (2_000 if args.quick else 20_000)
    baseline_offers = 300 if args.quick else 3_000
    widths = (5_000,) if args.quick else (1_000, 5_000, 25_000)
    repeat = args.repeat or (1 if args.quick else 5)
    if args.memory_only:
        args.memory = True
    missed: list[str] = []
    # Measure the program as installed: a wheel install compiles bytecode, an editable one
    # under PYTHONDONTWRITEBYTECODE (set on our machines) would compile every module on
    # every run, a quarter of a short run's start-up.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(HERE.parents[1] / "agent"),
                    str(HERE.parents[1] / "shared")], check=False, stdout=subprocess.DEVNULL)

    with tempfile.TemporaryDirectory(prefix="edgewave-bsbm-") as tmp:
        d = Path(tmp)
        small, large = Workload("small"), Workload("large")
        files: dict[str, str] = {}
        for name, w in (("small", small), ("large", large)):
            write_schema_nt(str(d / f"schema-{name}.nt"), w)
            for ent in (True, False):
                path = d / f"stream-{name}-{'ent' if ent else 'plain'}.tsv"
                with open(path, "w") as fh:
                    fh.writelines(w.lines(offers, entailment=ent))
                files[f"{name}-{ent}"] = str(path)
        write_static_nt(str(d / "static.nt"), small)

        def args_for(size: str, pattern: int, width: int, entailment: bool,
                     stream_offers: str | None = None) -> list[str]:
            w = small if size == "small" else large
            qpath = d / f"q-{size}-{pattern}-{width}.rq"
            qpath.write_text(query_for(w, pattern, width))
            cmd = ["--schema", str(d / f"schema-{size}.nt"), "--query", str(qpath)]
            if pattern >= 2:
                cmd += ["--static", str(d / "static.nt")]
            cmd += ["--stream", stream_offers or files[f"{size}-{entailment}"]]
            if not entailment:
                cmd.append("--no-entailment")
            return cmd

        def run(size: str, pattern: int, width: int, entailment: bool, stream_offers: str | None = None) -> dict:
            cmd = args_for(size, pattern, width, entailment, stream_offers)
            return _median([_cli(cmd) for _ in range(repeat)])

        if not args.memory_only:
            print(f"BSBM-like workload, median of {repeat} run(s): {offers:,} offers, 1 offer/ms; schema 329 classes (small) and "
                  f"22,527 (large); target type {small.hierarchy.target} with 40 subclasses")
            # Every configuration runs once a round, in rounds: the targets compare
            # configurations (entailment off, the large schema, static data, the plain
            # Rete), and this VM's speed drifts by tens of percent within minutes, so each
            # side of a ratio is measured under the same drift.
            rows: list[tuple[str, tuple, list[str], list[str] | None]] = []
            for width in widths:
                rows.append((f"pattern 1, {width // 1000:>2} s, 329 cl., entailment on ", ("small", 1, width, True),
                             args_for("small", 1, width, True), None))
                rows.append((f"pattern 1, {width // 1000:>2} s, 329 cl., entailment off", ("small", 1, width, False),
                             args_for("small", 1, width, False), None))
                rows.append((f"  reference: plain hash-join Rete, {width // 1000:>2} s", ("plain", 1, width, True),
                             args_for("small", 1, width, True), [str(PLAIN_RETE)]))
            rows.append(("pattern 1,  5 s, 22,527 cl., entailment on ", ("large", 1, 5_000, True),
                         args_for("large", 1, 5_000, True), None))
            for pattern in (2, 3):
                rows.append((f"pattern {pattern},  5 s, 329 cl., 10,000 static, ent. on", ("small", pattern, 5_000, True),
                             args_for("small", pattern, 5_000, True), None))
            runs: dict[tuple, list[dict]] = {key: [] for _, key, _, _ in rows}
            for round_no in range(repeat):
                print(f"  round {round_no + 1}/{repeat}: {len(rows)} configurations", file=sys.stderr, flush=True)
                for _, key, cmd, program in rows:
                    runs[key].append(_cli(cmd, program=program))
            results: dict[tuple, dict] = {}
            plain_runs: dict[int, dict] = {}
            for label, key, _, _ in rows:
                r = _median(runs[key])
                if key[0] == "plain":
                    plain_runs[key[2]] = r
                else:
                    results[key] = r
                print(_line(label, r))

            expected = {p: small.matching_offers(offers, p) for p in (1, 2, 3)}
            for width, r in plain_runs.items():
                if r["offers"] != expected[1] or r["matches"] != results[("small", 1, width, True)]["matches"]:
                    print(f"  WRONG: the plain Rete disagrees at {width} ms: {r['matches']} matches, "
                          f"{len(r['offers'])} offers")
                    missed.append(f"plain Rete agrees at {width} ms")
            for key, r in results.items():
                size, pattern, _, _ = key
                w = small if size == "small" else large
                want = expected[pattern] if size == "small" else w.matching_offers(offers, pattern)
                if r["offers"] != want:
                    print(f"  WRONG: {key} found {len(r['offers'])} offers, expected {len(want)}")
                    missed.append(f"correct offers for {key}")

            head = results[("small", 1, 5_000, True)]
            plain = results[("small", 1, 5_000, False)]
            print("\nTargets (CPU-time rates of the whole process; the rate on the median run, ratios between best runs):")
            _check(head["rate_cpu"] >= TARGET_RATE,
                   f"pattern 1, 5 s, entailment: {head['rate_cpu']:,.0f} >= {TARGET_RATE:,} triples/s "
                   f"(wall: {head['rate_wall']:,.0f})", missed)
            reference = plain_runs[5_000]
            ratio = head["best_cpu"] / reference["best_cpu"]
            label = "quick run, startup dominates: not meaningful" if QUICK else "information"
            print(f"  [{label}] the same, as a ratio to the plain hash-join Rete in this run: {ratio:.2f}x "
                  f"(best runs: {head['best_cpu']:,.0f} against {reference['best_cpu']:,.0f} triples/s); the target is {REFERENCE_RATIO:.0f}x the issue's "
                  f"plain-Rete figure, so {ratio / REFERENCE_RATIO:.0%} of it in machine-independent terms")
            cost = 1 - head["best_cpu"] / plain["best_cpu"]
            # Per offer (the streams differ: without entailment every offer carries its
            # product's super-type triples too, which inflates triples/s).
            per_offer = 1 - (head["best_cpu"] / head["triples"]) / (plain["best_cpu"] / plain["triples"])
            _check(cost <= MAX_ENTAILMENT_COST, f"entailment costs {cost:.0%} <= {MAX_ENTAILMENT_COST:.0%} of "
                   f"throughput in triples/s ({per_offer:.0%} in offers/s)", missed)
            big = results[("large", 1, 5_000, True)]
            drop = 1 - big["best_cpu"] / head["best_cpu"]
            _check(drop <= MAX_SCHEMA_DROP, f"329 -> 22,527 classes: drop {drop:.0%} <= {MAX_SCHEMA_DROP:.0%}", missed)
            for pattern in (2, 3):
                r = results[("small", pattern, 5_000, True)]
                drop = 1 - r["best_cpu"] / head["best_cpu"]
                _check(drop <= MAX_STATIC_DROP, f"pattern {pattern} with 10,000 static triples: {drop:.0%} below pattern 1 "
                       f"(<= {MAX_STATIC_DROP:.0%})", missed)
            if ("small", 1, 25_000, True) in results:
                peak = results[("small", 1, 25_000, True)]["peak_mb"]
                _check(peak < MAX_MEMORY_MB, f"peak memory at 25 s: {peak:.0f} MB < {MAX_MEMORY_MB} MB", missed)

            if not args.no_baseline:
                print(f"\nBaseline: rdflib + owlrl re-evaluating pattern 1 per slide, {baseline_offers:,} offers, "
                      "1 s window sliding by 1 s")
                base_offers, seconds, triples = baseline(small, baseline_offers, 1_000)
                base_rate = triples / seconds
                bpath = d / "baseline-stream.tsv"
                with open(bpath, "w") as fh:
                    fh.writelines(small.lines(baseline_offers))
                mine = run("small", 1, 1_000, True, stream_offers=str(bpath))
                print(f"  baseline: {base_rate:,.0f} triples/s cpu ({seconds:.1f} s for {triples:,} triples), "
                      f"{len(base_offers)} offers")
                print(f"  edgewave on the same stream: {len(mine['offers'])} offers; "
                      f"at full size, 1 s window: {results[('small', 1, widths[0], True)]['rate_cpu']:,.0f} triples/s cpu")
                full = results[("small", 1, widths[0], True)]["rate_cpu"]
                print(f"  ratio edgewave / baseline: {full / base_rate:,.0f}x")
                if base_offers != mine["offers"]:
                    print(f"  WRONG: baseline found {len(base_offers)} offers, edgewave {len(mine['offers'])}")
                    missed.append("baseline and engine agree on offers")
                else:
                    print("  same matched offers: yes")

        if args.memory:
            print("\nEndless stream: peak memory after 1M and 10M triples (pattern 1, 5 s, piped through --stream -)")
            qpath = d / "q-memory.rq"
            qpath.write_text(query_for(small, 1, 5_000))
            peaks = []
            for n_triples in (1_000_000, 10_000_000):
                r = _median([_cli(["--schema", str(d / "schema-small.nt"), "--query", str(qpath), "--stream", "-"],
                                  stdin_lines=small.lines(n_triples // 11))])
                peaks.append(r["peak_mb"])
                print(_line(f"{n_triples:,} triples", r))
            # Peak RSS wanders by a few MB as the parser's term caches fill and clear; flat
            # means no growth beyond that band (the engine's own counts are tested flat).
            _check(peaks[1] <= peaks[0] * 1.05 + 2,
                   f"peak after 10M {peaks[1]:.1f} MB vs {peaks[0]:.1f} MB after 1M: flat within 5% + 2 MB", missed)

    if missed:
        print(f"\nmissed: {len(missed)}")
        return 1
    print("\nquick run: correctness checked, targets not (too small)" if QUICK else "\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
