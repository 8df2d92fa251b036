"""Rebuild this folder's stream and answers from a copy of CSRBench (its oracle repository).

    python tests/data/csrbench/make_fixture.py CSRBENCH_DIR

``stream.tsv.gz``: the benchmark's 34 one-second graphs (``stream/data_XX.ttl``, 15,188
triples) as one recorded stream, ``<XX * 1000>\\t<N-Triples statement>`` per line, the
lines of one graph sorted. Literals keep their lexical form ("54"^^xsd:double stays
"54", as the benchmark's engines and oracle print it). ``rdfox-answer-N.json``: copied
unchanged. ``queries/original/``: the benchmark's own RSP-QL and C-SPARQL texts of the
queries whose window there is the one of the oracle's run (``ORIGINALS``), unchanged
after a comment line naming their source. See PROVENANCE.md.
"""
from __future__ import annotations

import gzip
import re
import shutil
import sys
from pathlib import Path

import rdflib

HERE = Path(__file__).resolve().parent
QUERIES = (1, 2, 3, 5, 6, 7)   # Q4 is an AVG aggregate: patterns have no aggregates
# Same window as the oracle's run, and the answer's variables selected (not SELECT *). The
# Q6 C-SPARQL text has one closing brace too many (the parser says so: line 11, column 51).
ORIGINALS = {"rspql": (5, 6, 7), "csparql": (3, 5, 7)}
PROPERTIES = "csrbench-aligned-2022-srbench-queries.properties"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: make_fixture.py CSRBENCH_DIR", file=sys.stderr)
        return 2
    source = Path(argv[0])
    rdflib.NORMALIZE_LITERALS = False
    lines = []
    for second in range(34):
        graph = rdflib.Graph()
        graph.parse(source / "stream" / f"data_{second:02d}.ttl", format="turtle")
        statements = [line for line in graph.serialize(format="nt").splitlines() if line.strip()]
        lines += [f"{second * 1000}\t{line}\n" for line in sorted(statements)]
    # mtime=0: the same input gives the same bytes, so a rebuild shows no spurious diff
    with open(HERE / "stream.tsv.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write("".join(lines).encode("utf-8"))
    for n in QUERIES:
        name = f"rdfox-answer-{n}.json"
        shutil.copyfile(source / "comparative-study-2022" / "answers" / name, HERE / name)
    properties = re.sub(r"\\\n", "", (source / "queries" / PROPERTIES).read_text())  # joined lines
    (HERE / "queries" / "original").mkdir(parents=True, exist_ok=True)
    for dialect, numbers in ORIGINALS.items():
        for n in numbers:
            (text,) = re.findall(rf"^srb\.query{n}\.{dialect}query\s*=\s*(.*)$", properties, re.M)
            (HERE / "queries" / "original" / f"q{n}-{dialect}.rq").write_text(
                f"# srb.query{n}.{dialect}query of CSRBench-Aligned {PROPERTIES}\n"
                + text.replace("\\n", "\n").rstrip() + "\n")
    print(f"{len(lines)} triples, answers for Q{', Q'.join(map(str, QUERIES))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
