"""Uplink bytes of the demo when gateways forward per-minute aggregates instead of significant observations.

Usage: python tests/benchmarks/bench_uplink_aggregate.py [--quick]

Two agents run the demo scenario side by side (configs/scenarios/demo.yaml at its real pace,
one minute; ``--quick``: the simulator at speed 2, half a minute), each between
brokers of its own, with the shipped settings (configs/agent.yaml) and the shipped config
document (configs/gateway-config.trig):

- baseline: the document without its per-instance queries, significance on: what gateways
  forwarded before (matches, and the observations the deadbands let through);
- aggregate: the document as shipped (its per-minute CO2 average per room), significance off:
  matches and one event per window instance.

The aggregate run waits for the instance of the scenario's last minute to close (by the
clock, up to a minute). Figures: the agents' own counters, ``bytes_forwarded / bytes_in`` (sensor bytes in, payload
bytes of every uplink message out), and the events of each kind the cloud broker received.
Exit status 1 if the aggregate run forwards more bytes than the baseline, or if either run
misses a match of the ground truth (five fires) or the aggregate run reports no instance.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

import yaml  # noqa: E402
from agent_harness import GATEWAY, KEY, AgentProcess, CloudWatcher, wait_for  # noqa: E402
from broker_process import MosquittoBroker  # noqa: E402

from edgewave.agent.engine.per_instance import InstanceQuery, parse_for_evaluation  # noqa: E402
from edgewave.shared.configdoc import build_config_document, load_config_document  # noqa: E402

BIN = Path(sys.executable).parent
DOCUMENT = REPO / "configs" / "gateway-config.trig"


def documents(work: Path) -> tuple[Path, Path]:
    """(baseline, aggregate) config documents: the shipped one without and with its per-instance queries."""
    text = DOCUMENT.read_text(encoding="utf-8")
    doc = load_config_document(text, "trig")
    continuous = {name: query for name, query in doc.patterns.items()
                  if not isinstance(parse_for_evaluation(query), InstanceQuery)}
    if len(continuous) == len(doc.patterns):
        raise SystemExit(f"{DOCUMENT} holds no per-instance query to measure")
    baseline = work / "baseline.trig"
    baseline.write_text(build_config_document(continuous, doc.schema, doc.static, doc.significance))
    return baseline, DOCUMENT


def run(work: Path, document: Path, significance: bool, speed: float) -> dict:
    """One agent through the demo scenario; its counters and what the cloud broker got."""
    local, cloud = MosquittoBroker(work / "local").start(), MosquittoBroker(work / "cloud").start()
    watcher = CloudWatcher(cloud, client_id=f"bench-watcher-{work.name}")
    agent = AgentProcess(work / "agent", local, cloud)
    settings = yaml.safe_load((REPO / "configs/agent.yaml").read_text())
    settings.update(gateway=GATEWAY, data_dir=str(work / "agent" / "data"))
    settings["local"].update(host=local.host, port=local.port)
    settings["cloud"].update(host=cloud.host, port=cloud.port)
    settings["config"].update(key=KEY, bootstrap=str(document))
    settings["status"].update(local_interval_s=0.5, state_file_interval_s=0.5)
    settings.setdefault("significance", {})["enabled"] = significance
    agent.config_path.write_text(yaml.safe_dump(settings))
    agent.start()
    try:
        truth = work / "truth.jsonl"
        sim = subprocess.run([str(BIN / "edgewave-sim"), "run", "--config", "configs/sim.yaml",
                              "--scenario", "configs/scenarios/demo.yaml", "--gateway", GATEWAY,
                              "--broker", f"{local.host}:{local.port}", "--speed", str(speed),
                              "--truth", str(truth)], capture_output=True, text=True, cwd=REPO, timeout=300)
        if sim.returncode:
            raise SystemExit(f"edgewave-sim failed: {sim.stderr[-2000:]}")
        fires = sum(json.loads(line)["pattern"] == "fire" for line in truth.read_text().splitlines())
        wait_for(lambda: len(watcher.matches("fire")) >= fires, 60, "the scenario's fires at the cloud")
        if not significance:       # the instance of the scenario's last minute closes by the clock
            time.sleep(max(0.0, (time.time() // 60 + 1) * 60 + 1.5 - time.time()))

        def settled() -> dict:
            c = agent.counters()
            return c if c.get("bytes_in") and c.get("forwarded") == len(watcher.events) \
                and agent.state().get("outbox", {}).get("depth") == 0 else {}
        counters = wait_for(settled, 90, lambda: f"the counters to settle ({agent.counters()})", interval=0.5)
        with watcher.lock:
            kinds = Counter(e["kind"] for e in watcher.events)
            messages = len(watcher.event_messages)
        return {"counters": counters, "kinds": kinds, "messages": messages, "fires": fires,
                "fires_seen": len({e["id"] for e in watcher.matches("fire")})}
    finally:
        agent.stop()
        watcher.close()
        local.stop()
        cloud.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the scenario at twice its pace")
    args = parser.parse_args(argv)
    speed = 2.0 if args.quick else 1.0
    with tempfile.TemporaryDirectory(prefix="bench-uplink-aggregate-") as tmp:
        work = Path(tmp)
        baseline_doc, aggregate_doc = documents(work)
        with ThreadPoolExecutor(2) as pool:
            baseline = pool.submit(run, work / "baseline", baseline_doc, True, speed)
            aggregate = pool.submit(run, work / "aggregate", aggregate_doc, False, speed)
            results = {"baseline": baseline.result(), "aggregate": aggregate.result()}
    print(f"demo scenario at speed {speed:g}, shipped settings and config document")
    print(f"{'run':<10} {'sensor bytes':>12} {'forwarded':>10} {'share':>7} {'messages':>9}  events by kind")
    for name, r in results.items():
        c = r["counters"]
        share = c["bytes_forwarded"] / c["bytes_in"]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items()))
        print(f"{name:<10} {c['bytes_in']:>12,} {c['bytes_forwarded']:>10,} {share:>7.2%} {r['messages']:>9}  {kinds}")
    base, agg = (results[k]["counters"]["bytes_forwarded"] for k in ("baseline", "aggregate"))
    print(f"aggregates instead of significant observations: {agg / base:.2f}x the baseline's uplink bytes")
    failed = []
    if agg > base:
        failed.append("the aggregate run forwarded more bytes than the baseline")
    for name, r in results.items():
        if r["fires_seen"] != r["fires"]:
            failed.append(f"{name}: {r['fires_seen']} of {r['fires']} fires arrived")
    if not results["aggregate"]["kinds"].get("instance"):
        failed.append("the aggregate run reported no window instance")
    for problem in failed:
        print(f"MISSED: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
