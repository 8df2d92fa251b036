"""Run every benchmark in this folder (`make bench`); each prints its figures and its baseline.

Usage: python tests/benchmarks/run.py [--quick] [name ...]
A benchmark is a module bench_<name>.py with main(argv) -> int; a non-zero result
means a target measured as a ratio against its in-run baseline was missed.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    known = [path.stem[len("bench_"):] for path in sorted(HERE.glob("bench_*.py"))]
    parser = argparse.ArgumentParser(description="Run the benchmarks (all, or those named), each beside its "
                                                 "baseline measured in the same run.")
    parser.add_argument("--quick", action="store_true", help="each benchmark's short form")
    parser.add_argument("names", nargs="*", metavar="name", help=f"one of: {', '.join(known)} (default: all)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    quick, names = args.quick, args.names
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)} (known: {', '.join(known)})")
    sys.path.insert(0, str(HERE))
    failures = []
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem[len("bench_"):]
        if names and name not in names:
            continue
        print(f"\n=== {path.name} ===", flush=True)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        sys.modules[path.stem] = module     # as an import would (dataclasses look their module up there)
        spec.loader.exec_module(module)
        started = time.monotonic()
        rc = module.main(["--quick"] if quick else [])
        print(f"=== {path.name}: exit {rc} in {time.monotonic() - started:.1f}s ===", flush=True)
        if rc:
            failures.append(name)
    if failures:
        print(f"\nmissed targets: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
