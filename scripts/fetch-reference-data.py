#!/usr/bin/env python3
"""Fetch the public reference data the differential and real-data tests read.

    python3 scripts/fetch-reference-data.py                 # download into var/reference-data
    python3 scripts/fetch-reference-data.py --only w3c uci-occupancy
    python3 scripts/fetch-reference-data.py --link DIR      # use a copy you already have
    python3 scripts/fetch-reference-data.py --verify        # check what is there

Every file is taken from its published repository at a pinned commit and checked
against the SHA-256 in ``scripts/reference-data.manifest`` before it is kept, so
the tests see the same bytes on every machine. A file already present with the right
checksum is not downloaded again; a download that does not match is thrown away and
reported. ``--link DIR`` checks an existing copy (laid out as the manifest says)
and points the data directory at it with a symbolic link instead of downloading.

The data directory is ``var/reference-data`` in the checkout, or the directory named
by the environment variable ``EDGEWAVE_REFERENCE_DATA``, or ``--dest``; the tests
look in the same places (see docs/testing.md). Nothing fetched here is copied into
the repository: CityBench is GPL-3.0, and ``var/`` is not tracked.

``--mirror URL`` takes the files from a copy of the sources laid out as
``URL/OWNER/REPO/COMMIT/PATH`` (the layout of raw.githubusercontent.com) instead,
for example a ``file://`` directory on a machine without access to GitHub.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path(__file__).resolve().parent / "reference-data.manifest"
DEFAULT_DEST = REPO_ROOT / "var" / "reference-data"
ENV = "EDGEWAVE_REFERENCE_DATA"
RAW = "https://raw.githubusercontent.com"

# name -> (GitHub repository, commit, licence); the manifest's fourth column names one of these.
SOURCES: dict[str, tuple[str, str, str]] = {
    "w3c": ("w3c/rdf-tests", "ad541a5f0479f0798608c4801369d97b8e08b36f",
            "W3C Test Suite Licence and W3C 3-clause BSD Licence"),
    "citybench": ("CityBench/Benchmark", "8884af6d907d7171910ae322ee66e32b89ebc491", "GPL-3.0"),
    "csrbench-oracle": ("dellaglio/csrbench-oracle", "ac823b2afab739f31c0d54bfd40fb9d7d4c0df3f", "Apache-2.0"),
    "csrbench-aligned": ("Comparative-Research-in-StreamReasoning/CSRBench-Aligned",
                         "89dbad1afd729e606788dba97e5659063120d7cf", "Apache-2.0"),
    "csrbench-2022": ("Comparative-Research-in-StreamReasoning/CSRBench-CSPARQL-RDFox-CSPARQL2.0-YASPER",
                      "dd126323959f55223c40df6bca1a4c785f66cfff", "Apache-2.0"),
    # The UCI data sets (CC BY 4.0), as copied byte for byte into these repositories.
    "uci-occupancy": ("ahmetaydin-aa/room-occupancy-detection", "7526002dcbf8c2503eb0ebdb7675b4298fbf0695",
                      "CC BY 4.0 (UCI Machine Learning Repository, Occupancy Detection)"),
    "uci-airquality": ("ahmetmenevse/UCI_airquality", "7a5b1d23b342177edcb1775e2b012057fdc41cb3",
                       "CC BY 4.0 (UCI Machine Learning Repository, Air Quality)"),
    # INSTANS' examples (Aalto DSG): Close Friends' synthetic events; the cep2sparql agents'
    # sample events and the outputs INSTANS printed for them.
    "instans": ("aaltodsg/instans", "5ffc90e733e76ab911165f205ba57a7b3b200945", "MIT"),
    "instans-cep2sparql": ("aaltodsg/instans-cep2sparql", "fd5400e195a731f7408346517d8fee3082954282",
                           "MIT (as the INSTANS projects state)"),
}


@dataclass(frozen=True)
class Entry:
    sha256: str
    size: int
    dest: str        # path inside the data directory
    source: str      # a key of SOURCES
    path: str        # path inside the source repository

    def url(self, base: str = RAW) -> str:
        repo, commit, _ = SOURCES[self.source]
        return f"{base.rstrip('/')}/{repo}/{commit}/{urllib.parse.quote(self.path)}"


def read_manifest(path: Path = MANIFEST) -> list[Entry]:
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 5 or fields[3] not in SOURCES or len(fields[0]) != 64:
            raise SystemExit(f"{path}:{number}: expected 'sha256 size dest source path' with a known source")
        dest = Path(fields[2])
        if dest.is_absolute() or ".." in dest.parts:
            raise SystemExit(f"{path}:{number}: {fields[2]} is not a path inside the data directory")
        entries.append(Entry(fields[0], int(fields[1]), fields[2], fields[3], fields[4]))
    return entries


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check(root: Path, entries: list[Entry]) -> dict[str, list[str]]:
    """Problems per kind: ``missing`` and ``mismatch`` (wrong size or checksum) files."""
    problems: dict[str, list[str]] = {"missing": [], "mismatch": []}
    for entry in entries:
        path = root / entry.dest
        if not path.is_file():
            problems["missing"].append(entry.dest)
        elif path.stat().st_size != entry.size or sha256_of(path) != entry.sha256:
            problems["mismatch"].append(entry.dest)
    return problems


def fetch_one(entry: Entry, root: Path, base: str, timeout: float) -> str | None:
    """Download one file into place, checked; None when done, else why not."""
    target = root / entry.dest
    if target.is_file() and target.stat().st_size == entry.size and sha256_of(target) == entry.sha256:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    url = entry.url(base)
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            while block := response.read(1 << 20):
                size += len(block)
                if size > entry.size:
                    return f"{entry.dest}: {url} is larger than the {entry.size} bytes expected"
                digest.update(block)
                out.write(block)
        if size != entry.size or digest.hexdigest() != entry.sha256:
            return f"{entry.dest}: {url} gave {size} bytes with SHA-256 {digest.hexdigest()}, expected {entry.size} bytes with {entry.sha256}"
        os.replace(partial, target)
        return None
    except OSError as exc:   # URLError is an OSError
        return f"{entry.dest}: cannot fetch {url}: {getattr(exc, 'reason', None) or exc}"
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def link(source: Path, dest: Path, entries: list[Entry]) -> int:
    """Point ``dest`` at an existing copy after checking it."""
    source = source.resolve()
    problems = check(source, entries)
    if report(problems, source):
        return 1
    if dest.is_symlink():
        dest.unlink()
    elif dest.exists():
        if dest.is_dir() and not any(dest.iterdir()):
            dest.rmdir()
        else:
            print(f"{dest} exists and is not a link; move it away first", file=sys.stderr)
            return 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.symlink_to(source, target_is_directory=True)
    print(f"{dest} -> {source}: {len(entries)} files checked")
    return 0


def report(problems: dict[str, list[str]], root: Path) -> int:
    bad = 0
    for kind, names in problems.items():
        for name in names:
            print(f"{kind}: {root / name}", file=sys.stderr)
        bad += len(names)
    return bad


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fetch-reference-data.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", type=Path, default=None,
                   help=f"the data directory (default: ${ENV}, else {DEFAULT_DEST.relative_to(REPO_ROOT)})")
    p.add_argument("--only", nargs="+", metavar="SOURCE", choices=sorted(SOURCES),
                   help="fetch only these sources: " + ", ".join(sorted(SOURCES)))
    p.add_argument("--mirror", default=RAW,
                   help="where the sources are, laid out as URL/OWNER/REPO/COMMIT/PATH "
                        "(a local directory is taken as file://)")
    p.add_argument("--link", type=Path, metavar="DIR",
                   help="check an existing copy in DIR and make the data directory a link to it")
    p.add_argument("--verify", action="store_true", help="only check the data directory; exit 1 if anything is wrong")
    p.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per download (default 60)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    dest = args.dest or Path(os.environ.get(ENV) or DEFAULT_DEST)
    entries = read_manifest(args.manifest)
    if args.only:
        entries = [e for e in entries if e.source in args.only]
    if args.link:
        return link(args.link, dest, entries)
    if args.verify:
        bad = report(check(dest, entries), dest)
        print(f"{dest}: {len(entries) - bad} of {len(entries)} files present and verified")
        return 1 if bad else 0
    base = args.mirror
    if "://" not in base:
        base = Path(base).resolve().as_uri()
    failures = []
    for entry in entries:
        problem = fetch_one(entry, dest, base, args.timeout)
        if problem:
            failures.append(problem)
            print(problem, file=sys.stderr)
    print(f"{dest}: {len(entries) - len(failures)} of {len(entries)} files present and verified")
    for name in sorted({e.source for e in entries}):
        repo, commit, licence = SOURCES[name]
        print(f"  {name}: github.com/{repo} at {commit[:12]} ({licence})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
