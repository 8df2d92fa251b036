"""Benchmark: a fleet of simulated gateways against one cloud machine (real Mosquitto,
`edgewave-cloud run --ingest-workers W` with its Spark job in local mode, SQLite).

Every simulated gateway replays the demo's recorded uplink (tests/data/uplink/demo-events.jsonl:
the 36 events `make demo`'s gateway forwarded in a minute) at the demo's pace, over and
over, each gateway at its own phase, its events re-keyed (a fresh id, its own gateway
name in the gateway field and IRIs, times moved to now). A few publisher processes
(`--publishers`, each with `--connections` MQTT connections) play the fleet: a real agent
per gateway would saturate two cores long before the cloud. Uplink forms:

- single: one JSON-LD event per message, as agents send today;
- batch:  each gateway sends what it emitted in the last `--linger` seconds as one
  batch (shared/uplink_batch.py).

The fleet grows in steps (N gateways, then 2N, ...). Each step publishes for a while and
samples once a second: events acknowledged by the broker (published), in closed landing
files (landed: what the job can read) and counted in SQLite (aggregated). A step holds
when the publishers kept their schedule and the backlog (published but not aggregated,
in seconds of the fleet's rate) stays bounded after the step's first quarter (the time
the pipeline takes to fill): never above BOUND_S, and not growing. The backlog is a saw
tooth (it falls each time a micro-batch commits), so growth is read on its troughs: the
lowest backlog in the second half of that window may exceed the lowest in the first half
by at most MAX_TREND seconds per second between them, plus SLACK_S (one trigger interval):
over a 40 s step this catches a cloud that counts about 20 % less than is offered, and
BOUND_S any larger shortfall sooner. --quick's 20 s steps are too short to judge: it
reports its steps and fails only if something published was not counted. The largest fleet held is the last step
that held before one that did not; the doubling is refined once between the two. A
warm-up step (not judged) comes first, so the Spark job's first micro-batches and the
JVM's compilation are not in any step. Probes (one match event per publisher
every half second, with a unique binding value) give the delay from the event's emission
at its gateway to its row in SQLite. CPU and memory per process come from /proc; bytes per
event on the wire are the MQTT PUBLISH packets the publishers send, and what the broker
read from its sockets (/proc/<pid>/io), per event.

Baseline in the same run: the single-event form against batches, on the same cloud.

    python tests/benchmarks/bench_fleet.py [--quick] [--ingest-workers W] [--step-s S] ...
"""
from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DEMO_EVENTS = HERE.parent / "data" / "uplink" / "demo-events.jsonl"
PROBE_PREFIX = "<http://example.org/probe/"
BOUND_S = 20.0          # a step whose backlog exceeds this many seconds of publishing does not hold
ABORT_S = 45.0          # ... and one past this stops early
MAX_TREND = 0.1         # backlog growth (s per s) that still holds
SLACK_S = 2.0           # ... plus this much (the trigger interval: where a trough falls is that uncertain)
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# -- the replayed uplink ---------------------------------------------------------------------

class Replay:
    """The demo's events as templates: the gateway's name, the id and the times are filled in per send."""

    def __init__(self, path: Path = DEMO_EVENTS) -> None:
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        events.sort(key=lambda e: e["emittedAt"])
        first = events[0]["emittedAt"]
        span = events[-1]["emittedAt"] - first
        self.period_ms = span + span // (len(events) - 1)      # the recording, then its mean gap
        self.offsets = [e["emittedAt"] - first for e in events]
        self.templates: list[str] = []
        self.probe_templates: list[str | None] = []
        self.probe_key: tuple[str, str] | None = None   # (pattern, variable) the probes' values are counted under
        self.shifts: list[tuple[int, int]] = []
        for e in events:
            self.shifts.append((e["emittedAt"] - e["windowStart"], e["emittedAt"] - e["windowEnd"]))
            self.templates.append(self._template(e))
            probe = None
            if e["kind"] == "match" and e["bindings"]:
                bindings = [dict(b) for b in e["bindings"]]
                bindings[0]["value"] = "@PROBE@"
                key = (e["pattern"], bindings[0]["variable"])
                if self.probe_key not in (None, key):
                    continue                    # one (pattern, variable) for every probe
                self.probe_key = key
                probe = self._template(dict(e, bindings=bindings))
            self.probe_templates.append(probe)

    @staticmethod
    def _template(event: dict[str, Any]) -> str:
        # The encoder's compact form (edgewave.shared.events.encode_event), with tokens to fill in.
        filled = dict(event, id="urn:edgewave:event:@ID@", gateway="gw1", windowStart="@WS@",
                      windowEnd="@WE@", emittedAt="@EM@")
        text = json.dumps(filled, separators=(",", ":"), ensure_ascii=False)
        for token in ("WS", "WE", "EM"):
            text = text.replace(f'"@{token}@"', f"@{token}@")
        assert "gw1" in text and "@ID@" in text
        return text

    @property
    def rate_per_gateway(self) -> float:
        """Events per second one gateway sends (the demo's pace)."""
        return len(self.offsets) / (self.period_ms / 1000)

    def render(self, index: int, gateway: str, key: str, emitted_ms: int, probe: str | None = None) -> str:
        template = self.probe_templates[index] if probe else self.templates[index]
        assert template is not None
        start_shift, end_shift = self.shifts[index]
        text = (template.replace("gw1", gateway)
                .replace("@ID@", hashlib.blake2b(key.encode(), digest_size=16).hexdigest())
                .replace("@WS@", str(emitted_ms - start_shift))
                .replace("@WE@", str(emitted_ms - end_shift))
                .replace("@EM@", str(emitted_ms)))
        return text.replace("@PROBE@", probe) if probe else text


def publish_packet_bytes(topic: str, payload_len: int) -> int:
    """The size of an MQTT 5 QoS 1 PUBLISH without properties: fixed header, topic, packet id,
    property length, payload."""
    remaining = 2 + len(topic.encode()) + 2 + 1 + payload_len
    length_bytes = 1 if remaining < 128 else 2 if remaining < 16384 else 3 if remaining < 2097152 else 4
    return 1 + length_bytes + remaining


# -- a publisher process ---------------------------------------------------------------------

def publisher_main(spec: dict[str, Any]) -> int:
    """Play gateways ``first`` .. ``last - 1`` from wall time ``t0`` for ``duration_s``; one JSON line
    on stdout a second ({"acked", "events_acked", "scheduled", "packet_bytes", "behind_s"}) and one per probe."""
    from edgewave.shared.broker import BrokerSettings
    from edgewave.shared.mqtt_client import new_client
    from edgewave.shared.uplink_batch import encode_batch

    replay = Replay()
    gateways = [f"gw{n:05d}" for n in range(spec["first"], spec["last"])]
    mode, linger_ms = spec["mode"], int(spec["linger_s"] * 1000)
    t0_ms, end_ms = int(spec["t0"] * 1000), int((spec["t0"] + spec["duration_s"]) * 1000)
    out_lock = threading.Lock()
    counts = {"acked": 0, "events_acked": 0, "sent": 0, "events_sent": 0, "packet_bytes": 0, "scheduled": 0}
    pending: dict[tuple[int, int], int] = {}       # (client, mid) -> events in the message
    early: set[tuple[int, int]] = set()            # acknowledged before send() recorded them

    def emit(obj: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    clients = []
    for c in range(max(1, min(spec["connections"], len(gateways)))):
        client = new_client(BrokerSettings(host=spec["host"], port=spec["port"]), f"fleet-{spec['tag']}-{c}",
                            max_inflight=1000)

        def on_publish(cl, userdata, mid, rc, props, c=c) -> None:  # noqa: ANN001
            with out_lock:
                counts["acked"] += 1
                if (c, mid) in pending:
                    counts["events_acked"] += pending.pop((c, mid))
                else:
                    early.add((c, mid))

        client.on_publish = on_publish
        client.connect(spec["host"], spec["port"], keepalive=60)
        client.loop_start()
        clients.append(client)

    rng_phase = [int(hashlib.blake2b(g.encode(), digest_size=4).hexdigest(), 16) % replay.period_ms
                 for g in gateways]
    # Each gateway's next event: (due ms, gateway index, event index, cycle).
    heap: list[tuple[int, int, int, int]] = []
    for gi, phase in enumerate(rng_phase):
        for ei, offset in enumerate(replay.offsets):
            due = t0_ms + (phase + offset) % replay.period_ms
            heap.append((due, gi, ei, 0))
    heapq.heapify(heap)
    buffers: dict[int, list[dict[str, Any]]] = {}
    flushes: list[tuple[int, int]] = []            # (due ms, gateway index) for batch mode
    probe_every_ms, next_probe_ms, probe_n = 500, t0_ms, 0
    last_report = time.monotonic()

    def send(gi: int, payload: bytes, events: int) -> None:
        topic = f"ew/{gateways[gi]}/events"
        ci = gi % len(clients)
        # Not under out_lock: paho calls on_publish holding its own lock, which publish() takes too.
        info = clients[ci].publish(topic, payload, qos=1)
        with out_lock:
            if (ci, info.mid) in early:
                early.discard((ci, info.mid))
                counts["events_acked"] += events
            else:
                pending[(ci, info.mid)] = events
            counts["sent"] += 1
            counts["events_sent"] += events
            counts["packet_bytes"] += publish_packet_bytes(topic, len(payload))

    def report(final: bool = False) -> None:
        now_ms = time.time() * 1000
        behind = (now_ms - heap[0][0]) / 1000 if heap and heap[0][0] < end_ms else 0.0
        with out_lock:
            snapshot = dict(counts)
        emit(dict(snapshot, behind_s=max(0.0, behind), final=final))

    while True:
        now_ms = int(time.time() * 1000)
        due_event = heap[0][0] if heap else None
        due_flush = flushes[0][0] if flushes else None
        nxt = min(d for d in (due_event, due_flush) if d is not None) if (heap or flushes) else None
        if nxt is None or (nxt >= end_ms and not flushes):
            break
        if nxt > now_ms:
            if time.monotonic() - last_report >= 1.0:
                report()
                last_report = time.monotonic()
            time.sleep(min((nxt - now_ms) / 1000, 0.05))
            continue
        if due_flush is not None and (due_event is None or due_flush <= due_event):
            _, gi = heapq.heappop(flushes)
            events = buffers.pop(gi)
            send(gi, encode_batch(events), len(events))
            continue
        due, gi, ei, cycle = heapq.heappop(heap)
        if due >= end_ms:
            heap.clear()          # every later event is past the end too; batches still flush by end_ms
            continue
        heapq.heappush(heap, (due + replay.period_ms, gi, ei, cycle + 1))
        counts["scheduled"] += 1
        probe = None
        if replay.probe_templates[ei] is not None and due >= next_probe_ms:
            probe = f"{PROBE_PREFIX}{spec['tag']}-{probe_n}>"
            probe_n += 1
            next_probe_ms = due + probe_every_ms
        text = replay.render(ei, gateways[gi], f"{spec['tag']}/{gateways[gi]}/{cycle}/{ei}", due, probe)
        if probe:
            emit({"probe": probe, "emitted": due / 1000})
        if mode == "single":
            send(gi, text.encode("utf-8"), 1)
        else:
            if gi not in buffers:
                buffers[gi] = []
                heapq.heappush(flushes, (min(due + linger_ms, end_ms), gi))
            buffers[gi].append(json.loads(text))
        if time.monotonic() - last_report >= 1.0:
            report()
            last_report = time.monotonic()
    deadline = time.monotonic() + spec.get("ack_timeout_s", 120)
    while time.monotonic() < deadline:
        with out_lock:
            if counts["acked"] >= counts["sent"]:
                break
        report()
        time.sleep(0.5)
    report(final=True)
    for client in clients:
        client.disconnect()
        client.loop_stop()
    return 0


# -- measuring the cloud ---------------------------------------------------------------------

def proc_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK      # utime, stime


def proc_rss_mb(pid: int) -> float | None:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KB / 1024
    except OSError:
        return None


def proc_rchar(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cloud_roles(root_pid: int) -> dict[int, str]:
    """The `edgewave-cloud run` process tree by role: service, ingest-w<i>, spark (Python driver), spark JVM."""
    import psutil

    roles = {root_pid: "service"}
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return roles
    for child in children:
        try:
            argv = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if argv and os.path.basename(argv[0]).startswith("java"):
            roles[child.pid] = "spark JVM"
        elif "ingest" in argv and "--worker" in argv:
            roles[child.pid] = f"ingest-w{argv[argv.index('--worker') + 1]}"
        elif "spark" in argv:
            roles[child.pid] = "spark (Python driver)"
        else:
            roles[child.pid] = "other children"
    return roles


class LandedCounter:
    """Records in closed landing files, each file read once (the job reads closed files only)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: set[str] = set()
        self.total = 0

    def count(self) -> int:
        for path in self.root.glob("date=*/*.jsonl"):
            if path.name not in self.seen:
                with open(path, "rb") as fh:
                    self.total += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
                self.seen.add(path.name)
        return self.total


@dataclass
class Step:
    mode: str
    gateways: int
    offered: float                                  # events/s the fleet sends
    samples: list[tuple[float, int, int, int, int]] = field(default_factory=list)  # t, scheduled, acked, landed, agg
    probes_sent: dict[str, float] = field(default_factory=dict)
    probes_seen: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)          # role -> CPU % of one core
    rss: dict[str, float] = field(default_factory=dict)          # role -> max MB
    packet_bytes: int = 0
    events_sent: int = 0
    broker_rchar: int = 0
    behind_s: float = 0.0
    aborted: bool = False
    drain_s: float | None = None
    holds: bool = False
    reason: str = ""

    def backlog_s(self) -> list[tuple[float, float]]:
        return [(t, (acked - agg) / self.offered) for t, _, acked, _, agg in self.samples]

    def judge(self, duration: float) -> None:
        series = self.backlog_s()
        if self.aborted:
            self.reason = f"backlog passed {ABORT_S:.0f} s: stopped early"
            return
        if self.behind_s > 2.0:
            self.reason = f"the publishers fell {self.behind_s:.1f} s behind their schedule"
            return
        t0 = series[0][0] if series else 0
        window = [(t - t0, b) for t, b in series if t - t0 >= duration / 4]
        if len(window) < 4:
            self.reason = "too few samples"
            return
        middle = window[0][0] + (window[-1][0] - window[0][0]) / 2
        first = min(b for t, b in window if t < middle)
        second = min(b for t, b in window if t >= middle)
        allowed = MAX_TREND * (window[-1][0] - window[0][0]) / 2 + SLACK_S
        peak = max(b for _, b in window)
        self.holds = peak <= BOUND_S and second - first <= allowed
        self.reason = (f"backlog max {peak:.1f} s, troughs {first:.1f} s -> {second:.1f} s"
                       + ("" if self.holds else f" (bound {BOUND_S:.0f} s, growth allowed {allowed:.1f} s)"))

    def delays(self) -> list[float]:
        return sorted(self.probes_seen[p] - self.probes_sent[p] for p in self.probes_seen if p in self.probes_sent)



class Bench:
    def __init__(self, tmp: Path, args: argparse.Namespace) -> None:
        from broker_process import MosquittoBroker
        from cloud_harness import CloudProcess, wait_for, write_config

        self.tmp, self.args = tmp, args
        self.replay = Replay()
        self.broker = MosquittoBroker(tmp / "broker").start()
        config = write_config(tmp, self.broker, ingest={"roll_seconds": 2, "commit_interval_ms": 50},
                              spark={"master": "local[*]", "trigger_seconds": 2},
                              live_feed={"max_rows": 10_000})
        self.cloud = CloudProcess(["run", "--config", str(config), "--ingest-workers", str(args.ingest_workers)],
                                  tmp / "run.log")
        self.db = tmp / "cloud.db"
        self.landed = LandedCounter(tmp / "landing" / "events")
        self.step_no = 0
        wait_for(lambda: "query started" in self.cloud.log(), 300, "the Spark query to start", alive=self.cloud)
        wait_for(lambda: self.cloud.log().count("ingest connected") >= args.ingest_workers, 60,
                 "the ingest workers to connect", alive=self.cloud)

    def close(self) -> None:
        try:
            self.cloud.stop()
        finally:
            self.broker.stop()

    def aggregated(self) -> int:
        from cloud_harness import total_events
        return total_events(self.db)

    def seen_probes(self) -> set[str]:
        from cloud_harness import query
        pattern, variable = self.replay.probe_key or ("", "")
        return {v for (v,) in query(self.db, "SELECT value FROM binding_values WHERE pattern = ? AND variable = ? "
                                    "AND value >= ? AND value < ?",
                                    (pattern, variable, PROBE_PREFIX, PROBE_PREFIX[:-1] + "0"))}

    def watch_probes(self, step: Step, stop: threading.Event) -> None:
        """Note when each probe's row appears in SQLite (5 looks a second)."""
        known = self.seen_probes()
        while not stop.is_set():
            now = time.time()
            for probe in self.seen_probes() - known:
                step.probes_seen[probe] = now
                known.add(probe)
            stop.wait(0.2)

    def run_step(self, mode: str, gateways: int, duration: float) -> Step:
        self.step_no += 1
        step = Step(mode, gateways, gateways * self.replay.rate_per_gateway)
        publishers = min(self.args.publishers, gateways)
        t0 = time.time() + 2.0
        procs, reports = [], [dict() for _ in range(publishers)]
        lock = threading.Lock()
        for p in range(publishers):
            spec = {"host": self.broker.host, "port": self.broker.port, "first": 1 + gateways * p // publishers,
                    "last": 1 + gateways * (p + 1) // publishers, "mode": mode, "linger_s": self.args.linger,
                    "t0": t0, "duration_s": duration, "connections": self.args.connections,
                    "tag": f"s{self.step_no}p{p}"}
            proc = subprocess.Popen([sys.executable, __file__, "--publisher", json.dumps(spec)],
                                    stdout=subprocess.PIPE, text=True)
            procs.append(proc)

            def reader(proc: subprocess.Popen = proc, p: int = p) -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    item = json.loads(line)
                    with lock:
                        if "probe" in item:
                            step.probes_sent[item["probe"]] = item["emitted"]
                        else:
                            reports[p] = item
            threading.Thread(target=reader, daemon=True).start()
        agg0, landed0 = self.aggregated(), self.landed.count()
        stop_watch = threading.Event()
        watcher = threading.Thread(target=self.watch_probes, args=(step, stop_watch), daemon=True)
        watcher.start()
        while time.time() < t0:
            time.sleep(0.05)
        roles = dict(cloud_roles(self.cloud.proc.pid))
        cpu0 = {pid: proc_cpu_s(pid) for pid in roles}
        pub_cpu0 = {}
        broker_rchar0 = proc_rchar(self.broker.proc.pid) or 0
        for proc in procs:
            pub_cpu0[proc.pid] = proc_cpu_s(proc.pid) or 0.0
        own_cpu0, broker_cpu0 = proc_cpu_s(os.getpid()), proc_cpu_s(self.broker.proc.pid)
        started = time.monotonic()
        wall0 = time.time()
        while time.monotonic() - started < duration + 0.5:
            time.sleep(1.0)
            with lock:
                acked = sum(r.get("events_acked", 0) for r in reports)
                scheduled = sum(r.get("scheduled", 0) for r in reports)
                step.behind_s = max([step.behind_s] + [r.get("behind_s", 0.0) for r in reports])
            now = time.time()
            step.samples.append((now, scheduled, acked, self.landed.count() - landed0, self.aggregated() - agg0))
            for pid, role in cloud_roles(self.cloud.proc.pid).items():
                roles.setdefault(pid, role)
                rss = proc_rss_mb(pid)
                if rss is not None:
                    step.rss[role] = max(step.rss.get(role, 0.0), rss)
            for name, pid in (("mosquitto", self.broker.proc.pid), ("bench (sampler)", os.getpid())):
                step.rss[name] = max(step.rss.get(name, 0.0), proc_rss_mb(pid) or 0.0)
            step.rss["publishers"] = max([step.rss.get("publishers", 0.0)]
                                               + [proc_rss_mb(p.pid) or 0.0 for p in procs])
            if step.backlog_s()[-1][1] > ABORT_S:
                step.aborted = True
                break
        wall = time.time() - wall0
        # CPU over the publishing window, as % of one core.
        for pid, role in roles.items():
            now_cpu = proc_cpu_s(pid)
            if now_cpu is not None:
                step.cpu[role] = step.cpu.get(role, 0.0) + (now_cpu - (cpu0.get(pid) or 0.0)) / wall * 100
        step.cpu["mosquitto"] = ((proc_cpu_s(self.broker.proc.pid) or 0) - (broker_cpu0 or 0)) / wall * 100
        step.cpu["publishers"] = sum(((proc_cpu_s(p.pid) or pub_cpu0[p.pid]) - pub_cpu0[p.pid])
                                           for p in procs) / wall * 100
        step.cpu["bench (sampler)"] = ((proc_cpu_s(os.getpid()) or 0) - (own_cpu0 or 0)) / wall * 100
        step.broker_rchar = (proc_rchar(self.broker.proc.pid) or 0) - broker_rchar0
        if step.aborted:
            for proc in procs:
                proc.terminate()
        for proc in procs:
            proc.wait(timeout=180)
        time.sleep(0.3)
        with lock:
            step.packet_bytes = sum(r.get("packet_bytes", 0) for r in reports)
            step.events_sent = sum(r.get("events_sent", 0) for r in reports)
            published = sum(r.get("events_acked", 0) for r in reports)
        step.judge(duration)
        # Drain: everything published counted, and the probes still on their way seen.
        drain0 = time.monotonic()
        while time.monotonic() - drain0 < self.args.drain_timeout:
            if self.aggregated() - agg0 >= published:
                step.drain_s = time.monotonic() - drain0
                break
            time.sleep(0.25)
        time.sleep(0.5)
        stop_watch.set()
        watcher.join()
        return step


def print_step(step: Step, bench: Bench) -> None:
    if bench.args.quick:       # too short to judge: the backlog's figures only
        step.reason = step.reason.split(" (bound")[0]
    verdict = ("HOLDS" if step.holds else "does not hold") if not bench.args.quick else "not judged"
    delays = step.delays()
    pct = (f"p50 {statistics.median(delays):.1f} s, p95 {delays[int(0.95 * (len(delays) - 1))]:.1f} s "
           f"({len(delays)} probes)") if delays else "no probe counted"
    landed_lag = max((acked - landed) for _, _, acked, landed, _ in step.samples) if step.samples else 0
    agg_lag = max((landed - agg) for _, _, _, landed, agg in step.samples) if step.samples else 0
    print(f"  {step.mode:6s} {step.gateways:5d} gateways, {step.offered:7,.0f} events/s offered, "
          f"{step.events_sent:7,} sent: {verdict} ({step.reason}); "
          f"delay to SQLite {pct}; max lag published->landed {landed_lag:,} events, landed->SQLite {agg_lag:,}; "
          f"drained in {step.drain_s:.1f} s" if step.drain_s is not None else
          f"  {step.mode:6s} {step.gateways:5d} gateways: {verdict} "
          f"({step.reason}); delay {pct}; not drained within {bench.args.drain_timeout:.0f} s", flush=True)


def ramp(bench: Bench, mode: str, start: int, duration: float, limit: int) -> tuple[int | None, list[Step]]:
    """Double the fleet until a step does not hold, then try once between; the largest fleet held."""
    steps: list[Step] = []
    held, failed, n = None, None, start
    while n <= limit:
        step = bench.run_step(mode, n, duration)
        steps.append(step)
        print_step(step, bench)
        if not step.holds:
            failed = n
            break
        held, n = n, n * 2
    if held is not None and failed is not None and failed > held * 1.3:
        between = int(round((held * failed) ** 0.5 / 10) * 10)
        step = bench.run_step(mode, between, duration)
        steps.append(step)
        print_step(step, bench)
        if step.holds:
            held = between
    return held, steps


def load_line() -> str:
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    with open("/proc/stat") as fh:
        cpu = fh.readline().split()
    return f"load average {' '.join(load)}, {os.cpu_count()} cores, steal ticks so far {cpu[8]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one fleet size per uplink form, 20 s steps, no search (about two minutes)")
    parser.add_argument("--ingest-workers", type=int, default=2)
    parser.add_argument("--publishers", type=int, default=3, help="publisher processes")
    parser.add_argument("--connections", type=int, default=4, help="MQTT connections per publisher")
    parser.add_argument("--linger", type=float, default=5.0, help="batch form: seconds a gateway gathers events")
    parser.add_argument("--start", type=int, default=500, help="gateways in the first step")
    parser.add_argument("--limit", type=int, default=16_000, help="largest fleet tried")
    parser.add_argument("--step-s", type=float, default=None, help="seconds each step publishes (40; quick 20)")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--publisher", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.publisher:
        return publisher_main(json.loads(args.publisher))
    duration = args.step_s or (20.0 if args.quick else 40.0)
    replay = Replay()
    print(f"replayed uplink: {len(replay.offsets)} demo events every {replay.period_ms / 1000:.1f} s per gateway "
          f"({replay.rate_per_gateway:.3f} events/s); {args.ingest_workers} ingest workers, {args.publishers} "
          f"publisher processes x {args.connections} connections; {load_line()}", flush=True)
    results: dict[str, tuple[int | None, list[Step]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmpdir:
        started = time.monotonic()
        bench = Bench(Path(tmpdir), args)
        print(f"cloud up in {time.monotonic() - started:.0f} s", flush=True)
        try:
            warm = bench.run_step("single", args.start, min(duration, 20.0))
            print(f"  warm-up, not judged: {warm.mode} {warm.gateways} gateways for {min(duration, 20.0):.0f} s, "
                  f"drained in {warm.drain_s if warm.drain_s is not None else float('nan'):.1f} s", flush=True)
            if args.quick:
                for mode in ("single", "batch"):
                    step = bench.run_step(mode, args.start, duration)
                    print_step(step, bench)
                    results[mode] = (args.start if step.holds else None, [step])
            else:
                results["single"] = ramp(bench, "single", args.start, duration, args.limit)
                first = results["single"][0] or args.start
                results["batch"] = ramp(bench, "batch", first, duration, args.limit)
        finally:
            bench.close()
    print(f"\n{load_line()}")
    print("\nper step: CPU (% of one core over the step) and peak RSS (MB) per process "
          "(publishers: CPU of all, RSS of the largest)")
    for mode, (_, steps) in results.items():
        for step in steps:
            parts = [f"{role} {step.cpu.get(role, 0):.0f}%/{step.rss.get(role, 0):.0f}MB"
                     for role in sorted(set(step.cpu) | set(step.rss))
                     if role != "other children" or step.cpu.get(role, 0) >= 1]
            print(f"  {mode} {step.gateways}: " + ", ".join(parts))
    print("\nbytes per event on the wire (MQTT PUBLISH packets sent / broker's socket reads):")
    per = {}
    for mode, (_, steps) in results.items():
        step = steps[0]
        per[mode] = step.packet_bytes / max(1, step.events_sent)
        print(f"  {mode:6s}: {per[mode]:,.1f} B/event sent, {step.broker_rchar / max(1, step.events_sent):,.1f} "
              f"B/event read by the broker ({step.events_sent:,} events, {step.gateways} gateways)")
    if "single" in per and "batch" in per:
        print(f"  batch ({args.linger:.0f} s linger) is {per['single'] / per['batch']:.1f}x smaller than single")
    print()
    for mode, (held, steps) in results.items():
        last = [s for s in steps if s.holds]
        best = max(last, key=lambda s: s.gateways) if last else None
        if args.quick:
            d = steps[0].delays()
            print(f"{mode}: {args.start} gateways, every event counted: {steps[0].drain_s is not None}; delay to SQLite "
                  + (f"p50 {statistics.median(d):.1f} s, p95 {d[int(0.95 * (len(d) - 1))]:.1f} s" if d else "n/a")
                  + " (no search in --quick)")
            continue
        else:
            print(f"{mode}: largest fleet held {held or 'none'} gateways at the demo's rate")
        if best is not None:
            d = best.delays()
            print(f"  {best.offered:,.0f} events/s held; delay to SQLite "
                  + (f"p50 {statistics.median(d):.1f} s, p95 {d[int(0.95 * (len(d) - 1))]:.1f} s" if d else "n/a"))
    held = {m: r[0] for m, r in results.items()}
    undrained = [f"{s.mode} {s.gateways}" for _, steps in results.values() for s in steps if s.drain_s is None]
    if undrained:
        print(f"not every published event was counted within {args.drain_timeout:.0f} s after: {', '.join(undrained)}")
    if args.quick:
        return 1 if undrained else 0
    if held.get("single") and held.get("batch"):
        print(f"batch / single largest fleet: {held['batch'] / held['single']:.2f}x")
    return 0 if all(h for h in held.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
