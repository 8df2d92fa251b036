"""Benchmark: the gateway agent on loopback with real Mosquitto brokers.

Runs ``edgewave-agent run`` as a subprocess between two brokers it starts itself (local
= sensors, cloud = uplink) and measures, printing each figure next to its target:

1. publish-to-uplink latency of a message that completes a pattern, at 1,000 msgs/s
   (p50, p99; target p99 < 10 ms), read strictly: *every* message completes a pattern, so
   the agent forwards 1,000 events/s. It is measured in rounds (twenty of 5 s), each right
   after a baseline round: the same publish -> subscribe path through one broker without
   the agent. Every round is printed with the CPU steal it saw; the figure checked is the
   p99 of all the rounds' messages together (100,000). The completing messages inside the
   demo mix of step 2 (1 in 20 completes) are reported too. The agents compared in steps
   5, 6 and 7 take their turns in the same rounds, the first of a round rotating: a noisy
   moment of the machine then falls on each alike. Measured with two agents of the same
   config: five rounds of 10 s, one agent after the other, put their p99s up to 15 %
   apart; twelve rounds of 5 s, taking turns, 1-3 %. A comparison is printed with the
   90 % interval of its p99 ratio over the rounds resampled (paired by round): how far
   one run's verdict can be trusted.
2. the highest sustained input rate without growing lag: a demo-like mix (19 in 20
   messages are sensor observations the significance filter mostly drops, 1 in 20
   completes a pattern), stepped up until the lag at the end of a step exceeds the lag
   at its start by more than 50 ms, or messages are missing.
3. the agent's resident memory (peak RSS sampled during the run; target < 80 MB).
4. bytes forwarded / bytes received on the demo-like mix (from the agent's counters).
5. uplink batching on (the shipped default) against off, in the same rounds as step 1: a
   second agent with ``uplink.batch.enabled: false`` (gateway gw2, a local broker of its
   own, idle while another is measured) gets the same 1,000 completing msgs/s in its
   turn; p50/p99 and the bytes per event on the wire (every event is a match here, and
   a match never waits, so a message mostly carries one).
6. durable windows (``state.durable_windows``, the default) against off, in one run: a
   third agent with ``state.durable_windows: false`` (gw3, its own local broker) gets the
   same latency rounds in its turn, and the same stepped mix after the first agent's; the
   mix's observations go to the alarm stream, which a window reads, so every message is
   journaled (no pattern keeps humidity, so the windows hold what they held before).
   Printed: p99 and sustained rate on and off (target: within 10 % of each other), and
   the bytes each agent wrote to storage (``/proc/<pid>/io`` write_bytes) per sensor byte
   received and per message during the mix; then, at the demo scenario's own pace
   (configs/scenarios/demo.yaml, gw1's messages recorded and published as timed, to both
   agents at once, on the fire stream, which a window reads, before any other step), what
   each wrote, per sensor byte and per hour (status file included, both ways). Grouped
   commits depend on the rate, so the hour's figure is measured at the demo's pace, not
   scaled from the mix.
7. landed acknowledgements (``uplink.landed.mode: auto``, the default) against off, in one
   run: a fourth agent with ``uplink.landed: {mode: off}`` (gw4, its own local broker; it
   sends no key and deletes on the PUBACK) gets the same latency rounds in its turn and the
   same stepped mix after the third agent's. The cloud-side receivers stand in for ingest:
   each message's key (Correlation Data) is acknowledged on ``ew/<gw>/events/landed`` as
   ingest does after a group commit, the keys of a group in one acknowledgement, a group
   closing 50 ms after its first message or at 500 keys (ingest's ``commit_interval_ms`` and
   ``commit_max_messages`` defaults). Printed: p50/p99, the agents' CPU and sustained rate
   on and off (target: within 10 % of each other; the p50 on at most 10 % + 0.1 ms above off:
   a delay every message waits for can hide in a pooled p99 that a few stalls of the other
   agent's rounds set), the keys sent and acknowledged, and what
   each agent's status says (events landed, re-sent, unlanded, how it deletes: end_to_end
   for the first agent, puback for the fourth). Without acknowledgements an agent in auto
   mode would stop publishing after ``max_unlanded`` (5,000) events; every agent here is
   acknowledged.

``--rate N`` runs the latency rounds (1, 5, 6, 7) at N completing msgs/s instead of 1,000:
where one core of the machine is too slow for the agent to forward 1,000 events/s (its CPU
near 100 % of a core in every round, the p50 in the hundreds of milliseconds), the latency
is the queue's and the comparisons say nothing about what they compare; a rate at which
the agent uses about a third of a core measures what the rounds were designed for. The
printed target of the p99 then applies to that rate.

The full run takes about 11 minutes (four agents, twenty latency rounds of 5 s each, three
stepped mixes, 60 s at the demo pace); ``--quick`` about 2.

    python tests/benchmarks/bench_agent.py [--quick] [--rate N]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import paho.mqtt.client as mqtt  # noqa: E402
import psutil  # noqa: E402
import yaml  # noqa: E402
from agent_harness import ALARM, EX, FIRE, INTRUSION, SOSA, XSD, alarm, config_document  # noqa: E402
from broker_process import MosquittoBroker  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

from edgewave.shared import topics  # noqa: E402
from edgewave.shared.landed_acks import echoable, encode_landed  # noqa: E402
from edgewave.shared.uplink_batch import decode_batch, is_batch  # noqa: E402

def humidity(n: int, sensor: int) -> bytes:
    value = 50.0 + (n % 7) * 0.1          # wanders inside a 1.0 deadband: rarely significant
    return (f"<{EX}hum{n}> <{SOSA}madeBySensor> <{EX}h{sensor}> .\n"
            f"<{EX}hum{n}> <{SOSA}observedProperty> <{EX}humidity> .\n"
            f'<{EX}hum{n}> <{SOSA}hasSimpleResult> "{value:.1f}"^^<{XSD}decimal> .\n').encode()


def _client(broker: MosquittoBroker, client_id: str) -> mqtt.Client:
    c = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    c.max_inflight_messages_set(2000)
    c.max_queued_messages_set(0)
    return c


class Receiver:
    """Subscribes to a topic and records when each numbered message arrived.

    On an events topic it also stands in for ingest's landed acknowledgements
    (shared/landed_acks.py): the key (Correlation Data) of each message is acknowledged on
    the gateway's landed topic as ingest does after a group commit, the keys of a group in
    one message, a group closing ``ack_interval_s`` after its first message or at
    ``ack_max_keys`` keys (ingest's ``commit_interval_ms`` and ``commit_max_messages``
    defaults). A message without a key (``uplink.landed.mode: off``) gets none."""

    def __init__(self, broker: MosquittoBroker, topic: str, number_of, ack_interval_s: float = 0.05,  # noqa: ANN001
                 ack_max_keys: int = 500) -> None:
        self.arrivals: dict[int, float] = {}
        self.wire_bytes = self.events = 0      # payload bytes and events of the numbered messages
        self.messages = self.keyed = 0         # messages received, and those of them with a key
        self.acked = self.ack_messages = 0     # keys acknowledged, in how many acknowledgements
        self.ready = threading.Event()
        self.number_of = number_of
        self.landed_topic = topics.landed_topic(topics.gateway_from_topic(topic)) if topic.endswith("/events") else None
        self.ack_interval_s, self.ack_max_keys = ack_interval_s, ack_max_keys
        self._group: list[str] = []
        self._group_opened = 0.0
        self._group_ready = threading.Condition()
        self._closing = False
        self.client = _client(broker, f"bench-recv-{topic.replace('/', '-')}")
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *a: self.ready.set()
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        self._acker = threading.Thread(target=self._acknowledge, daemon=True, name="bench-landed-acks")
        if self.landed_topic is not None:
            self._acker.start()
        if not self.ready.wait(15):
            raise RuntimeError("receiver could not subscribe")

    def _on_message(self, c, u, msg) -> None:  # noqa: ANN001
        now = time.perf_counter()
        self.messages += 1
        numbers = self.number_of(msg.payload)
        if numbers:
            self.wire_bytes += len(msg.payload)
            self.events += len(numbers)
        for n in numbers:
            self.arrivals.setdefault(n, now)
        key = echoable(getattr(msg.properties, "CorrelationData", None)) if self.landed_topic else None
        if key is not None:
            self.keyed += 1
            with self._group_ready:
                if not self._group:
                    self._group_opened = time.monotonic()
                self._group.append(key)
                self._group_ready.notify()

    def _acknowledge(self) -> None:
        """Ingest's group commit, as far as the gateway sees it: the keys of a group in one acknowledgement."""
        while True:
            with self._group_ready:
                while not self._group and not self._closing:
                    self._group_ready.wait()
                if self._closing:
                    return
                while len(self._group) < self.ack_max_keys and not self._closing:
                    remaining = self._group_opened + self.ack_interval_s - time.monotonic()
                    if remaining <= 0:
                        break
                    self._group_ready.wait(remaining)
                keys, self._group = self._group, []
            for payload in encode_landed(keys):
                self.client.publish(self.landed_topic, payload, qos=1)
                self.ack_messages += 1
            self.acked += len(keys)

    def close(self) -> None:
        with self._group_ready:
            self._closing = True
            self._group_ready.notify()
        if self._acker.is_alive():
            self._acker.join(5)
        self.client.disconnect()
        self.client.loop_stop()


def alarm_numbers(payload: bytes) -> list[int]:
    """The alarm numbers of the ALARM matches in one uplink message (one event or a batch)."""
    events = decode_batch(payload) if is_batch(payload) else [json.loads(payload)]
    return [int({b["variable"]: b["value"] for b in e["bindings"]}["level"].split('"')[1])
            for e in events if e.get("pattern") == "alarm"]


def raw_number(payload: bytes) -> list[int]:
    return [int(payload.split(b'"')[1])]


def publish_paced(client: mqtt.Client, rate: float, duration: float, make, start_n: int = 0):  # noqa: ANN001
    """Publish ``make(n)`` -> (topic, payload, numbered?) at ``rate``/s; returns {n: send time}."""
    sent: dict[int, float] = {}
    total = int(rate * duration)
    t0 = time.perf_counter()
    for i in range(total):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        topic, payload, number = make(start_n + i)
        now = time.perf_counter()
        client.publish(topic, payload, qos=1)
        if number is not None:
            sent[number] = now
    return sent


def wait_arrivals(receiver: Receiver, expected: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not expected <= receiver.arrivals.keys():
        time.sleep(0.05)


def p99_ratio_interval(a_rounds: list[list[float]], b_rounds: list[list[float]],
                       draws: int = 1000) -> tuple[float, float]:
    """The 90 % interval of p99(a) / p99(b) over the rounds drawn again with replacement,
    paired by round (the two agents took their turns in the same rounds). Each round
    keeps only its slowest values: the p99 of the whole is among them."""
    total = sum(len(r) for r in a_rounds)
    keep = total // 100 + 1
    tops = [(sorted(a, reverse=True)[:keep], sorted(b, reverse=True)[:keep]) for a, b in zip(a_rounds, b_rounds)]

    def p99(chosen: list[tuple[list[float], list[float]]], side: int, n: int) -> float:
        slowest = sorted((v for pair in chosen for v in pair[side]), reverse=True)
        return slowest[min(len(slowest) - 1, n - int(.99 * n) - 1)]

    rnd = random.Random(1)
    ratios = []
    for _ in range(draws):
        chosen = [rnd.randrange(len(tops)) for _ in tops]
        pairs = [tops[i] for i in chosen]
        n_a = sum(len(a_rounds[i]) for i in chosen)
        n_b = sum(len(b_rounds[i]) for i in chosen)
        ratios.append(p99(pairs, 0, n_a) / p99(pairs, 1, n_b))
    ratios.sort()
    return ratios[int(.05 * draws)], ratios[int(.95 * draws) - 1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self.stop_flag.wait(0.2)


class MachineLoad:
    """The agent's CPU and the hypervisor's steal over a phase. On a shared VM the latency
    tail follows the steal (2026-11-23, same code: p99 8-13 ms under 1 % steal, 13-32 ms
    at 2-11 %, 46-330 ms at 19-57 %), so the steal is printed beside the figure."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.wall = time.perf_counter()
        self.agent = self._agent_seconds()
        self.machine = psutil.cpu_times()
        self.agent_percent = self.steal_percent = float("nan")

    def _agent_seconds(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def stop(self) -> None:
        wall = time.perf_counter() - self.wall
        self.agent_percent = 100 * (self._agent_seconds() - self.agent) / wall
        after = psutil.cpu_times()
        # guest time is already inside user time on Linux: leave it out of the total
        fields = [f for f in after._fields if not f.startswith("guest")]
        total = sum(getattr(after, f) - getattr(self.machine, f) for f in fields)
        self.steal_percent = 100 * (getattr(after, "steal", 0.0) - getattr(self.machine, "steal", 0.0)) / total


def demo_messages() -> list:
    """gw1's messages in the demo scenario (recorded here)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo.rec"
        repo = HERE.parents[1]
        subprocess.run([sys.executable, "-m", "edgewave.firmware_sim.cli", "record", "--config",
                        str(repo / "configs/sim.yaml"), "--scenario", str(repo / "configs/scenarios/demo.yaml"),
                        "--gateway", "gw1", "--out", str(out)], check=True, capture_output=True)
        from edgewave.firmware_sim.recording import read_messages
        return list(read_messages(out))


def demo_rate() -> tuple[float, float]:
    """Messages and payload bytes per hour of gw1 in the demo scenario."""
    messages = demo_messages()
    seconds = (messages[-1].ms - messages[0].ms) / 1000 or 1.0
    size = sum(len(("\n".join(m.lines) + "\n").encode()) for m in messages)
    return len(messages) * 3600 / seconds, size * 3600 / seconds


def written_bytes(pid: int) -> int:
    """Bytes the process caused to be written to storage (write_bytes; the bytes handed to
    write() where the kernel does not count those)."""
    io = psutil.Process(pid).io_counters()
    return io.write_bytes or io.write_chars


def step_mix(pub: mqtt.Client, recv: Receiver, rates: list[int], step_s: float, data_dir: Path,
             pid: int) -> tuple[int, list[tuple], dict]:
    """Step 2 for one agent: the demo-like mix stepped up until the lag grows; the highest
    steady rate, each step's row, and the totals (input and forwarded bytes, storage writes)."""
    counters_before = read_counters(data_dir)
    written_before = written_bytes(pid)
    sustained = 0
    step_rows = []
    n0 = 10_000_000
    for rate in rates:
        def make(n: int) -> tuple[str, bytes, int | None]:
            if n % 20 == 0:
                return "ew/in/alarm/s1", alarm(n), n
            # on the alarm stream: a window reads it, so the journal takes every message, and no
            # pattern holds humidity, so the engine's memory is what it was with its own stream
            return f"ew/in/alarm/h{n % 50}", humidity(n, n % 50), None
        step_started = time.perf_counter()
        sent = publish_paced(pub, rate, step_s, make, start_n=n0)
        achieved = int(rate * step_s) / (time.perf_counter() - step_started)
        wait_arrivals(recv, set(sent), 20)
        got = {n: recv.arrivals[n] - t for n, t in sent.items() if n in recv.arrivals}
        ordered = [got[n] * 1000 for n in sorted(got)]
        quarter = max(1, len(ordered) // 4)
        head = statistics.median(ordered[:quarter]) if ordered else float("inf")
        tail = statistics.median(ordered[-quarter:]) if ordered else float("inf")
        ok = len(got) == len(sent) and tail - head < 50
        step_rows.append((rate, achieved, len(sent) - len(got), head, tail, ok,
                          percentile(ordered, .5) if ordered else float("inf"),
                          percentile(ordered, .99) if ordered else float("inf")))
        if not ok:
            break
        sustained = rate
        n0 += int(rate * step_s) + 10
        time.sleep(1.0)
    time.sleep(1.5)
    counters = read_counters(data_dir)
    totals = {name: counters.get(name, 0) - counters_before.get(name, 0)
              for name in ("bytes_in", "bytes_forwarded", "messages_in")}
    totals["written"] = written_bytes(pid) - written_before
    return sustained, step_rows, totals


def demo_pace(pubs: list[mqtt.Client], pids: list[int], seconds: float) -> tuple[list[int], int, int, float]:
    """The demo's messages (its first ``seconds``) published as timed to each of ``pubs``, on the
    fire stream; the bytes each agent wrote to storage meanwhile (and 3 s after), the messages,
    their payload bytes, and the seconds it took."""
    messages = demo_messages()
    first = messages[0].ms
    messages = [m for m in messages if m.ms - first < seconds * 1000]
    before = [written_bytes(pid) for pid in pids]
    t0 = time.perf_counter()
    size = 0
    for m in messages:
        delay = t0 + (m.ms - first) / 1000 - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        payload = ("\n".join(m.lines) + "\n").encode()
        size += len(payload)
        for pub in pubs:
            pub.publish("ew/in/fire/" + m.topic.rsplit("/", 1)[-1], payload, qos=1)
    time.sleep(max(0.0, t0 + seconds - time.perf_counter()))
    elapsed = time.perf_counter() - t0
    time.sleep(3.0)
    return [written_bytes(pid) - b for pid, b in zip(pids, before)], len(messages), size, elapsed


def read_status(data_dir: Path) -> dict:
    path = data_dir / "status.json"
    return json.loads(path.read_text()) if path.exists() else {}


def read_counters(data_dir: Path) -> dict:
    return read_status(data_dir).get("counters", {})


def start_agent(work: Path, gateway: str, local: MosquittoBroker, cloud: MosquittoBroker, bootstrap: Path,
                extra: dict, log) -> subprocess.Popen:  # noqa: ANN001
    """``edgewave-agent run`` for ``gateway`` with the benchmark's settings and ``extra`` sections."""
    settings = {
        "gateway": gateway, "data_dir": str(work / f"data-{gateway}"), "log_level": "WARNING",
        "local": {"host": local.host, "port": local.port}, "cloud": {"host": cloud.host, "port": cloud.port},
        "status": {"interval_s": 5, "local_interval_s": 0.5, "state_file_interval_s": 0.5},
        "outbox": {"max_rate_per_s": 20000, "max_inflight": 500},
        "input": {"queue_max": 200000},
        "config": {"key": "bench-key", "bootstrap": str(bootstrap)},
        **extra,
    }
    (work / f"agent-{gateway}.yaml").write_text(yaml.safe_dump(settings))
    return subprocess.Popen([sys.executable, "-m", "edgewave.agent.cli", "run", "--config",
                             str(work / f"agent-{gateway}.yaml")], stdout=log, stderr=log,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def latency_round(pub: mqtt.Client, recv: Receiver, pid: int, seconds: float,
                  first: int, rate: float = 1000) -> tuple[list[float], int, MachineLoad]:
    """``rate`` (1,000) completing msgs/s for ``seconds``: each one's latency (ms), how many never
    arrived, and the agent's CPU and the steal meanwhile."""
    machine = MachineLoad(pid)
    sent = publish_paced(pub, rate, seconds, lambda n: ("ew/in/alarm/s1", alarm(n), n), start_n=first)
    machine.stop()
    wait_arrivals(recv, set(sent), 30)
    latencies = [(recv.arrivals[n] - t) * 1000 for n, t in sent.items() if n in recv.arrivals]
    return latencies, len(sent) - len(latencies), machine


def warm_up(pub: mqtt.Client, recv: Receiver, work: Path) -> None:
    """Publish alarms until the agent's first event arrives: the path works."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not recv.arrivals:
        pub.publish("ew/in/alarm/s1", alarm(0), qos=1)
        time.sleep(0.2)
    if not recv.arrivals:
        raise RuntimeError(f"agent produced no events; log in {work / 'agent.log'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    parser.add_argument("--rate", type=int, default=1000, metavar="N",
                        help="completing msgs/s of the latency rounds (default %(default)s; lower it where the "
                             "agent cannot keep up, see the module docstring)")
    args = parser.parse_args(argv)
    latency_s = 2.0 if args.quick else 5.0
    latency_rounds = 1 if args.quick else 20
    baseline_s = 1.0
    step_s = 2.0 if args.quick else 6.0
    rates = [1000, 2000] if args.quick else [1000, 2000, 3000, 4000, 6000, 8000]

    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    local = MosquittoBroker(work / "local").start()
    local_off = MosquittoBroker(work / "local-off").start()     # the batching-off agent's sensors
    local_nostate = MosquittoBroker(work / "local-nostate").start()   # the durable-windows-off agent's
    local_noack = MosquittoBroker(work / "local-noack").start()       # the landed-acknowledgements-off agent's
    cloud = MosquittoBroker(work / "cloud").start()
    agent = agent_off = agent_nostate = agent_noack = None
    log = open(work / "agent.log", "wb")
    try:
        pub = _client(local, "bench-pub")
        pub.connect(local.host, local.port)
        pub.loop_start()
        # the baseline: publish -> subscribe through one broker, no agent on the path
        base_recv = Receiver(local, "bench/raw", raw_number)

        # -- the agent -------------------------------------------------------------------
        bootstrap = work / "demo-config.trig"
        bootstrap.write_text(config_document(1, patterns={"fire": FIRE, "intrusion": INTRUSION, "alarm": ALARM},
                                             significance="[ ew:deadbandAbsolute 1.0 ; ew:maxSilenceSeconds 3600 ]"))
        agent = start_agent(work, "gw1", local, cloud, bootstrap, {}, log)    # the shipped uplink settings
        rss = RssSampler(agent.pid)
        rss.start()
        recv = Receiver(cloud, "ew/gw1/events", alarm_numbers)
        warm_up(pub, recv, work)
        # 5. the same with uplink batching off: another agent, its own sensors' broker
        agent_off = start_agent(work, "gw2", local_off, cloud, bootstrap, {"uplink": {"batch": {"enabled": False}}}, log)
        pub_off = _client(local_off, "bench-pub-off")
        pub_off.connect(local_off.host, local_off.port)
        pub_off.loop_start()
        recv_off = Receiver(cloud, "ew/gw2/events", alarm_numbers)
        warm_up(pub_off, recv_off, work)
        # 6. the same with durable windows off
        agent_nostate = start_agent(work, "gw3", local_nostate, cloud, bootstrap,
                                    {"state": {"durable_windows": False}}, log)
        pub_nostate = _client(local_nostate, "bench-pub-nostate")
        pub_nostate.connect(local_nostate.host, local_nostate.port)
        pub_nostate.loop_start()
        recv_nostate = Receiver(cloud, "ew/gw3/events", alarm_numbers)
        warm_up(pub_nostate, recv_nostate, work)
        # 7. the same with landed acknowledgements off: events leave the outbox on the PUBACK
        agent_noack = start_agent(work, "gw4", local_noack, cloud, bootstrap, {"uplink": {"landed": {"mode": "off"}}},
                                  log)
        pub_noack = _client(local_noack, "bench-pub-noack")
        pub_noack.connect(local_noack.host, local_noack.port)
        pub_noack.loop_start()
        recv_noack = Receiver(cloud, "ew/gw4/events", alarm_numbers)
        warm_up(pub_noack, recv_noack, work)
        time.sleep(0.5)
        # 6. storage at the demo's pace, first: later steps leave rows and events whose deletion
        # and checkpoints would be counted here too
        demo_written, demo_msgs, demo_size, demo_elapsed = demo_pace([pub, pub_nostate],
                                                                     [agent.pid, agent_nostate.pid], 60.0)

        # 1. latency at 1,000 msgs/s, every message completes the alarm pattern; in rounds,
        # each after a baseline round, so that each is read beside what the broker alone
        # did at that moment
        base: list[float] = []
        rounds: dict[str, list[list[float]]] = {"on": [], "batching off": [], "durable off": [], "acks off": []}
        nostate_rows = []
        noack_rows = []
        missing = missing_off = 0
        latency_rows = []
        off_rows = []
        wire = (recv.wire_bytes, recv.events)
        wire_off = (recv_off.wire_bytes, recv_off.events)
        # the four agents take turns, the first of a round rotating: a noisy moment of the
        # machine falls on each of them alike (see the module docstring)
        turns = [("on", pub, recv, agent.pid), ("batching off", pub_off, recv_off, agent_off.pid),
                 ("durable off", pub_nostate, recv_nostate, agent_nostate.pid),
                 ("acks off", pub_noack, recv_noack, agent_noack.pid)]
        for round_no in range(latency_rounds):
            first = 1 + round_no * 100_000
            sent = publish_paced(pub, args.rate, baseline_s, lambda n: ("bench/raw", f'"{n}"'.encode(), n), start_n=first)
            wait_arrivals(base_recv, set(sent), 20)
            round_base = [(base_recv.arrivals[n] - t) * 1000 for n, t in sent.items() if n in base_recv.arrivals]
            base += round_base
            shift = round_no % len(turns)
            for name, turn_pub, turn_recv, pid in turns[shift:] + turns[:shift]:
                round_lat, lost, machine = latency_round(turn_pub, turn_recv, pid, latency_s, first, args.rate)
                rounds[name].append(round_lat)
                if name == "on":
                    missing += lost
                    latency_rows.append((percentile(round_base, .99), percentile(round_lat, .5),
                                         percentile(round_lat, .99), machine.agent_percent, machine.steal_percent))
                    continue
                missing_off += lost
                row = (percentile(round_lat, .5), percentile(round_lat, .99), machine.agent_percent,
                       machine.steal_percent)
                {"batching off": off_rows, "durable off": nostate_rows, "acks off": noack_rows}[name].append(row)
        lat, lat_off, lat_nostate, lat_noack = ([v for r in rounds[name] for v in r] for name in rounds)
        base_recv.close()
        wire = ((recv.wire_bytes - wire[0]) / max(1, recv.events - wire[1]),
                (recv_off.wire_bytes - wire_off[0]) / max(1, recv_off.events - wire_off[1]))
        recv_off.close()
        pub_off.loop_stop()

        # 2. sustained rate with a demo-like mix, stepped; 6. the same for durable windows off
        sustained, step_rows, totals = step_mix(pub, recv, rates, step_s, work / "data-gw1", agent.pid)
        sustained_nostate, nostate_steps, totals_nostate = step_mix(pub_nostate, recv_nostate, rates, step_s,
                                                                    work / "data-gw3", agent_nostate.pid)
        recv_nostate.close()
        pub_nostate.loop_stop()
        # 7. the same for landed acknowledgements off
        sustained_noack, noack_steps, _ = step_mix(pub_noack, recv_noack, rates, step_s, work / "data-gw4",
                                                   agent_noack.pid)
        acks = {"on": (recv.keyed, recv.acked, recv.ack_messages, read_status(work / "data-gw1")),
                "off": (recv_noack.keyed, recv_noack.acked, recv_noack.ack_messages, read_status(work / "data-gw4"))}
        recv_noack.close()
        pub_noack.loop_stop()
        bytes_in, bytes_fwd = totals["bytes_in"], totals["bytes_forwarded"]
        demo_messages_h, demo_bytes_h = demo_rate()
        rss.stop_flag.set()
        rss.join()
        recv.close()
        pub.loop_stop()

        # -- report ----------------------------------------------------------------------
        print(f"edgewave agent benchmark ({'quick' if args.quick else 'full'}), loopback, real mosquitto")
        print(f"{'figure':<52}{'measured':>14}{'target':>16}")
        for i, (base_p99, p50, round_p99, agent_cpu, steal) in enumerate(latency_rows, 1):
            print(f"{f'  round {i}: broker alone p99 / agent p50, p99 (ms)':<52}"
                  f"{base_p99:>6.2f} / {p50:.2f}, {round_p99:<6.2f} agent CPU {agent_cpu:.0f} %, steal {steal:.1f} %")
        print(f"{'baseline broker publish->subscribe p50 / p99 (ms)':<52}"
              f"{percentile(base, .5):>6.2f} / {percentile(base, .99):<6.2f}{'(reference)':>16}")
        print(f"{f'agent publish->uplink p50 (ms) @{args.rate} msg/s':<52}{percentile(lat, .5):>14.2f}{'':>16}")
        p99 = percentile(lat, .99)
        print(f"{f'agent publish->uplink p99 (ms), all {len(lat):,} msgs':<52}{p99:>14.2f}{'< 10':>16}"
              f"  {'OK' if p99 < 10 else 'MISSED'}")
        print(f"{'  events missing after 30 s':<52}{missing:>14}{'0':>16}")
        for i, (p50_off, p99_off, cpu_off, steal_off) in enumerate(off_rows, 1):
            print(f"{f'  round {i}, batching off: agent p50, p99 (ms)':<52}"
                  f"{p50_off:>6.2f}, {p99_off:<6.2f} agent CPU {cpu_off:.0f} %, steal {steal_off:.1f} %")
        print(f"{'uplink batching on / off: p50 (ms)':<52}{percentile(lat, .5):>6.2f} / {percentile(lat_off, .5):<6.2f}")
        print(f"{'uplink batching on / off: p99 (ms)':<52}{percentile(lat, .99):>6.2f} / {percentile(lat_off, .99):<6.2f}"
              f"{'< 50 (on)':>16}  {'OK' if p99 < 50 else 'MISSED'}")
        low, high = p99_ratio_interval(rounds["on"], rounds["batching off"])
        print(f"{'  p99 on / off, 90 % interval over the rounds':<52}{low:>6.2f} - {high:<6.2f}")
        print(f"{'uplink batching on / off: bytes per event on the wire':<52}{wire[0]:>6.0f} / {wire[1]:<6.0f}")
        print(f"{'  events missing after 30 s, batching off':<52}{missing_off:>14}{'0':>16}")
        print(f"{'  agent CPU, % of one core':<52}{statistics.mean(r[3] for r in latency_rows):>14.0f}")
        print(f"{'  CPU steal by the hypervisor, % of the machine':<52}"
              f"{statistics.mean(r[4] for r in latency_rows):>14.1f}{'(reference)':>16}")
        for rate, achieved, lost, head, tail, ok, mix_p50, mix_p99 in step_rows:
            print(f"{f'  mix @ {rate} msg/s (sent {achieved:.0f}/s): lag start->end ms, lost':<52}"
                  f"{head:>6.1f} -> {tail:<6.1f}{lost:>6}  {'steady' if ok else 'GROWING/LOSS'}")
            print(f"{'    completing observations in the mix p50 / p99 (ms)':<52}{mix_p50:>6.2f} / {mix_p99:<6.2f}")
        print(f"{'highest sustained input rate, demo mix (msg/s)':<52}{sustained:>14}{'>= 1000':>16}"
              f"  {'(max tried ' + str(rates[-1]) + ')' if sustained == rates[-1] else ''}")
        peak_mb = rss.peak / 1e6
        print(f"{'agent peak resident memory (MB)':<52}{peak_mb:>14.1f}{'< 80':>16}"
              f"  {'OK' if peak_mb < 80 else 'MISSED'}")
        ratio = bytes_fwd / bytes_in if bytes_in else float("nan")
        print(f"{'bytes forwarded / bytes received, demo mix':<52}{ratio:>14.3f}{'< 1':>16}"
              f"  ({bytes_fwd} / {bytes_in})")
        # 6. durable windows on against off
        for i, (p50_ns, p99_ns, cpu_ns, steal_ns) in enumerate(nostate_rows, 1):
            print(f"{f'  round {i}, durable windows off: agent p50, p99 (ms)':<52}"
                  f"{p50_ns:>6.2f}, {p99_ns:<6.2f} agent CPU {cpu_ns:.0f} %, steal {steal_ns:.1f} %")
        p99_ns = percentile(lat_nostate, .99)
        close_p99 = abs(p99 - p99_ns) <= 0.1 * max(p99, p99_ns)
        print(f"{'durable windows on / off: p50 (ms)':<52}{percentile(lat, .5):>6.2f} / "
              f"{percentile(lat_nostate, .5):<6.2f}")
        print(f"{'durable windows on / off: p99 (ms)':<52}{p99:>6.2f} / {p99_ns:<6.2f}{'within 10 %':>16}"
              f"  {'OK' if close_p99 else 'MISSED'}")
        low, high = p99_ratio_interval(rounds["on"], rounds["durable off"])
        print(f"{'  p99 on / off, 90 % interval over the rounds':<52}{low:>6.2f} - {high:<6.2f}")
        for rate, achieved, lost, head, tail, ok, mix_p50, mix_p99 in nostate_steps:
            print(f"{f'  durable off, mix @ {rate} msg/s: lag start->end ms, lost':<52}"
                  f"{head:>6.1f} -> {tail:<6.1f}{lost:>6}  {'steady' if ok else 'GROWING/LOSS'}")
        close_rate = abs(sustained - sustained_nostate) <= 0.1 * max(sustained, sustained_nostate)
        print(f"{'durable windows on / off: sustained mix (msg/s)':<52}{sustained:>6} / {sustained_nostate:<6}"
              f"{'within 10 %':>16}  {'OK' if close_rate else 'MISSED'}")
        for name, t in (("on", totals), ("off", totals_nostate)):
            per_byte = t["written"] / t["bytes_in"] if t["bytes_in"] else float("nan")
            per_msg = t["written"] / t["messages_in"] if t["messages_in"] else float("nan")
            print(f"{f'durable windows {name}: written to storage, the mix':<52}{per_byte:>6.2f} per sensor byte, "
                  f"{per_msg:,.0f} per message ({t['written']:,} for {t['messages_in']:,} msgs)")
        print(f"{f'demo pace: {demo_msgs} msgs, {demo_size:,} bytes in {demo_elapsed:.0f} s':<52}"
              f"(the demo: {demo_messages_h:,.0f} msgs, {demo_bytes_h / 1e6:.2f} MB an hour)")
        on, off = demo_written
        for name, written in (("on", on), ("off", off), ("on - off", on - off)):
            print(f"{f'  durable windows {name}: written at the demo pace':<52}{written / demo_size:>6.2f} "
                  f"per sensor byte, {written / demo_msgs:,.0f} per message, "
                  f"{written * 3600 / demo_elapsed / 1e6:.1f} MB an hour")
        # 7. landed acknowledgements on against off
        for i, (p50_na, p99_na, cpu_na, steal_na) in enumerate(noack_rows, 1):
            print(f"{f'  round {i}, landed acks off: agent p50, p99 (ms)':<52}"
                  f"{p50_na:>6.2f}, {p99_na:<6.2f} agent CPU {cpu_na:.0f} %, steal {steal_na:.1f} %")
        p99_na = percentile(lat_noack, .99)
        close_p99_acks = abs(p99 - p99_na) <= 0.1 * max(p99, p99_na)
        # the p50 too: a delay every message waits for (a wake-up's period) can leave the pooled
        # p99s alike while the off agent's p99 comes from a few stalls of the machine
        p50_on, p50_na = percentile(lat, .5), percentile(lat_noack, .5)
        close_p50_acks = p50_on <= 1.1 * p50_na + 0.1
        print(f"{'landed acks on / off: p50 (ms)':<52}{p50_on:>6.2f} / {p50_na:<6.2f}{'<= +10 % +0.1':>16}"
              f"  {'OK' if close_p50_acks else 'MISSED'}")
        print(f"{'landed acks on / off: p99 (ms)':<52}{p99:>6.2f} / {p99_na:<6.2f}{'within 10 %':>16}"
              f"  {'OK' if close_p99_acks else 'MISSED'}")
        low, high = p99_ratio_interval(rounds["on"], rounds["acks off"])
        print(f"{'  p99 on / off, 90 % interval over the rounds':<52}{low:>6.2f} - {high:<6.2f}")
        print(f"{'landed acks on / off: agent CPU, % of one core':<52}"
              f"{statistics.mean(r[3] for r in latency_rows):>6.0f} / {statistics.mean(r[2] for r in noack_rows):<6.0f}")
        for rate, achieved, lost, head, tail, ok, mix_p50, mix_p99 in noack_steps:
            print(f"{f'  landed acks off, mix @ {rate} msg/s: lag start->end ms, lost':<52}"
                  f"{head:>6.1f} -> {tail:<6.1f}{lost:>6}  {'steady' if ok else 'GROWING/LOSS'}")
        close_rate_acks = abs(sustained - sustained_noack) <= 0.1 * max(sustained, sustained_noack)
        print(f"{'landed acks on / off: sustained mix (msg/s)':<52}{sustained:>6} / {sustained_noack:<6}"
              f"{'within 10 %':>16}  {'OK' if close_rate_acks else 'MISSED'}")
        for name, (keyed, acked, ack_messages, status) in acks.items():
            outbox = status.get("outbox") or {}
            print(f"{f'  landed acks {name}: messages with a key / acknowledged':<52}{keyed:>6,} / {acked:,} keys in "
                  f"{ack_messages:,} acks; agent: landed {status.get('counters', {}).get('landed', 0):,}, "
                  f"re-sent {status.get('counters', {}).get('resent', 0):,}, unlanded {outbox.get('unlanded')}, "
                  f"deleting {outbox.get('landedAcks')}")
        acks_working = acks["on"][0] > 0 and acks["on"][3].get("outbox", {}).get("landedAcks") == "end_to_end"
        missed = [name for name, ok in (("p99 < 10 ms", p99 < 10), ("no event missing", missing == 0 == missing_off),
                                        ("sustained >= 1000 msg/s", sustained >= 1000),
                                        ("memory < 80 MB", peak_mb < 80),
                                        ("durable windows p99 within 10 %", close_p99),
                                        ("durable windows sustained rate within 10 %", close_rate),
                                        ("landed acks end to end (keys sent, acknowledged)", acks_working),
                                        ("landed acks p99 within 10 %", close_p99_acks),
                                        ("landed acks p50 at most 10 % + 0.1 ms above off", close_p50_acks),
                                        ("landed acks sustained rate within 10 %", close_rate_acks)) if not ok]
        print(f"targets missed: {', '.join(missed)}" if missed else "all targets met")
        return 1 if missed else 0
    finally:
        for proc in (agent, agent_off, agent_nostate, agent_noack):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()
        local.stop()
        local_off.stop()
        local_nostate.stop()
        local_noack.stop()
        cloud.stop()


if __name__ == "__main__":
    sys.exit(main())
