"""Soak: a fleet of real gateways for an hour under faults; nothing lost or duplicated, memory flat.

Not a speed figure and far too long for ``make bench``: run it by hand (docs/benchmarks.md, *Soak*).

    python tests/benchmarks/soak.py [--minutes 60] [--gateways 20] [--sensors 50] [--seed N] [--keep]

Every gateway is real: its own Mosquitto broker, the real ``edgewave-agent run`` with the shipped
settings and a config document made for its own site (``edgewave-sim static`` +
``edgewave-cloud make-config``, every shipped pattern and significance rule). The sensors are the
simulator's (``edgewave-sim record --gateways N`` over a scenario generated here with a fire in
every gateway about every ten minutes), published at their recorded pace, QoS 1, each message
once its PUBACK is in (``tests/fault_rig.py``'s Sensors). The cloud side is one Mosquitto saving
its state every 5 s as shipped and ``edgewave-cloud ingest`` worker(s), both inside a network
namespace of the soak's own, reached by the agents over a veth pair: the partition drops every
packet on that link with nftables inside the namespace (silently: no RST, no ICMP), so nothing
else on the machine sees it. The Spark job is not run: it reads the landing zone, whose content
is what is checked here, and its exactly-once is covered by tests/integration/test_cloud_*.py.

Four faults at seeded random moments, one in each quarter of the middle of the run (printed at
the start): an agent SIGKILLed (a random gateway's) and started again, an ingest worker SIGKILLed
and started again, the cloud broker stopped (SIGTERM or SIGKILL) and started again with its
persistence, and a network partition between the gateways and the cloud (90 s in an hour's run).

Checks, as tests/fault_rig.py's Outcome does them, per gateway:

- every event the agent stored (its outbox's AUTOINCREMENT counter) is in the landing zone, and
  no event id the agent did not make: distinct event ids landed == events made;
- the matches landed, deduplicated by event id as the Spark job counts them, are the simulator's
  ground truth, match by match (pattern and the bindings the truth names): none missing, none
  extra, none counted twice under two ids;
- the events in the killed agent's outbox at the kill all landed; nothing was quarantined; no
  traceback in any log.

Memory: the resident size of every process of the system (each agent, each gateway broker, the
cloud broker, each ingest worker) is sampled every 10 s; the mean over the first ten minutes
(a quarter of a shorter run) is compared with the mean over the last ten. A process fails when it
grew by more than ``RSS_GROWTH_PCT`` % AND more than ``RSS_GROWTH_MB`` MB (see there why both).
The faults fall between the two windows, so each window is steady state; a restarted process is
compared with the one it replaced (said so in the table).

Exit status 0 when every check holds, 1 otherwise. Needs root (network namespace, nftables).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from agent_harness import AgentProcess, wait_for
from broker_process import MosquittoBroker, find_mosquitto
from cloud_harness import CloudProcess, write_config
from edgewave.firmware_sim.recording import read_messages
from fault_rig import CLOUD_AUTOSAVE_S, Sensors, _events_made, _outbox_ids

REPO = HERE.parents[1]
PATTERNS = sorted((REPO / "configs" / "patterns").glob("*.rq"))
SCHEMA = REPO / "configs" / "schema" / "building.ttl"
SIGNIFICANCE = REPO / "configs" / "significance.ttl"
CLOUD_PORT = 1883                 # inside the namespace: nothing else listens there
SAMPLE_S = 10.0                   # resident-size sampling period
WINDOW_S = 600.0                  # memory windows compared: the first and the last ten minutes
# A process's memory "grew" when its last-window mean exceeds its first-window mean by more than
# both: 10 % alone would flag a 3 MB broker gaining a few hundred kB of queued messages, and 5 MB
# alone would miss nothing in a 50 MB agent that a 10 % rule would not also catch sooner than an
# hour of leaking ~100 kB a minute (over 1 kB per message a gateway takes at the default rate).
RSS_GROWTH_PCT = 10.0
RSS_GROWTH_MB = 5.0
FIRE_EVERY_S = 600.0              # a fire in each gateway about this often (at least one per gateway)
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)

# The agent as shipped (configs/agent.yaml) where tests/agent_harness.py picks faster test values.
SHIPPED_AGENT = {
    "reconnect": {"min_delay_s": 0.5, "max_delay_s": 30.0},
    "status": {"interval_s": 30, "local_interval_s": 2, "state_file_interval_s": 2},
    "significance": {"max_rate_per_s": 1.0, "max_silence_s": 300},
    "outbox": {"resend_after_s": 10},
}


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}Z] {text}", flush=True)


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


# -- the cloud's own network namespace ---------------------------------------------------------

class Netns:
    """A namespace of the soak's own, joined to this one by a veth pair with private addresses;
    the partition is an nftables drop inside it, so no rule touches the machine's own tables."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"ewsoak{pid}"
        self.host_if, self.ns_if = f"ews{pid % 100000}h", f"ews{pid % 100000}c"
        used = run(["ip", "-4", "-o", "addr"]).stdout + run(["ip", "-4", "route"]).stdout
        octet = next(o for o in [pid % 250 + 2] + list(range(2, 252)) if f"10.231.{o}." not in used)
        self.host_addr, self.cloud_addr = f"10.231.{octet}.1", f"10.231.{octet}.2"
        self.created = False
        self.partitioned = False

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def create(self) -> None:
        run(["ip", "netns", "add", self.name])
        self.created = True
        run(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if])
        run(["ip", "link", "set", self.ns_if, "netns", self.name])
        run(["ip", "addr", "add", f"{self.host_addr}/30", "dev", self.host_if])
        run(["ip", "link", "set", self.host_if, "up"])
        inside = self.exec_prefix()
        run(inside + ["ip", "addr", "add", f"{self.cloud_addr}/30", "dev", self.ns_if])
        run(inside + ["ip", "link", "set", self.ns_if, "up"])
        run(inside + ["ip", "link", "set", "lo", "up"])
        run(inside + ["nft", "-f", "-"], input="table inet ewsoak {\n"
            "  chain input { type filter hook input priority 0; policy accept; }\n"
            "  chain output { type filter hook output priority 0; policy accept; }\n}\n")

    def partition(self, on: bool) -> None:
        """Drop every packet between the gateways and the cloud (``on``), or let them through."""
        inside = self.exec_prefix()
        if on:
            run(inside + ["nft", "add", "rule", "inet", "ewsoak", "input", "iifname", self.ns_if, "drop"])
            run(inside + ["nft", "add", "rule", "inet", "ewsoak", "output", "oifname", self.ns_if, "drop"])
        else:
            run(inside + ["nft", "flush", "chain", "inet", "ewsoak", "input"])
            run(inside + ["nft", "flush", "chain", "inet", "ewsoak", "output"])
        self.partitioned = on

    def close(self) -> None:
        """Remove the namespace (its rules and the veth pair go with it); the caller has stopped
        the processes it started inside."""
        if not self.created:
            return
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
        self.created = False


class NetnsBroker(MosquittoBroker):
    """The cloud broker, listening inside the namespace; reached from here at ``cloud_addr``."""

    def __init__(self, workdir: Path, netns: Netns) -> None:
        super().__init__(workdir, port=CLOUD_PORT, autosave_interval_s=CLOUD_AUTOSAVE_S)
        self.netns = netns
        self.config_path.write_text(self.config_path.read_text().replace(
            f"listener {CLOUD_PORT} 127.0.0.1", f"listener {CLOUD_PORT}"))   # veth and the namespace's loopback
        self.host = netns.cloud_addr

    def start(self, timeout: float = 30.0) -> NetnsBroker:
        if self.running:
            return self
        self.proc = subprocess.Popen(self.netns.exec_prefix() + [find_mosquitto(), "-c", str(self.config_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        import socket
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cloud mosquitto exited with {self.proc.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"cloud mosquitto did not accept connections on {self.url} within {timeout}s")


class NetnsCloudProcess(CloudProcess):
    """``edgewave-cloud <args>`` inside the namespace, in its own process group."""

    def __init__(self, netns: Netns, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed by CloudProcess
        self.proc = subprocess.Popen(netns.exec_prefix() + [sys.executable, "-m", "edgewave.cloud.cli", *args],
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ))


@dataclass(frozen=True)
class _Loopback:
    """What write_config needs of a broker: ingest reaches the cloud broker on the namespace's loopback."""
    host: str = "127.0.0.1"
    port: int = CLOUD_PORT


# -- the workload ------------------------------------------------------------------------------

TruthKey = tuple[str, frozenset]          # (pattern, the bindings the truth names)


@dataclass
class Workload:
    gateways: list[str]
    sensors_per_gateway: int
    recordings: dict[str, Path]           # gateway -> its messages (recorded format)
    messages: Counter                     # gateway -> messages
    duration_s: float
    origin_ms: int                        # sim time of the run's second 0
    truth: dict[str, Counter]             # gateway -> TruthKey -> matches
    truth_vars: dict[str, set[str]]       # pattern -> the variables the truth names
    configs: dict[str, Path]              # gateway -> its config document


def make_workload(work: Path, gateways: int, sensors: int, minutes: float, seed: int) -> Workload:
    """Scenario with fires, the simulator's recording and ground truth, per-gateway config documents."""
    work.mkdir(parents=True, exist_ok=True)
    sim = yaml.safe_load((REPO / "configs" / "sim.yaml").read_text())
    rooms = max(2, round((sensors - 8) / 6))          # 6 sensors a room + 3 wearables of rut, 2 of olle, 3 trackers
    sim["site"]["rooms"] = rooms
    sim["site"]["acme_rooms"] = [r for r in sim["site"]["acme_rooms"] if r <= rooms]
    sim["seed"] = seed
    sim_path = work / "sim.yaml"
    sim_path.write_text(yaml.safe_dump(sim))
    duration_s = minutes * 60
    rng = random.Random(seed)
    events = []
    for g in range(1, gateways + 1):
        # One fire about every FIRE_EVERY_S, at a random phase; rooms rotate (the ACME ones need entailment).
        t, k = rng.uniform(20.0, min(FIRE_EVERY_S, duration_s - 60.0) / 2), 0
        while t < duration_s - 60.0:
            smoke = [0, 20] if k % 2 == 0 else [0]
            temps = [[8, 63.5], [28, 71.0]] if k % 2 == 0 else [[5, 60.2]]
            events.append({"kind": "fire", "gateway": f"gw{g}", "at": round(t, 1),
                           "room": f"room{(g + k) % rooms + 1}", "smoke": smoke, "temperature": temps})
            k += 1
            t += FIRE_EVERY_S * rng.uniform(0.85, 1.15)
    scenario = work / "soak-scenario.yaml"
    scenario.write_text(yaml.safe_dump({"name": "soak", "description": "fires in every gateway",
                                        "duration_s": duration_s, "events": events}))
    sim_cli = [sys.executable, "-m", "edgewave.firmware_sim.cli"]
    run(sim_cli + ["record", "--config", str(sim_path), "--gateways", str(gateways), "--scenario", str(scenario),
                   "--out", str(work / "all.rec"), "--truth", str(work / "truth.jsonl")], cwd=REPO)
    names = [f"gw{g}" for g in range(1, gateways + 1)]
    recordings = {gw: work / f"{gw}.rec" for gw in names}
    messages: Counter = Counter()
    origin_ms = None
    outs = {gw: open(path, "w") for gw, path in recordings.items()}  # noqa: SIM115 - closed below
    try:
        current = None
        with open(work / "all.rec") as fh:
            for line in fh:
                if line.startswith("# ew:message "):
                    current = outs[line.split(" gateway=", 1)[1].split()[0]]
                    messages[line.split(" gateway=", 1)[1].split()[0]] += 1
                elif origin_ms is None and line[:1].isdigit():
                    origin_ms = int(line.split("\t", 1)[0])
                if current is not None:
                    current.write(line)
    finally:
        for out in outs.values():
            out.close()
    (work / "all.rec").unlink()
    truth: dict[str, Counter] = defaultdict(Counter)
    truth_vars: dict[str, set[str]] = defaultdict(set)
    for line in (work / "truth.jsonl").read_text().splitlines():
        item = json.loads(line)
        truth_vars[item["pattern"]] |= set(item["bindings"])
        truth[item["gateway"]][(item["pattern"], frozenset(item["bindings"].items()))] += 1
    configs = {gw: work / f"{gw}.trig" for gw in names}

    def config_for(gw: str) -> None:
        static = work / f"{gw}.nt"
        run(sim_cli + ["static", "--config", str(sim_path), "--gateways", str(gateways), "--gateway", gw,
                       "--out", str(static)], cwd=REPO)
        run([sys.executable, "-m", "edgewave.cloud.cli", "make-config", "--schema", str(SCHEMA), "--static", str(static),
             *[a for p in PATTERNS for a in ("--query", str(p))], "--significance", str(SIGNIFICANCE),
             "--out", str(configs[gw])], cwd=REPO)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(config_for, names))
    return Workload(names, rooms * 6 + 8, recordings, messages, duration_s, origin_ms or 0, dict(truth),
                    dict(truth_vars), configs)


def paced(path: Path, origin_ms: int, counter: Counter, gateway: str) -> Iterator[tuple[float, str, bytes]]:
    """A gateway's recording read lazily as (second of the run, topic, payload), counting what went out."""
    for m in read_messages(path):
        counter[gateway] += 1
        yield (m.ms - origin_ms) / 1000, m.topic, ("\n".join(m.lines) + "\n").encode()


# -- memory ------------------------------------------------------------------------------------

def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_MB
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class MemoryRow:
    role: str
    pids: list[int]
    first: float | None
    last: float | None
    peak: float
    judged: bool
    restarted: str
    trend: float | None = None        # MB an hour over the run's second half (least squares): still climbing?

    @property
    def growth_mb(self) -> float:
        return (self.last or 0.0) - (self.first or 0.0)

    @property
    def growth_pct(self) -> float:
        return 100.0 * self.growth_mb / self.first if self.first else 0.0

    @property
    def grew(self) -> bool:
        return self.judged and self.growth_mb > RSS_GROWTH_MB and self.growth_pct > RSS_GROWTH_PCT


class MemorySampler:
    """Resident size of every process by role (a role keeps its name across a restart)."""

    def __init__(self, roles: Callable[[], dict[str, int | None]], t0: Callable[[], float]) -> None:
        self.roles = roles
        self.t0 = t0
        self.samples: dict[str, list[tuple[float, int, float]]] = defaultdict(list)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_S)

    def sample(self) -> None:
        now = time.monotonic() - self.t0()
        for role, pid in self.roles().items():
            value = rss_mb(pid)
            if value is not None and pid is not None:
                self.samples[role].append((now, pid, value))

    def latest(self) -> dict[str, float]:
        return {role: rows[-1][2] for role, rows in self.samples.items() if rows}

    def table(self, duration_s: float, window_s: float, restarts: dict[str, str]) -> list[MemoryRow]:
        rows = []
        for role, samples in sorted(self.samples.items(), key=lambda kv: _role_order(kv[0])):
            first = [v for t, _, v in samples if 0 <= t < window_s]
            last = [v for t, _, v in samples if duration_s - window_s <= t <= duration_s]
            pids = list(dict.fromkeys(p for _, p, _ in samples))
            half = [(t, v) for t, p, v in samples if duration_s / 2 <= t <= duration_s and p == pids[-1]]
            trend = None
            if len(half) >= 3 and len({t for t, _ in half}) > 1:
                trend = statistics.linear_regression([t for t, _ in half], [v for _, v in half]).slope * 3600
            rows.append(MemoryRow(role, pids, statistics.fmean(first) if first else None,
                                  statistics.fmean(last) if last else None, max(v for _, _, v in samples),
                                  not role.startswith("soak driver"), restarts.get(role, ""), trend))
        return rows

    def write_csv(self, path: Path) -> None:
        """Every sample (second of the run, role, pid, MB), for a closer look at a curve."""
        with open(path, "w") as out:
            out.write("t_s,role,pid,rss_mb\n")
            for role, samples in sorted(self.samples.items()):
                out.writelines(f"{t:.1f},{role},{pid},{v:.2f}\n" for t, pid, v in samples)


def _role_order(role: str) -> tuple[int, int, str]:
    kinds = ("agent", "gateway broker", "cloud broker", "ingest", "soak driver")
    kind = next((i for i, k in enumerate(kinds) if role.startswith(k)), len(kinds))
    digits = "".join(c for c in role if c.isdigit())
    return kind, int(digits) if digits else 0, role


# -- the run -----------------------------------------------------------------------------------

@dataclass
class Fault:
    """One scheduled fault: what, when (second of the run), on what, and for how long."""

    name: str
    at_s: float
    target: str = ""              # the gateway, the ingest worker, or how the broker stops
    down_s: float = 0.0

    @property
    def detail(self) -> str:
        if self.name == "agent SIGKILL":
            return f"{self.target}'s agent, started again {self.down_s:.1f} s later"
        if self.name == "ingest SIGKILL":
            return f"worker {self.target}, started again {self.down_s:.1f} s later"
        if self.name == "cloud broker restart":
            return f"{self.target}, started again {self.down_s:.1f} s later"
        return f"{self.down_s:.0f} s, every packet dropped both ways"


class Soak:
    """Brokers, agents, ingest and sensors of one soak, with the faults to inject."""

    def __init__(self, work: Path, workload: Workload, args: argparse.Namespace) -> None:
        self.work, self.w, self.args = work, workload, args
        self.netns = Netns()
        self.local: dict[str, MosquittoBroker] = {}
        self.agents: dict[str, AgentProcess] = {}
        self.sensors: dict[str, Sensors] = {}
        self.sent: Counter = Counter()
        self.ingest: dict[int, CloudProcess] = {}
        self.cloud: NetnsBroker | None = None
        self.cloud_config: Path | None = None
        self.t0 = 0.0
        self.restarts: dict[str, str] = {}
        self.faults_done: list[str] = []
        self.problems: list[str] = []
        self.pending_at_kill: dict[str, set[str]] = {}
        self.unexpected: list[str] = []
        self.expected_down: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.landed_ids: set[str] = set()
        self.landed_seen: set[str] = set()
        self.sampler = MemorySampler(self.roles, lambda: self.t0)

    def now_s(self) -> float:
        return time.monotonic() - self.t0

    def roles(self) -> dict[str, int | None]:
        def pid(p: subprocess.Popen | None) -> int | None:
            return p.pid if p is not None and p.poll() is None else None
        out: dict[str, int | None] = {}
        for gw in self.w.gateways:
            if gw in self.agents:
                out[f"agent {gw}"] = pid(self.agents[gw].proc)
            if gw in self.local:
                out[f"gateway broker {gw}"] = pid(self.local[gw].proc)
        if self.cloud is not None:
            out["cloud broker"] = pid(self.cloud.proc)
        for worker, proc in list(self.ingest.items()):
            out[f"ingest worker {worker}"] = pid(proc.proc)
        out["soak driver (sensors)"] = os.getpid()
        return out

    # -- parts ---------------------------------------------------------------------------------
    def start_ingest(self, worker: int) -> None:
        assert self.cloud_config is not None
        self.ingest[worker] = NetnsCloudProcess(self.netns, ["ingest", "--config", str(self.cloud_config),
                                                             "--worker", str(worker)],
                                                self.work / f"ingest-{worker}.log")

    def wait_ingest(self, worker: int, connections: int) -> None:
        proc = self.ingest[worker]
        wait_for(lambda: proc.log().count("ingest connected") >= connections or not proc.running, 60,
                 f"ingest worker {worker} connected")
        if not proc.running:
            raise RuntimeError(f"ingest worker {worker} exited:\n{proc.log()[-3000:]}")

    def start(self) -> None:
        self.netns.create()
        log(f"network namespace {self.netns.name}: cloud broker at {self.netns.cloud_addr}:{CLOUD_PORT} "
            f"over veth {self.netns.host_if}/{self.netns.ns_if}")
        self.cloud = NetnsBroker(self.work / "cloud", self.netns)
        self.cloud.start()
        self.cloud_config = write_config(self.work, _Loopback(), ingest={"workers": self.args.ingest_workers,
                                                                          "roll_seconds": 5, "commit_interval_ms": 50})
        for worker in range(self.args.ingest_workers):
            self.start_ingest(worker)
        for worker in range(self.args.ingest_workers):
            self.wait_ingest(worker, 1)
        for gw in self.w.gateways:
            self.local[gw] = MosquittoBroker(self.work / gw / "broker").start()
        for gw in self.w.gateways:
            overrides = {section: dict(values) for section, values in SHIPPED_AGENT.items()}
            overrides["gateway"] = gw  # type: ignore[assignment]
            overrides["config"] = {"bootstrap": str(self.w.configs[gw])}
            self.agents[gw] = AgentProcess(self.work / gw / "agent", self.local[gw], self.cloud, overrides)
            self.agents[gw].start()
        log(f"{len(self.agents)} agents subscribed; sensors start")
        self.t0 = time.monotonic()
        for gw in self.w.gateways:
            self.sensors[gw] = Sensors(self.local[gw], paced(self.w.recordings[gw], self.w.origin_ms, self.sent, gw),
                                       client_id=f"soak-sensors-{gw}")
        self.sampler.thread.start()

    # -- faults --------------------------------------------------------------------------------
    def schedule(self, rng: random.Random) -> list[Fault]:
        """One fault in each quarter of the middle of the run (between the memory windows), order shuffled."""
        d, window = self.w.duration_s, self.window_s()
        start, end = min(window + 30.0, 0.2 * d), max(d - window - 30.0, 0.8 * d)
        slot = (end - start) / 4
        self.partition_s = min(90.0, slot / 2)
        names = ["agent SIGKILL", "ingest SIGKILL", "cloud broker restart", "network partition"]
        rng.shuffle(names)
        faults = []
        for i, name in enumerate(names):
            length = self.partition_s if name == "network partition" else 10.0
            at = start + i * slot + rng.uniform(0, max(1.0, slot - length - 20.0))
            if name == "agent SIGKILL":
                fault = Fault(name, at, rng.choice(self.w.gateways), rng.uniform(1, 5))
            elif name == "ingest SIGKILL":
                fault = Fault(name, at, str(rng.randrange(self.args.ingest_workers)), rng.uniform(1, 5))
            elif name == "cloud broker restart":
                fault = Fault(name, at, rng.choice(["SIGTERM", "SIGKILL"]), rng.uniform(2, 8))
            else:
                fault = Fault(name, at, "", self.partition_s)
            faults.append(fault)
        return faults

    @contextlib.contextmanager
    def down(self, role: str) -> Iterator[None]:
        """``role`` is away on purpose: the watcher must not take it for a crash."""
        with self.lock:
            self.expected_down.add(role)
        try:
            yield
        finally:
            with self.lock:
                self.expected_down.discard(role)

    def window_s(self) -> float:
        return min(WINDOW_S, self.w.duration_s / 4)

    def inject(self, fault: Fault) -> None:
        down = fault.down_s
        at = self.now_s()
        if fault.name == "agent SIGKILL":
            gw = fault.target
            agent = self.agents[gw]
            outbox = agent.state().get("outbox") or {}
            with self.down(f"agent {gw}"):
                agent.kill()
                pending = _outbox_ids(agent.data_dir / "outbox.db")
                self.pending_at_kill[gw] = pending
                time.sleep(down)
                agent.start()
            self.restarts[f"agent {gw}"] = f"SIGKILL at {at / 60:.1f} min"
            note = (f"agent {gw} SIGKILLed at {at:.1f} s ({at / 60:.1f} min) with {len(pending)} events in its outbox "
                    f"(status before: depth {outbox.get('depth')}, unlanded {outbox.get('unlanded')}), "
                    f"running again at {self.now_s():.1f} s")
        elif fault.name == "ingest SIGKILL":
            worker = int(fault.target)
            with self.down(f"ingest worker {worker}"):
                self.ingest[worker].kill9()
                time.sleep(down)
                self.start_ingest(worker)
            self.wait_ingest(worker, 1)
            self.restarts[f"ingest worker {worker}"] = f"SIGKILL at {at / 60:.1f} min"
            note = f"ingest worker {worker} SIGKILLed at {at:.1f} s ({at / 60:.1f} min), connected again at {self.now_s():.1f} s"
        elif fault.name == "cloud broker restart":
            assert self.cloud is not None
            how = fault.target
            with self.down("cloud broker"):
                self.cloud.stop() if how == "SIGTERM" else self.cloud.kill()
                time.sleep(down)
                self.cloud.start()
            self.restarts["cloud broker"] = f"{how} at {at / 60:.1f} min"
            note = f"cloud broker {how} at {at:.1f} s ({at / 60:.1f} min), accepting again at {self.now_s():.1f} s"
        else:
            logs = {gw: len(agent.log()) for gw, agent in self.agents.items()}
            self.netns.partition(True)
            try:
                time.sleep(self.partition_s)
                backlog = sum((a.state().get("outbox") or {}).get("depth", 0) or 0 for a in self.agents.values())
            finally:
                self.netns.partition(False)
            # What the gateways made of it: their cloud link timed out (keepalive) or only stalled.
            dropped = sum("link=cloud event=disconnected" in agent.log()[logs[gw]:] for gw, agent in self.agents.items())
            note = (f"network partition {at:.1f}-{self.now_s():.1f} s ({at / 60:.1f} min, {self.now_s() - at:.0f} s): "
                    f"{backlog:,} events waiting in the outboxes at its end; {dropped} of {len(self.agents)} agents "
                    f"saw their cloud link drop during it")
        log("FAULT " + note)
        with self.lock:
            self.faults_done.append(note)

    def run_faults(self, faults: list[Fault]) -> None:
        for fault in sorted(faults, key=lambda f: f.at_s):
            while self.now_s() < fault.at_s:
                if self.stopping.wait(min(1.0, fault.at_s - self.now_s())):
                    return
            try:
                self.inject(fault)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is a finding too
                with self.lock:
                    self.problems.append(f"fault {fault.name} failed: {exc!r}")
                log(f"FAULT {fault.name} FAILED: {exc!r}")

    # -- watching ------------------------------------------------------------------------------
    def made(self) -> dict[str, int]:
        out = {}
        for gw, agent in self.agents.items():
            try:
                out[gw] = _events_made(agent.data_dir / "outbox.db")
            except sqlite3.Error:
                out[gw] = 0
        return out

    def count_landed(self) -> int:
        """Distinct event ids in closed landing files (each read once)."""
        for path in sorted((self.work / "landing" / "events").glob("date=*/*.jsonl")):
            if path.name in self.landed_seen:
                continue
            self.landed_seen.add(path.name)
            for line in path.read_text().splitlines():
                if line.strip():
                    try:
                        self.landed_ids.add(json.loads(line)["id"])
                    except (ValueError, KeyError):
                        pass
        return len(self.landed_ids)

    def check_alive(self) -> None:
        """A process that died without being killed is a finding; it is started again so the run goes on."""
        if self.stopping.is_set():
            return
        parts: list[tuple[str, Callable[[], subprocess.Popen | None], Callable[[], object]]] = []
        for gw, agent in self.agents.items():
            parts.append((f"agent {gw}", lambda agent=agent: agent.proc, agent.start))
            broker = self.local[gw]
            parts.append((f"gateway broker {gw}", lambda broker=broker: broker.proc, broker.start))
        for worker in list(self.ingest):
            parts.append((f"ingest worker {worker}", lambda worker=worker: self.ingest[worker].proc,
                          lambda worker=worker: self.start_ingest(worker)))
        if self.cloud is not None:
            cloud = self.cloud
            parts.append(("cloud broker", lambda: cloud.proc, cloud.start))
        for role, current, restart in parts:
            with self.lock:
                proc = current()
                if role in self.expected_down or proc is None or proc.poll() is None:
                    continue
            note = f"{role} exited by itself ({proc.returncode}) at {self.now_s():.0f} s"
            self.unexpected.append(note)
            log("UNEXPECTED " + note + "; started again")
            restart()

    def progress(self) -> None:
        made = self.made()
        landed = self.count_landed()
        pending = sum((a.state().get("outbox") or {}).get("depth", 0) or 0 for a in self.agents.values())
        rss = self.sampler.latest()
        agents = [v for r, v in rss.items() if r.startswith("agent")]
        brokers = [v for r, v in rss.items() if r.startswith("gateway broker")]
        ingest = [v for r, v in rss.items() if r.startswith("ingest")]
        load = Path("/proc/loadavg").read_text().split()[:3]
        log(f"t={self.now_s() / 60:5.1f} min: sensor messages {sum(self.sent.values()):,}/{sum(self.w.messages.values()):,}, "
            f"events made {sum(made.values()):,}, landed {landed:,} (closed files), in outboxes {pending:,}; "
            f"RSS MB agents {min(agents, default=0):.0f}-{max(agents, default=0):.0f} (sum {sum(agents):.0f}), "
            f"gateway brokers {min(brokers, default=0):.1f}-{max(brokers, default=0):.1f}, "
            f"cloud broker {rss.get('cloud broker', 0):.1f}, ingest {'/'.join(f'{v:.0f}' for v in ingest)}, "
            f"driver {rss.get('soak driver (sensors)', 0):.0f}; load {' '.join(load)}")

    def watch(self) -> None:
        """Until every gateway's sensors have sent their recording: a progress line a minute."""
        next_line = 60.0
        while not all(s.done.is_set() for s in self.sensors.values()):
            time.sleep(1.0)
            self.check_alive()
            if self.now_s() >= next_line:
                self.progress()
                next_line += 60.0

    def drain(self, timeout_s: float) -> bool:
        """Every agent's outbox emptied by landed acknowledgements."""
        deadline = time.monotonic() + timeout_s
        next_line = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            depths = {gw: (a.state().get("outbox") or {}).get("depth") for gw, a in self.agents.items()}
            if all(d == 0 for d in depths.values()):
                return True
            if time.monotonic() >= next_line:
                self.progress()
                next_line += 60.0
            time.sleep(2.0)
        log(f"outboxes not empty after {timeout_s:.0f} s: "
            f"{ {gw: d for gw, d in depths.items() if d} }")
        return False

    def close(self) -> None:
        """Stop everything this soak started (also on Ctrl-C), then remove the namespace."""
        self.stopping.set()
        self.sampler.stop.set()
        for sensors in self.sensors.values():
            with contextlib.suppress(Exception):
                sensors.close()
        for agent in self.agents.values():
            agent.kill()
        for proc in self.ingest.values():
            if proc.running:
                proc.kill9()
        for broker in self.local.values():
            broker.kill()
        if self.cloud is not None:
            self.cloud.kill()
        if self.netns.partitioned:
            subprocess.run(self.netns.exec_prefix() + ["nft", "flush", "ruleset"], capture_output=True, check=False)
        self.netns.close()

    # -- the verdict ---------------------------------------------------------------------------
    def outcome(self) -> list[str]:
        problems = list(self.problems) + [f"unexpected: {u}" for u in self.unexpected]
        records: list[dict] = []
        bad_lines = 0
        for path in sorted((self.work / "landing" / "events").rglob("*")):
            if path.is_file():
                for line in path.read_text(errors="replace").splitlines():
                    if line.strip():
                        try:
                            records.append(json.loads(line))
                        except ValueError:
                            bad_lines += 1
        if bad_lines:
            problems.append(f"{bad_lines} unreadable lines in the landing zone")
        rejected = [p for p in (self.work / "landing" / "rejected").rglob("*") if p.is_file()]
        if rejected:
            problems.append(f"{len(rejected)} quarantined files in landing/rejected")
        unique = {r["id"]: r for r in records}
        by_gw: dict[str, list[dict]] = defaultdict(list)
        for r in unique.values():
            by_gw[r.get("gateway", "?")].append(r)
        made = {gw: _events_made(a.data_dir / "outbox.db") for gw, a in self.agents.items()}
        log("per gateway: sensor messages sent, events made, distinct landed, matches landed/truth")
        for gw in self.w.gateways:
            events = by_gw.get(gw, [])
            got: Counter = Counter()
            for r in events:
                if r["kind"] != "match":
                    continue
                bindings = {b["variable"]: b["value"] for b in r.get("bindings") or []}
                names = self.w.truth_vars.get(r["pattern"]) or set(bindings)
                got[(r["pattern"], frozenset((k, v) for k, v in bindings.items() if k in names))] += 1
            want = self.w.truth.get(gw, Counter())
            missing, extra = want - got, got - want
            print(f"  {gw:5s} {self.sent[gw]:7,} msgs  made {made[gw]:6,}  landed {len(events):6,}  "
                  f"matches {sum(got.values()):3d}/{sum(want.values()):3d}"
                  + ("" if not (missing or extra) else f"  MISSING {sum(missing.values())} EXTRA {sum(extra.values())}"))
            if len(events) != made[gw]:
                problems.append(f"{gw}: {len(events)} distinct events landed of {made[gw]} the agent made")
            if missing:
                problems.append(f"{gw}: {sum(missing.values())} ground-truth matches missing: "
                                f"{[dict(k[1]) for k in list(missing)[:3]]}")
            if extra:
                problems.append(f"{gw}: {sum(extra.values())} matches landed beyond the ground truth "
                                f"(extra or counted twice): {[dict(k[1]) for k in list(extra)[:3]]}")
            if self.sent[gw] != self.w.messages[gw]:
                problems.append(f"{gw}: sensors sent {self.sent[gw]} of {self.w.messages[gw]} messages")
        strays = set(by_gw) - set(self.w.gateways)
        if strays:
            problems.append(f"events landed from unknown gateways {sorted(strays)}")
        for gw, pending in self.pending_at_kill.items():
            lost = pending - set(unique)
            if lost:
                problems.append(f"{gw}: {len(lost)} of {len(pending)} events in the killed agent's outbox never landed")
        for gw, agent in self.agents.items():
            if "Traceback" in agent.log():
                problems.append(f"a traceback in agent {gw}'s log")
        for path in self.work.glob("ingest-*.log"):
            if "Traceback" in path.read_text(errors="replace"):
                problems.append(f"a traceback in {path.name}")
        total_made, total_truth = sum(made.values()), sum(sum(c.values()) for c in self.w.truth.values())
        matches = sum(r["kind"] == "match" for r in unique.values())
        log(f"events made {total_made:,}, landed {len(records):,} records, {len(unique):,} distinct "
            f"({len(records) - len(unique):,} duplicate records, dropped by event id as the Spark job does); "
            f"matches {matches}/{total_truth} of the ground truth; significant "
            f"{sum(r['kind'] == 'significant' for r in unique.values()):,}")
        self.duplicate_records = len(records) - len(unique)
        return problems


def print_memory(rows: list[MemoryRow], window_s: float) -> list[str]:
    w = window_s / 60
    print(f"\nresident memory (MB), mean of the first {w:.0f} min vs the last {w:.0f} min of the sensors' run, "
          f"sampled every {SAMPLE_S:.0f} s; growth fails above +{RSS_GROWTH_PCT:.0f} % and +{RSS_GROWTH_MB:.0f} MB:")
    print(f"  {'process':24s} {'first':>7s} {'last':>7s} {'change':>8s} {'%':>6s} {'peak':>7s} "
          f"{'MB/h 2nd half':>13s}  note")
    problems = []
    for r in rows:
        first = f"{r.first:7.1f}" if r.first is not None else "      -"
        last = f"{r.last:7.1f}" if r.last is not None else "      -"
        note = ", ".join(x for x in (("restarted: " + r.restarted) if r.restarted else "",
                                     "GREW" if r.grew else "", "" if r.judged else "not judged") if x)
        trend = f"{r.trend:+13.2f}" if r.trend is not None else f"{'-':>13s}"
        print(f"  {r.role:24s} {first} {last} {r.growth_mb:+8.1f} {r.growth_pct:+5.1f}% {r.peak:7.1f} {trend}  {note}")
        if r.grew:
            problems.append(f"{r.role}: resident memory {r.first:.1f} -> {r.last:.1f} MB ({r.growth_pct:+.1f} %)")
        if r.judged and (r.first is None or r.last is None):
            problems.append(f"{r.role}: no memory samples in one of the windows")
    print("\nsummary by kind (first-window mean -> last-window mean, MB):")
    for kind in ("agent", "gateway broker", "cloud broker", "ingest worker"):
        group = [r for r in rows if r.role.startswith(kind) and r.first is not None and r.last is not None]
        if not group:
            continue
        worst = max(group, key=lambda r: r.growth_mb)
        print(f"  {kind:15s} x{len(group):2d}: first {min(r.first for r in group):.1f}-{max(r.first for r in group):.1f}, "
              f"last {min(r.last for r in group):.1f}-{max(r.last for r in group):.1f}, "
              f"change {min(r.growth_mb for r in group):+.1f} to {worst.growth_mb:+.1f} "
              f"(largest: {worst.role}, {worst.growth_pct:+.1f} %); "
              f"sum {sum(r.first for r in group):.0f} -> {sum(r.last for r in group):.0f}"
              + (f"; second half {min(trends):+.2f} to {max(trends):+.2f} MB/h"
                 if (trends := [r.trend for r in group if r.trend is not None]) else ""))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="length of the sensors' run (default 60)")
    parser.add_argument("--gateways", type=int, default=20)
    parser.add_argument("--sensors", type=int, default=50, help="sensors per gateway (6 a room + 8; default 50)")
    parser.add_argument("--seed", type=int, default=None, help="fault moments and scenario (default: random, printed)")
    parser.add_argument("--ingest-workers", type=int, default=1)
    parser.add_argument("--drain-timeout", type=float, default=600.0, help="seconds to wait for the outboxes to empty")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, landing zone)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("soak.py needs root (a network namespace and nftables for the partition)", file=sys.stderr)
        return 2
    if args.minutes < 3:
        parser.error("--minutes must be at least 3")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**8)
    rng = random.Random(seed)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="ew-soak-")
    work = Path(tmp)
    log(f"soak: {args.gateways} gateways x {args.sensors} sensors, {args.minutes:g} min, seed {seed}, "
        f"{args.ingest_workers} ingest worker(s); work dir {work}; command: "
        f"{' '.join([Path(sys.executable).name, 'tests/benchmarks/soak.py'] + (argv if argv is not None else sys.argv[1:]))}")
    workload = make_workload(work / "workload", args.gateways, args.sensors, args.minutes, seed)
    total = sum(workload.messages.values())
    fires = sum(sum(c.values()) for c in workload.truth.values())
    log(f"workload: {workload.sensors_per_gateway} sensors a gateway at the firmware's own periods "
        f"(configs/sim.yaml): {total:,} messages, {total / workload.duration_s:.1f} msg/s in all, "
        f"{total / workload.duration_s / args.gateways:.2f} msg/s a gateway "
        f"({total / workload.duration_s / args.gateways / workload.sensors_per_gateway:.3f} a sensor); "
        f"ground truth {fires} matches, every gateway "
        f"{min(sum(c.values()) for c in workload.truth.values()) if workload.truth else 0}-"
        f"{max(sum(c.values()) for c in workload.truth.values()) if workload.truth else 0} "
        f"({len(workload.truth)} of {args.gateways} gateways with fires)")
    soak = Soak(work, workload, args)
    faults = soak.schedule(rng)
    for f in sorted(faults, key=lambda f: f.at_s):
        log(f"scheduled: {f.name} at {f.at_s:.0f} s ({f.at_s / 60:.1f} min): {f.detail}")

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    problems: list[str] = []
    rc = 1
    try:
        soak.start()
        faulter = threading.Thread(target=soak.run_faults, args=(faults,), daemon=True)
        faulter.start()
        soak.watch()
        soak.sampler.stop.set()
        log(f"sensors done at {soak.now_s():.0f} s; waiting for every outbox to empty")
        faulter.join(timeout=120)
        soak.progress()
        if not soak.drain(args.drain_timeout):
            problems.append("not every outbox emptied")
        soak.progress()
        soak.stopping.set()
        for proc in soak.ingest.values():
            if proc.stop() != 0:
                problems.append("an ingest worker did not stop cleanly")
        for gw, agent in soak.agents.items():
            if agent.stop() != 0:
                problems.append(f"agent {gw} did not stop cleanly")
        problems += soak.outcome()
        soak.sampler.write_csv(work / "rss.csv")
        rows = soak.sampler.table(workload.duration_s, soak.window_s(), soak.restarts)
        problems += print_memory(rows, soak.window_s())
        print(f"\nfaults (seed {seed}):")
        for note in soak.faults_done:
            print(f"  {note}")
        missing_faults = 4 - len(soak.faults_done)
        if missing_faults:
            problems.append(f"{missing_faults} fault(s) not injected")
        rc = 1 if problems else 0
    except KeyboardInterrupt:
        log("interrupted: cleaning up")
        rc = 130
    finally:
        soak.close()
        if not args.keep and rc == 0:
            shutil.rmtree(tmp, ignore_errors=True)
    if rc != 130:
        print()
        if problems:
            print("SOAK FAILED:")
            for p in problems:
                print(f"  - {p}")
        else:
            print(f"SOAK PASSED: nothing lost, nothing duplicated after dedup by event id, memory flat "
                  f"({(time.monotonic() - started) / 60:.0f} min in all)")
        if rc != 0 or args.keep:
            print(f"work directory kept: {tmp}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
