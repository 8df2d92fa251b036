"""The in-run reference for the engine benchmark: a plain hash-join Rete in Python.

This is the straightforward 150-line hash-join Rete that plain-Python Rete engines are
(about 50,000 triples/s on pattern 1 with a 5 s window on these machines): one alpha memory per triple pattern, a left-deep beta chain hashed on the join
variables, tuples as tokens, rdf:type entailment by a precomputed superclass closure,
expiry from per-memory arrival queues, one JSON object per match. It is written the way a
competent engineer would write it in an afternoon, without the engine's tuning, and it
shares no code with edgewave, so the benchmark can state edgewave's speed as a ratio that
holds across machines (the absolute rates move by tens of percent between our VMs).

    python plain_rete.py --schema S.nt --query Q.rq --stream S.tsv

It understands what the BSBM queries use: PREFIX lines, one RANGE, and the triple
patterns of the WINDOW block (``?s p o .``, prefixed names or IRIs, ``rdf:type`` or ``a``).
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import sys
import time
from collections import deque

RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"


def read_query(text: str) -> tuple[str, int, list[tuple[str, str, str]]]:
    """(name, width in ms, triple patterns of the WINDOW block)."""
    prefixes = dict(re.findall(r"PREFIX\s+([\w.-]*):\s*<([^>]*)>", text))
    name = re.search(r"REGISTER\s+RSTREAM\s+<([^>]*)>", text).group(1)
    width = int(float(re.search(r"RANGE\s+PT([\d.]+)S", text).group(1)) * 1000)
    block = text[text.index("WINDOW <w> {") + len("WINDOW <w> {"):]
    block = block[: block.index("}")]

    def term(t: str) -> str:
        if t.startswith(("?", "<")):
            return t
        if t == "a":
            return RDF_TYPE
        prefix, local = t.split(":", 1)
        return f"<{prefixes[prefix]}{local}>"

    patterns = [tuple(term(t) for t in line.strip().rstrip(".").split()) for line in block.strip().splitlines()]
    return name, width, patterns


class Rete:
    def __init__(self, patterns, supers, width, emit):
        self.patterns, self.supers, self.width, self.emit = patterns, supers, width, emit
        self.vars = []  # variables bound after each level, in order
        self.join_vars = []  # per level: variables shared with the levels before it
        bound: list[str] = []
        for s, p, o in patterns:
            mine = [t for t in (s, p, o) if t.startswith("?")]
            self.join_vars.append([v for v in mine if v in bound])
            bound += [v for v in mine if v not in bound]
            self.vars.append(list(bound))
        n = len(patterns)
        self.alpha = [dict() for _ in range(n)]  # join key -> [(bindings dict, ts)]
        self.alpha_q = [deque() for _ in range(n)]
        self.beta = [dict() for _ in range(n)]  # level i's tokens keyed by level i+1's join key
        self.beta_q = [deque() for _ in range(n)]
        self.by_pred: dict[str, list[int]] = {}
        for i, (s, p, o) in enumerate(patterns):
            self.by_pred.setdefault(p, []).append(i)
        self.now = 0
        self.last_gc = 0

    def push(self, triple, ts):
        if ts > self.now:
            self.now = ts
            if ts - self.last_gc >= self.width // 8:
                self.expire()
        s, p, o = triple
        triples = [triple]
        if p == RDF_TYPE:
            triples += [(s, p, c) for c in self.supers.get(o, ())]
        for t in triples:
            for i in self.by_pred.get(t[1], ()):
                self.right(i, t, ts)

    def right(self, i, triple, ts):
        binding = {}
        for pt, value in zip(self.patterns[i], triple):
            if pt.startswith("?"):
                if binding.setdefault(pt, value) != value:
                    return
            elif pt != value:
                return
        key = tuple(binding[v] for v in self.join_vars[i])
        item = (binding, ts, key)
        self.alpha[i].setdefault(key, []).append(item)
        self.alpha_q[i].append(item)
        if i == 0:
            self.add_token(0, ((binding[v] for v in self.vars[0]), ts, ts))
            return
        for row, start, end in self.beta[i - 1].get(key, ()):
            self.join(i, row, start, end, binding, ts)

    def left(self, i, row, start, end, key):
        for binding, ts, _ in self.alpha[i].get(key, ()):
            self.join(i, row, start, end, binding, ts)

    def join(self, i, row, start, end, binding, ts):
        start, end = min(start, ts), max(end, ts)
        if end - start > self.width or start + self.width < self.now:
            return
        values = dict(zip(self.vars[i - 1], row))
        values.update(binding)
        self.add_token(i, ([values[v] for v in self.vars[i]], start, end))

    def add_token(self, i, token):
        row, start, end = tuple(token[0]), token[1], token[2]
        if i == len(self.patterns) - 1:
            self.emit(dict(zip(self.vars[i], row)), start, end)
            return
        values = dict(zip(self.vars[i], row))
        key = tuple(values[v] for v in self.join_vars[i + 1])
        stored = (row, start, end, key)
        self.beta[i].setdefault(key, []).append(stored[:3])
        self.beta_q[i].append(stored)
        self.left(i + 1, row, start, end, key)

    def expire(self):
        self.last_gc = self.now
        limit = self.now - self.width
        for memory, queue in zip(self.alpha, self.alpha_q):
            while queue and queue[0][1] < limit:
                item = queue.popleft()
                bucket = memory[item[2]]
                bucket.remove(item)
                if not bucket:
                    del memory[item[2]]
        for memory, queue in zip(self.beta, self.beta_q):
            while queue and queue[0][2] < limit:
                row, start, end, key = queue.popleft()
                bucket = memory[key]
                bucket.remove((row, start, end))
                if not bucket:
                    del memory[key]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--stream", required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    parents: dict[str, list[str]] = {}
    with open(args.schema) as fh:
        for line in fh:
            s, p, o = line.rstrip(" .\n").split(" ", 2)
            if p == SUBCLASS:
                parents.setdefault(s, []).append(o)
    supers: dict[str, list[str]] = {}
    for cls in parents:
        seen, todo = [], list(parents[cls])
        while todo:
            c = todo.pop()
            if c not in seen:
                seen.append(c)
                todo += parents.get(c, [])
        supers[cls] = seen
    name, width, patterns = read_query(open(args.query).read())
    out = sys.stdout
    count = 0

    def emit(bindings, start, end):
        nonlocal count
        count += 1
        out.write(json.dumps({"pattern": name, "bindings": {k[1:]: v for k, v in bindings.items()},
                              "start": start, "end": end}) + "\n")

    rete = Rete(patterns, supers, width, emit)
    triples = 0
    with open(args.stream) as fh:
        for line in fh:
            ts, statement = line.split("\t", 1)
            s, p, o = statement.rstrip(" .\n").split(" ", 2)
            rete.push((s, p, o), int(ts))
            triples += 1
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:  # ru_maxrss keeps the parent's size from before exec; VmHWM is this process's own
        with open("/proc/self/status") as fh:
            peak = next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        pass
    print(f"plain-rete: triples_in={triples} matches={count} seconds={seconds:.3f} "
          f"triples_per_s={triples / seconds:.0f} peak_memory_mb={peak:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
