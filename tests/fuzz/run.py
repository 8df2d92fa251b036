"""Run one coverage-guided fuzz target (atheris, libFuzzer) for a given time and print its figures.

    .venv/bin/python tests/fuzz/run.py TARGET [--seconds N] [--allow-known] [-- LIBFUZZER-ARGS...]

TARGET is one of: event, batch, ntriples, rspql, configdoc, sim, cloud, mapping (see docs/fuzzing.md).
Needs the ``fuzz`` extra (``pip install -e '.[fuzz]'``). The seed corpus is read from
``tests/fuzz/corpus/TARGET/`` and never written; what the fuzzer finds goes to
``var/fuzz/TARGET/corpus/`` (kept between runs), a crashing, hanging (``-timeout``,
default 10 s an input) or memory-hungry (``-rss_limit_mb``, default 2048) input to
``var/fuzz/TARGET/`` as ``crash-*``, ``timeout-*`` or ``oom-*``, and libFuzzer's log to
``var/fuzz/TARGET/last-run.log``. The last line printed sums the run up::

    event: 1234567 executions in 600 s (2057/s), coverage 84 edges, 312 features, corpus 91 inputs, peak RSS 47 MB, crashes 0

The exit status is 0 when no crash, hang or memory blow-up was found. ``--allow-known``
lets the crashes already reported (each target's KNOWN) pass, to look past them.
Replay one input: ``run.py TARGET -- var/fuzz/TARGET/crash-...`` (libFuzzer runs the
files it is given and stops).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGETS = {
    # name: (module, packages instrumented for coverage)
    "event": ("fuzz_event", ["edgewave"]),
    "batch": ("fuzz_batch", ["edgewave"]),
    "ntriples": ("fuzz_ntriples", ["edgewave"]),
    "rspql": ("fuzz_rspql", ["edgewave"]),
    "configdoc": ("fuzz_configdoc", ["edgewave", "rdflib"]),
    "sim": ("fuzz_sim", ["edgewave"]),
    "cloud": ("fuzz_cloud", ["edgewave"]),
    "mapping": ("fuzz_mapping", ["edgewave"]),
}


def _child(target: str, libfuzzer_args: list[str]) -> None:
    """In the child process: import the target under instrumentation and hand over to libFuzzer."""
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install -e '.[fuzz]'")
    sys.path.insert(0, str(HERE))
    module_name, packages = TARGETS[target]
    with atheris.instrument_imports(include=packages):
        module = __import__(module_name)
    # Decoders warn per skipped row or recovered file: at millions of inputs that is noise, so the
    # fuzzing process logs only errors (here, not in the targets: tests import them too).
    logging.disable(logging.WARNING)
    atheris.Setup([sys.argv[0], *libfuzzer_args], module.TestOneInput)
    atheris.Fuzz()


def _figures(log: str) -> dict[str, int | None]:
    def last(pattern: str) -> int | None:
        found = re.findall(pattern, log)
        return int(found[-1]) if found else None

    return {
        "executions": last(r"stat::number_of_executed_units:\s*(\d+)"),
        "per_second": last(r"stat::average_exec_per_sec:\s*(\d+)"),
        "edges": last(r"\bcov: (\d+)"),
        "features": last(r"\bft: (\d+)"),
        "corpus": last(r"\bcorp: (\d+)/"),
        "rss_mb": last(r"stat::peak_rss_mb:\s*(\d+)"),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    if argv[:1] == ["--child"]:
        _child(argv[1], extra)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=int, default=60, help="how long to fuzz (default 60)")
    parser.add_argument("--allow-known", action="store_true",
                        help="let the crashes already reported pass (see the target's KNOWN)")
    args = parser.parse_args(argv)

    work = REPO / "var" / "fuzz" / args.target
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    seeds = HERE / "corpus" / args.target
    before = set(work.glob("*-*"))
    libfuzzer = [f"-max_total_time={args.seconds}", "-timeout=10", "-rss_limit_mb=2048",
                 "-print_final_stats=1", f"-artifact_prefix={work}/", *extra]
    if not any(not a.startswith("-") for a in extra):  # no files to replay: fuzz the corpora
        libfuzzer += [str(corpus), str(seeds)]
    env = dict(os.environ, EDGEWAVE_FUZZ_ALLOW_KNOWN="1" if args.allow_known else "0")
    log_path = work / "last-run.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        child = subprocess.run([sys.executable, __file__, "--child", args.target, "--", *libfuzzer],
                               stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    elapsed = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    found = sorted(p.name for p in set(work.glob("*-*")) - before
                   if p.name.startswith(("crash-", "timeout-", "oom-", "leak-", "slow-unit-")))
    f = _figures(text)
    if found or child.returncode != 0:
        tail = "\n".join(text.splitlines()[-40:])
        print(f"--- last lines of {log_path.relative_to(REPO)} ---\n{tail}\n---", file=sys.stderr)
    rate = f["per_second"] or (round(f["executions"] / elapsed) if f["executions"] else 0)
    print(f"{args.target}: {f['executions']} executions in {elapsed:.0f} s ({rate}/s), "
          f"coverage {f['edges']} edges, {f['features']} features, corpus {f['corpus']} inputs, "
          f"peak RSS {f['rss_mb']} MB, crashes {len(found)}{' ' + ', '.join(found) if found else ''}"
          f"{'' if child.returncode == 0 else f' (libFuzzer exit status {child.returncode})'}")
    return 0 if not found and child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
