"""Uplink bytes and CPU: batches (shared/uplink_batch.py) against one JSON-LD event a message.

Usage: python tests/benchmarks/bench_uplink.py [--quick]

The events are the demo's (tests/data/uplink/demo-events.jsonl: what `scripts/demo.py` forwarded,
31 significant observations and 5 fire matches, 4 of them with their entailment evidence, each
line the payload the agent stores in its outbox). For batches of n events, every run of n
consecutive events of the stream (taken cyclically, so each event counts n times) is encoded
as one batch, with the table of repeated IRIs and without; bytes per event is the payload's
size over n (MQTT's own header and topic not counted). Baseline in the same run: the
single-event payload. CPU per event, best of 5 rounds (3 with --quick): encoding
(``encode_event`` against ``encode_batch``, with the table and without) and what ingest does (``decode_event`` against
``decode_batch`` and ``check_event`` on each event).

Exit status 1 if a batch of 32 takes more than a tenth of the bytes per event of single
events, or costs ingest more than 3x the CPU per event of a single event, in this run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from edgewave.shared.events import decode_event, encode_event
from edgewave.shared.uplink_batch import check_event, decode_batch, encode_batch

DEMO = Path(__file__).resolve().parent.parent / "data" / "uplink" / "demo-events.jsonl"
SIZES = (1, 8, 32)
TARGET_BYTES_RATIO = 10.0     # a batch of 32: at least 10x fewer bytes per event than single events
TARGET_CPU_RATIO = 3.0        # ... for at most 3x the ingest CPU per event


def windows(events: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    """Every run of ``n`` consecutive events, wrapping around at the end."""
    doubled = events + events
    return [doubled[i:i + n] for i in range(len(events))]


def best_per_item(fn: Callable[[], int], rounds: int) -> float:
    """Best CPU seconds per item of ``fn`` (which returns how many items it handled)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        items = fn()
        best = min(best, (time.process_time() - started) / items)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a second")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 5
    repeat = 5 if args.quick else 30
    events = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    singles = [encode_event(e) for e in events]
    single = sum(map(len, singles)) / len(singles)
    print(f"events: {len(events)} from the demo ({sum(e['kind'] == 'match' for e in events)} matches), "
          f"single JSON-LD payload {single:.0f} bytes/event")
    print(f"{'form':<26} {'bytes/event':>11} {'vs single':>10}")
    print(f"{'single event':<26} {single:>11.0f} {1.0:>9.1f}x")
    per_event: dict[tuple[int, bool], float] = {}
    for n in SIZES:
        for shared in (True, False):
            payloads = [encode_batch(w, shared_table=shared) for w in windows(events, n)]
            per_event[n, shared] = sum(map(len, payloads)) / len(payloads) / n
            label = f"batch of {n}, {'IRI table' if shared else 'no table'}"
            print(f"{label:<26} {per_event[n, shared]:>11.1f} {single / per_event[n, shared]:>9.1f}x smaller")

    cpu: dict[str, float] = {}

    def encode_singles() -> int:
        for _ in range(repeat):
            for event in events:
                encode_event(event)
        return repeat * len(events)

    def decode_singles() -> int:
        for _ in range(repeat):
            for payload in singles:
                decode_event(payload)
        return repeat * len(singles)

    cpu["encode single"] = best_per_item(encode_singles, rounds)
    cpu["decode single"] = best_per_item(decode_singles, rounds)
    for n in SIZES:
        chunks = [events[i:i + n] for i in range(0, len(events) - n + 1, n)]
        batches = [encode_batch(c) for c in chunks]
        count = repeat * n * len(chunks)

        def encode_batches(chunks: list[list[dict[str, Any]]] = chunks, count: int = count,
                           shared: bool = True) -> int:
            for _ in range(repeat):
                for chunk in chunks:
                    encode_batch(chunk, shared_table=shared)
            return count

        def decode_batches(batches: list[bytes] = batches, count: int = count) -> int:
            for _ in range(repeat):
                for payload in batches:
                    for event in decode_batch(payload):
                        check_event(event)
            return count

        cpu[f"encode batch of {n}"] = best_per_item(encode_batches, rounds)
        cpu[f"encode batch of {n}, no table"] = best_per_item(lambda f=encode_batches: f(shared=False), rounds)
        cpu[f"decode batch of {n}"] = best_per_item(decode_batches, rounds)
    print(f"{'CPU per event (this machine)':<32} {'us':>6} {'vs single':>10}")
    for name, seconds in sorted(cpu.items(), key=lambda item: not item[0].startswith("encode")):
        base = cpu["encode single" if name.startswith("encode") else "decode single"]
        print(f"{name:<32} {seconds * 1e6:>6.1f} {seconds / base:>9.2f}x")

    bytes_ratio = single / per_event[32, True]
    cpu_ratio = cpu["decode batch of 32"] / cpu["decode single"]
    ok = bytes_ratio >= TARGET_BYTES_RATIO and cpu_ratio <= TARGET_CPU_RATIO
    print(f"batch of 32: {bytes_ratio:.1f}x fewer bytes per event (target >= {TARGET_BYTES_RATIO:.0f}x), "
          f"ingest CPU {cpu_ratio:.2f}x a single event's (target <= {TARGET_CPU_RATIO:.0f}x): "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
