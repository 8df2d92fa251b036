"""The whole uplink path on real brokers, with faults injected while the demo's fires burn.

The demo scenario (configs/scenarios/demo.yaml, gw1's messages recorded by ``edgewave-sim
record``, with the simulator's ground truth of fires) is published at its real pace, QoS 1,
to a gateway broker; the real ``edgewave-agent run`` (the demo's config document as
bootstrap, significance on) forwards to a cloud broker saving its state every 5 s as the
shipped one does (shared/mosquitto_files.py); one or several real ``edgewave-cloud ingest``
workers land what it forwards. Faults are scheduled at scenario seconds: the cloud broker
stopped (SIGTERM) or killed (SIGKILL) and started again, an ingest worker killed, the agent
killed while its events are sent and not yet landed.

What the cloud holds is checked exactly (``Outcome.problems``):

- the matches in the landing zone, deduplicated by event id as the Spark job does, are the
  ground truth's, pattern by pattern and each by its key (``KEY_VARIABLE``: the room of a
  fire and of a silent sensor in alarm, the building of an intrusion), each once; but for
  a silence whose deadline fell while the rig had the agent down (what sensors publish
  meanwhile arrives after the restart, and absences are timed by arrival: docs/agent.md),
  which is the documented behaviour and is counted in the summary;
- every event the agent ever stored (its outbox's AUTOINCREMENT sequence: matches, significant
  observations and instance results) is in the landing zone: as many distinct event ids as
  events made, but for those still in the outbox when the agent stopped (durable, and sent at
  its next start: an instance the clock closed in the run's last seconds);
- each window instance of the per-minute CO2 query that closed landed once (one event id per
  instance; a run shorter than a minute may close none).

Used by tests/integration/test_end_to_end_faults.py and tests/benchmarks/fault_runs.py.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agent_harness import GATEWAY, AgentProcess, client, wait_for
from broker_process import MosquittoBroker
from cloud_harness import CloudProcess, write_config

from edgewave.firmware_sim.recording import read_messages

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "gateway-config.trig"
FIRES_S = ((15.0, 24.0), (35.0, 37.0))     # demo.yaml: first and last reading of each fire
CLOUD_AUTOSAVE_S = 5                        # as broker_conf_text writes it for the cloud broker
# The binding a pattern's matches are counted by (``room`` unless named here): a pattern's
# matches in the landing zone must be the truth's, key by key.
KEY_VARIABLE = {"intrusion": "building"}
# The config's absences (a sensor silent for 10 s). An absence is timed by arrival
# (docs/agent.md, "Durable windows"): what a sensor publishes while the agent is down arrives
# after the restart, so a deadline that falls inside the agent's outage fires though the
# sensor never went quiet. The truth is a perfect observer's; such a match is the documented
# behaviour, accepted only when its deadline lies inside an outage the rig caused.
ABSENCE_PATTERNS = frozenset({"silent-sensor-in-alarm"})
OUTAGE_SLACK_MS = 1000      # "back" is when the rig saw the agent subscribed; its backlog arrives just after

Message = tuple[float, str, bytes]          # seconds from the start, topic, payload


def key_variable(pattern: str) -> str:
    return KEY_VARIABLE.get(pattern, "room")


@dataclass(frozen=True)
class Recording:
    messages: list[Message]
    rows: tuple[tuple[str, str, float, float], ...]   # the truth: (pattern, key, start s, end s) per match

    @property
    def truth(self) -> Counter:
        """(pattern, key) -> matches, the key being the binding ``key_variable`` names."""
        return Counter((pattern, key) for pattern, key, _, _ in self.rows)

    def between(self, start_s: float, end_s: float) -> "Recording":
        """The messages of ``start_s``..``end_s``, from 0 s on, with the matches that lie inside
        (an absence's up to its deadline); a cut through a match is refused."""
        inside = []
        for pattern, key, first, last in self.rows:
            if start_s <= first and last < end_s:
                inside.append((pattern, key, first - start_s, last - start_s))
            elif first < end_s and start_s <= last:
                raise ValueError(f"{start_s}-{end_s} s cuts through a {pattern} match of {key} ({first}-{last} s)")
        return Recording([(at - start_s, topic, payload) for at, topic, payload in self.messages
                          if start_s <= at < end_s], tuple(inside))


def record_demo(work: Path, payload_format: str = "ntriples") -> Recording:
    """The demo scenario's messages for gw1 in ``payload_format`` (docs/sim.md), and its ground truth."""
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "edgewave.firmware_sim.cli", "record",
                    "--config", str(REPO / "configs/sim.yaml"), "--scenario", str(REPO / "configs/scenarios/demo.yaml"),
                    "--gateway", GATEWAY, "--format", payload_format,
                    "--out", str(work / "demo.rec"), "--truth", str(work / "truth.jsonl")],
                   check=True, capture_output=True, cwd=REPO)
    messages = list(read_messages(work / "demo.rec"))
    start = messages[0].ms
    rows = tuple((t["pattern"], t["bindings"][key_variable(t["pattern"])], (t["start"] - start) / 1000,
                  (t["end"] - start) / 1000)
                 for t in map(json.loads, (work / "truth.jsonl").read_text().splitlines()))
    return Recording([((m.ms - start) / 1000, m.topic, m.payload) for m in messages], rows)


class Sensors:
    """Publishes the recording at its pace, QoS 1, each message once its PUBACK is in; holds
    still while ``paused`` (the local broker being restarted) and goes on where it was."""

    def __init__(self, broker: MosquittoBroker, messages: list[Message], client_id: str = "rig-sensors") -> None:
        self.messages = messages
        self.client = client(broker, client_id)
        self.client.loop_start()
        wait_for(self.client.is_connected, 15, "the sensors connected")
        self.running = threading.Event()
        self.running.set()
        self.idle = threading.Event()       # set but while a message is being published
        self.idle.set()
        self.done = threading.Event()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for offset, topic, payload in self.messages:
            delay = self.started + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            while True:
                self.running.wait()
                self.idle.clear()
                if not self.running.is_set() or not self.client.is_connected():   # paused meanwhile, or away
                    self.idle.set()
                    time.sleep(0.05)
                    continue
                info = self.client.publish(topic, payload, qos=1)
                info.wait_for_publish(timeout=15)
                self.idle.set()
                if info.is_published():
                    break
        self.done.set()

    def pause(self) -> None:
        """Hold the sensors still: once this returns no message is being published, also when
        the pause comes between two messages or after the last one."""
        self.running.clear()
        wait_for(self.idle.is_set, 20, "the sensors between two messages")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@dataclass
class Outcome:
    """What the cloud landed, against the ground truth and the agent's own count."""

    truth: Counter
    matches: Counter                         # (pattern, key) -> distinct matches landed
    made: int                                # events the agent stored (matches and significant)
    distinct: int                            # distinct event ids landed
    landed: int                              # event records landed, duplicates included
    significant: int
    instances: Counter = field(default_factory=Counter)   # (query, start, end) -> distinct events landed
    faults: list[str] = field(default_factory=list)
    agent_log: str = ""
    pending_at_kill: set[str] = field(default_factory=set)
    landed_ids: set[str] = field(default_factory=set)
    resent: int = 0                          # times the agent sent its unlanded events again (last run)
    # (pattern, key) -> the landed matches' windows (epoch ms, start and end) and event ids
    match_windows: dict = field(default_factory=dict)
    outages: list[tuple[int, int]] = field(default_factory=list)   # the agent down, epoch ms: killed, back

    def outage_absences(self, key: tuple[str, str]) -> int:
        """How many of ``key``'s matches beyond the truth an agent outage explains: absences
        whose deadline (window end) fell while the rig had the agent down, at most the excess."""
        if key[0] not in ABSENCE_PATTERNS or self.matches[key] <= self.truth[key]:
            return 0
        inside = sum(any(down <= end <= back + OUTAGE_SLACK_MS for down, back in self.outages)
                     for _, end, _ in self.match_windows.get(key, []))
        return min(inside, self.matches[key] - self.truth[key])

    def problems(self) -> list[str]:
        found = []
        differing = sorted(key for key in self.matches.keys() | self.truth.keys()
                           if self.matches[key] - self.outage_absences(key) != self.truth[key])
        if differing:
            found.append("matches differ from the truth: " + "; ".join(
                f"{key}: {self.matches[key]} landed {sorted(self.match_windows.get(key, []))}, "
                f"{self.truth[key]} in the truth" for key in differing))
        if self.distinct != self.made:
            found.append(f"{self.distinct} distinct events landed of {self.made} the agent made")
        twice = [key for key, n in self.instances.items() if n > 1]
        if twice:
            found.append(f"window instances landed as several events: {twice}")
        if not self.pending_at_kill <= self.landed_ids:
            lost = self.pending_at_kill - self.landed_ids
            found.append(f"{len(lost)} events in the killed agent's outbox never landed")
        if "Traceback" in self.agent_log:
            found.append("a traceback in the agent's log")
        return found

    def summary(self) -> str:
        outage = sum(self.outage_absences(key) for key in self.matches)
        explained = f"{outage} absence(s) fell due while the agent was down; " if outage else ""
        return (f"matches {sum(self.matches.values())}/{sum(self.truth.values())}, events {self.distinct}/{self.made} "
                f"({self.significant} significant, {len(self.instances)} window instances), "
                f"{self.landed - self.distinct} duplicates dropped by event id, "
                f"{self.resent} re-send(s); {explained}"
                f"faults: {', '.join(self.faults) or 'none'}")


class Rig:
    """Brokers, ingest workers and the agent of one run, with the faults to inject."""

    def __init__(self, work: Path, recording: Recording, *, workers: int = 1,
                 agent_settings: dict | None = None) -> None:
        self.work = Path(work)
        self.recording = recording
        self.workers = workers
        self.local = self.make_broker("local")
        self.cloud = self.make_broker("cloud", autosave_interval_s=CLOUD_AUTOSAVE_S)
        self.cloud_config = write_config(self.work, self.cloud, ingest={"workers": workers})
        overrides = {"config": {"bootstrap": str(CONFIG)},
                     # a short resend wait (shipped: 15 s) keeps a run short; the rest as shipped
                     "uplink": {"landed": {"resend_after_s": 3}}}
        for section, values in (agent_settings or {}).items():
            overrides.setdefault(section, {}).update(values)
        self.agent = self.make_agent(overrides)
        self.ingest: dict[int, CloudProcess] = {}
        self.sensors: Sensors | None = None
        self.faults: list[str] = []
        self.pending_at_kill: set[str] = set()
        self.outages: list[tuple[int, int]] = []     # the agent down, epoch ms: killed, back (subscribed)
        self._stopping = threading.Event()

    # -- parts (tests/netns_rig.py makes them on two network hosts) ---------------------------
    def make_broker(self, name: str, **options: Any) -> MosquittoBroker:
        """The gateway's broker (``local``) or the cloud's."""
        return MosquittoBroker(self.work / name, **options)

    def make_agent(self, overrides: dict) -> AgentProcess:
        return AgentProcess(self.work / "agent", self.local, self.cloud, overrides)

    def start_sensors(self) -> Sensors:
        return Sensors(self.local, self.recording.messages)

    def start_ingest(self, worker: int, env: dict[str, str] | None = None) -> CloudProcess:
        proc = CloudProcess(["ingest", "--config", str(self.cloud_config), "--worker", str(worker)],
                            self.work / f"ingest-{worker}.log", env=env)
        self.ingest[worker] = proc
        return proc

    def wait_ingest_subscribed(self) -> None:
        for worker, proc in self.ingest.items():
            wait_for(lambda proc=proc: proc.log().count("ingest connected") >= 1 or not proc.running, 30,
                     f"ingest worker {worker} connected")

    def now_s(self) -> float:
        assert self.sensors is not None
        return time.monotonic() - self.sensors.started

    def run(self, faults: list[tuple[float, Callable[[], None]]], *,
            ingest_env: dict[int, dict[str, str]] | None = None, timeout_s: float = 240) -> Outcome:
        """The scenario with ``faults`` (scenario second, action) injected; what the cloud landed."""
        self.local.start()
        self.cloud.start()
        try:
            for worker in range(self.workers):
                self.start_ingest(worker, (ingest_env or {}).get(worker))
            self.wait_ingest_subscribed()
            self.agent.start()
            self.sensors = self.start_sensors()
            supervisor = threading.Thread(target=self._supervise, daemon=True)
            supervisor.start()
            for at, action in sorted(faults, key=lambda f: f[0]):
                delay = at - self.now_s()
                if delay > 0:
                    time.sleep(delay)
                action()
            assert self.sensors.done.wait(timeout_s), "the sensors finished the scenario"
            # empty, and nothing waiting in the group commit (outbox.group_commit_s) to go in
            wait_for(lambda: (outbox := self.agent.state().get("outbox") or {}).get("depth") == 0
                     and outbox.get("grouped", 0) == 0 and self.agent.counters().get("messages_in", 0) > 0,
                     timeout_s,
                     lambda: f"the outbox emptied by landed acknowledgements ({self.agent.state().get('outbox')})")
            self._stopping.set()
            supervisor.join()
            for proc in self.ingest.values():
                assert proc.stop() == 0, proc.log()[-3000:]
            agent_log = self.agent.log()
            resent = int(self.agent.counters().get("resent", 0))
            assert self.agent.stop() == 0
        finally:
            self._stopping.set()
            if self.sensors is not None:
                self.sensors.close()
            self.agent.kill()
            for proc in self.ingest.values():
                if proc.running:
                    proc.kill9()
            self.local.kill()
            self.cloud.kill()
        return self._outcome(agent_log, resent)

    def _outcome(self, agent_log: str, resent: int) -> Outcome:
        records = []
        for path in sorted((self.work / "landing" / "events").rglob("*")):
            if path.is_file():
                records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        unique = {r["id"]: r for r in records}
        matches = Counter((r["pattern"], _binding(r, key_variable(r["pattern"]))) for r in unique.values()
                          if r["kind"] == "match")
        instances = Counter((r["pattern"], r["windowStart"], r["windowEnd"]) for r in unique.values()
                            if r["kind"] == "instance")
        windows: dict = {}
        for r in unique.values():
            if r["kind"] == "match":
                key = (r["pattern"], _binding(r, key_variable(r["pattern"])))
                windows.setdefault(key, []).append((r["windowStart"], r["windowEnd"], r["id"][-8:]))
        outbox = self.agent.data_dir / "outbox.db"
        return Outcome(truth=self.recording.truth, matches=matches, instances=instances,
                       made=_events_made(outbox) - len(_outbox_ids(outbox) - set(unique)), distinct=len(unique),
                       landed=len(records),
                       significant=sum(r["kind"] == "significant" for r in unique.values()), faults=self.faults,
                       agent_log=agent_log, pending_at_kill=self.pending_at_kill, landed_ids=set(unique),
                       resent=resent, match_windows=windows, outages=self.outages)

    def _supervise(self) -> None:
        """An ingest worker that died (at a failpoint) is started again two seconds later, as
        ``edgewave-cloud run`` starts its children again."""
        while not self._stopping.wait(0.2):
            for worker, proc in list(self.ingest.items()):
                if proc.proc.poll() is not None:
                    time.sleep(2.0)
                    self.faults.append(f"ingest worker {worker} died at {self.now_s():.1f}s, restarted")
                    self.start_ingest(worker)

    # -- faults ------------------------------------------------------------------------------
    def restart_cloud_broker(self, how: str, down_s: float = 5.0) -> Callable[[], None]:
        """SIGTERM (mosquitto saves its state) or SIGKILL (what it saved at its last autosave
        survives), then started again on the same port ``down_s`` later."""
        def action() -> None:
            self.faults.append(f"cloud broker {how} at {self.now_s():.1f}s, down {down_s:.1f}s")
            self.cloud.stop() if how == "term" else self.cloud.kill()
            time.sleep(down_s)
            self.cloud.start()
        return action

    def kill_agent_with_events_unlanded(self, down_s: float = 1.0) -> Callable[[], None]:
        """Hold every ingest worker (SIGSTOP) until the agent has events sent (PUBACK in) and not
        landed, kill the agent then, let ingest go on, start the agent again ``down_s`` later."""
        def action() -> None:
            for proc in self.ingest.values():
                os.killpg(proc.proc.pid, signal.SIGSTOP)
            try:
                wait_for(lambda: (self.agent.state().get("outbox") or {}).get("unlanded", 0) > 0, 20,
                         "events sent and not landed")
                at = self.now_s()
                down_ms = int(time.time() * 1000)
                self.agent.kill()
                self.pending_at_kill |= _outbox_ids(self.agent.data_dir / "outbox.db")
                self.faults.append(f"agent SIGKILL at {at:.1f}s with {len(self.pending_at_kill)} events "
                                   "in its outbox, sent and not landed")
            finally:
                for proc in self.ingest.values():
                    os.killpg(proc.proc.pid, signal.SIGCONT)
            time.sleep(down_s)
            self.agent.start()
            self.outages.append((down_ms, int(time.time() * 1000)))
            self.faults.append(f"agent back at {self.now_s():.1f}s")
        return action


def _binding(event: dict, variable: str) -> str | None:
    for binding in event.get("bindings", []):
        if binding["variable"] == variable:
            return binding["value"]
    return None


def _events_made(outbox: Path) -> int:
    """How many events the agent ever stored: the outbox table's AUTOINCREMENT counter."""
    conn = sqlite3.connect(outbox)
    try:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


def _outbox_ids(outbox: Path) -> set[str]:
    conn = sqlite3.connect(outbox)
    try:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}
    finally:
        conn.close()
