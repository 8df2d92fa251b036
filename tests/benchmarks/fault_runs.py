"""Repeated fault runs: the demo scenario, the cloud broker killed at a random moment, every run exact.

Each run is the whole demo scenario (a minute of gw1's sensors, two fires) through the real
uplink path of tests/fault_rig.py: gateway broker, ``edgewave-agent run`` with the shipped
settings (but a 3 s landed-acknowledgement wait), a cloud broker saving its state every 5 s
as shipped, and ``edgewave-cloud ingest`` (one worker, or three on every other run). At a
seeded random moment the cloud broker is killed (SIGKILL: what it had not saved is gone)
and started again 1-6 s later. A run is exact when the fires landed, deduplicated by event
id, are the simulator's ground truth room by room and every event the agent made landed.

    python tests/benchmarks/fault_runs.py [--runs 20] [--seed 20261128] [--mode auto]

``--mode off`` runs the same with events deleted on the broker's PUBACK (the behaviour
before end-to-end acknowledgement), to see what the acknowledgement buys. Prints one line
a run and a summary; exits non-zero when a run was not exact. About a minute a run.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fault_rig import Rig, record_demo  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--mode", default="auto", choices=("auto", "required", "off"),
                        help="the agent's uplink.landed.mode")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    exact = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ew-fault-runs-") as tmp:
        recording = record_demo(Path(tmp) / "recording")
        print(f"demo scenario: {len(recording.messages)} messages, truth {sum(recording.truth.values())} matches; "
              f"{args.runs} runs, seed {args.seed}, uplink.landed.mode {args.mode}", flush=True)
        for run in range(1, args.runs + 1):
            workers = 3 if run % 2 == 0 else 1
            at, down = rng.uniform(2.0, 55.0), rng.uniform(1.0, 6.0)
            rig = Rig(Path(tmp) / f"run{run}", recording, workers=workers,
                      agent_settings={"uplink": {"landed": {"mode": args.mode}}})
            t0 = time.monotonic()
            outcome = rig.run([(at, rig.restart_cloud_broker("kill", down_s=down))])
            problems = outcome.problems()
            exact += not problems
            print(f"run {run:2d}: {workers} worker(s), kill at {at:4.1f}s down {down:.1f}s: "
                  f"{'exact' if not problems else 'NOT EXACT'}: {outcome.summary()} "
                  f"[{time.monotonic() - t0:.0f}s]{'; ' + '; '.join(problems) if problems else ''}", flush=True)
    print(f"{exact} of {args.runs} runs exact ({time.monotonic() - started:.0f}s)")
    return 0 if exact == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
