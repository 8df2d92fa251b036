"""Benchmark: the cloud tier on loopback (real Mosquitto, `edgewave-cloud run`, Spark local mode, SQLite).

1. End-to-end delay: from a sensor publishing the observation that completes a match
   (on the gateway's local broker, through the real `edgewave-agent run`, configured
   by `edgewave-cloud push-config`) to the match's count appearing in SQLite, with
   the default 2 s trigger and 2 s landing-file roll (target: every probe under 10 s).
   Baseline in the same run: the part up to ingest (observation -> event durable and
   visible in a closed landing file).
2. Ingest scale-out: how fast 1 and then 2 ingest workers (one shared subscription)
   drain the same backlog the broker queued for them while they were stopped,
   measured from their start to the last event landed. The ratio 2 workers / 1 worker
   is the capacity a second worker adds on this machine (broker and workers share its
   cores).
3. Sustained throughput: how many events/s the Spark job processes in steady state
   (micro-batches after the first, from its progress log), over a landing zone
   pre-filled with copies of the test workload (10 % duplicates, 5 % out of order),
   read in four batches (target: 20,000 events/s). Baselines in the same run: the job
   of an earlier revision (--baseline) on the same landing zone, and the rate ingest
   lands events from 5 publishing gateways (the job keeps up with ingest when the
   ratio job/ingest is >= 1).
4. Landed acknowledgements: ingest's rate (one worker, draining a backlog the broker
   queued while it was stopped, as in 2) when every message carries a key (MQTT 5
   Correlation Data, as an agent's do by default), so that ingest publishes a landed
   acknowledgement per gateway after each group commit, against the same backlog without
   keys (an agent with ``uplink.landed.mode: off``, or an older one). Each of the 5
   gateways' publishing clients subscribes to its landed topic and counts the keys, as
   the agent does. Rounds with and without keys alternate (ABBA), on a broker of their
   own; the rate of a round is its events over the time from the first event received
   (ingestTime) to the last landing-file write (mtime), so process start-up is left out.
   Printed: each round, the mean rates, their ratio with a 90 % interval over the pairs of
   rounds resampled, and ingest's CPU per event (target: with keys within 10 % of without).
5. Small batches: the CPU of the whole Spark job (driver process and JVM) over a landing zone
   of 1,800 events in 26 files read two files a trigger (13 batches of about 130 events, what
   a quiet fleet sends each trigger, where a batch's fixed costs dominate), from start until
   every event is counted; the job of --small-baseline REV on the same landing zone as the
   baseline, runs alternating (ABAB).

    python tests/benchmarks/bench_cloud.py [--quick] [--job-only] [--job-copies N] [--baseline REV]
    python tests/benchmarks/bench_cloud.py --acks-only [--quick] [--ack-rounds N]   # part 4 alone
    python tests/benchmarks/bench_cloud.py --small-batches [--small-baseline REV]   # part 5 alone
"""
from __future__ import annotations

import argparse
import json
import random
import re
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
from broker_process import MosquittoBroker  # noqa: E402
from cloud_harness import (CloudProcess, fill_landing_zone, landing_record, query, total_events,  # noqa: E402
                           wait_for, write_config)
from cloud_workload import make_workload, publish  # noqa: E402
from edgewave.cloud.landing import LandingZone, read_records  # noqa: E402
from edgewave.shared import topics  # noqa: E402
from edgewave.shared.events import encode_event  # noqa: E402
from edgewave.shared.landed_acks import decode_landed, message_key  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402
from paho.mqtt.packettypes import PacketTypes  # noqa: E402
from paho.mqtt.properties import Properties  # noqa: E402

TARGET_DELAY_S = 10.0
TARGET_JOB_RATE = 20_000
"""events/s the Spark job sustains in local mode (checked without --quick)."""
JOB_EVENTS = 30_000
"""Unique events of the workload the job's landing zone holds copies of."""
BASELINE_REVISION = "6491339"
"""The revision whose job the throughput is compared against (--baseline)."""
SMALL_BASELINE_REVISION = "3cf9c4a"
"""The revision whose job the small batches' CPU is compared against (--small-baseline): the job
with a Python StreamingQueryListener and its column expressions made per batch."""
TARGET_ACK_COST = 0.10
"""Ingest's rate with landed acknowledgements may be at most this much below its rate without."""


ALARM = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <alarm> AS SELECT ?e ?level ?room
FROM NAMED WINDOW <w> ON <http://example.org/stream/alarm> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?sensor } ?sensor ex:locatedIn ?room }"""

GATEWAY_CONFIG = f'''@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <http://example.org/> .
ew:config {{ ex:cfg a ew:GatewayConfig ; ew:pattern [ a ew:Pattern ; ew:name "alarm" ; ew:query """{ALARM}""" ] . }}
ew:static {{ ex:s1 ex:locatedIn ex:room1 . }}
'''
XSD_INTEGER = "<http://www.w3.org/2001/XMLSchema#integer>"


def start_agent(tmp: Path, local: MosquittoBroker, cloud: MosquittoBroker) -> subprocess.Popen:
    """The real gateway agent for gw1 between the sensors' broker and the cloud broker."""
    config = tmp / "agent.yaml"
    config.write_text(yaml.safe_dump({
        "gateway": "gw1", "data_dir": str(tmp / "agent-data"), "log_level": "WARNING",
        "local": {"host": local.host, "port": local.port}, "cloud": {"host": cloud.host, "port": cloud.port},
        "config": {"key": "key-of-gw1"}}))
    log = open(tmp / "agent.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "edgewave.agent.cli", "run", "--config", str(config)],
                            stdout=log, stderr=log)


def sensor_publish(local: MosquittoBroker, n: int) -> None:
    """The observation that completes an `alarm` match on its own, published at QoS 1."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(local.host, local.port)
    client.loop_start()
    payload = (f'<http://example.org/alarm{n}> <http://example.org/alarmLevel> "{n}"^^{XSD_INTEGER} .\n'
               f"<http://example.org/alarm{n}> <http://example.org/raisedBy> <http://example.org/s1> .\n")
    client.publish("ew/in/alarm/s1", payload.encode(), qos=1).wait_for_publish(10)
    client.disconnect()
    client.loop_stop()


def end_to_end(tmp: Path, broker: MosquittoBroker, local: MosquittoBroker,
               probes: int) -> tuple[list[float], list[float], float]:
    """Probe delays (to SQLite, to the landing zone) and ingest's landing rate (events/s)."""
    config = write_config(tmp, broker, ingest={"roll_seconds": 2, "commit_interval_ms": 50},
                          spark={"trigger_seconds": 2, "master": "local[*]"})
    cloud = CloudProcess(["run", "--config", str(config)], tmp / "run.log")
    agent = start_agent(tmp, local, broker)
    db, landing = tmp / "cloud.db", tmp / "landing" / "events"
    try:
        pushed = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config),
                                 "--gateway", "gw1", str(_write(tmp / "gw1.trig", GATEWAY_CONFIG))],
                                capture_output=True, text=True, timeout=120)
        if pushed.returncode != 0:
            raise RuntimeError(f"push-config failed: {pushed.stdout}{pushed.stderr}")
        wait_for(lambda: "query started" in cloud.log(), 240, "the Spark query to start", alive=cloud)
        warm = make_workload(unique=2000, duplicates=0, out_of_order=0, seed=1).sequence
        publish(broker.host, broker.port, warm)
        wait_for(lambda: total_events(db) >= len(warm), 300, "warm-up events counted", alive=cloud, interval=0.5)
        to_sqlite, to_landing = [], []
        for n in range(1, probes + 1):
            time.sleep(0.37 * (n % 6))  # sample different phases of the trigger and roll clocks
            level = f'"{n}"^^{XSD_INTEGER}'
            sent = time.monotonic()
            sensor_publish(local, n)
            landed = None
            while True:
                if landed is None and any(r.get("pattern") == "alarm" and {"variable": "level", "value": level}
                                          in r["bindings"] for r in read_records(landing)):
                    landed = time.monotonic() - sent
                if query(db, "SELECT count FROM binding_values WHERE pattern = 'alarm' AND variable = 'level' "
                             "AND value = ?", (level,)):
                    to_sqlite.append(time.monotonic() - sent)
                    to_landing.append(landed if landed is not None else to_sqlite[-1])
                    break
                if time.monotonic() - sent > 60:
                    raise RuntimeError(f"probe {n} not counted within 60 s")
                time.sleep(0.05)
            print(f"  probe {n}: landing {to_landing[-1]:.2f}s, SQLite {to_sqlite[-1]:.2f}s", flush=True)
        # Ingest's landing rate: 5 gateways publishing as fast as they can.
        burst = make_workload(unique=20000 if probes > 5 else 6000, duplicates=0, out_of_order=0, seed=2).sequence
        before = len(read_records(landing))
        started = time.monotonic()
        publish(broker.host, broker.port, burst)
        wait_for(lambda: len(read_records(landing)) >= before + len(burst), 300, "the burst to land", interval=0.2)
        ingest_rate = len(burst) / (time.monotonic() - started)
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        cloud.stop()
    return to_sqlite, to_landing, ingest_rate


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def job_landing_zone(root: Path, events: int, copies: int) -> tuple[int, int, int]:
    """The throughput workload written as ingest lands it: ``copies`` of a workload of ``events`` unique events
    (10 % duplicates, 5 % out of order), each copy with its own ids. Returns (records, unique events, files)."""
    workload = make_workload(unique=events, duplicates=events // 9, out_of_order=events // 20, seed=3)
    zone = LandingZone(root, roll_bytes=1_000_000, roll_seconds=3600)
    start = int(time.time() * 1000)
    n = 0
    for copy in range(copies):
        for event in workload.sequence:
            record = landing_record(event, start + n)
            record["id"] = f"{event['id']}-{copy}"
            zone.append(record, start + n)
            zone.roll_if_due()
            n += 1
    zone.close()
    return n, len(workload.unique) * copies, zone.files_closed


def baseline_source(tmp: Path, revision: str) -> Path:
    """The cloud and shared packages of ``revision``, importable as ``edgewave.*`` with PYTHONPATH=<result>."""
    root = tmp / "baseline"
    (root / "edgewave").mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(HERE.parents[1]), "archive", "--prefix=edgewave/", revision, "cloud",
                              "shared"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def job_throughput(tmp: Path, landing: Path, unique: int, files: int, source: Path | None = None) -> float:
    """Steady-state events/s of the Spark job over a pre-filled landing zone (batches after the first).

    ``source``: run the job of that source tree (see baseline_source) instead of this checkout's.
    """
    tmp.mkdir()
    per_batch = max(1, files // 4)
    config = write_config(tmp, landing_zone=str(landing.parent),
                          spark={"trigger_seconds": 2, "master": "local[*]", "max_files_per_trigger": per_batch,
                                 "shuffle_partitions": 2})
    env = {"PYTHONPATH": str(source)} if source is not None else None
    job = CloudProcess(["spark", "--config", str(config)], tmp / "job.log", env=env)
    try:
        wait_for(lambda: total_events(tmp / "cloud.db") >= unique, 900, "all events counted", alive=job, interval=1.0)
    finally:
        job.stop()
    batches = [(int(b), int(rows), int(ms)) for b, rows, ms in
               re.findall(r"progress batch=(\d+) rows_in=(\d+) .*?batch_ms=(\d+)", job.log())]
    steady = [(rows, ms) for b, rows, ms in batches if b > 0 and rows > 0]
    if not steady:
        raise RuntimeError("no steady-state batches in the job's log")
    rate = sum(r for r, _ in steady) / (sum(ms for _, ms in steady) / 1000)
    print(f"  {'baseline' if source else 'this job'}: {len(steady)} steady batches of "
          f"~{statistics.mean(r for r, _ in steady):,.0f} rows, {statistics.mean(ms for _, ms in steady):,.0f} ms "
          f"each: {rate:,.0f} events/s", flush=True)
    return rate


def small_batches_cpu(tmp: Path, source: Path | None = None) -> float:
    """CPU seconds of the whole job (driver and JVM) from start until every event of a small landing
    zone is counted, two files a trigger. ``source``: the job of that tree (baseline_source)."""
    tmp.mkdir()
    workload = make_workload(unique=1500, duplicates=200, out_of_order=100, gateways=3, seed=5)
    files = fill_landing_zone(tmp / "landing" / "events", workload.sequence)
    config = write_config(tmp, spark={"max_files_per_trigger": 2, "trigger_seconds": 1})
    env = {"PYTHONPATH": str(source)} if source is not None else None
    job = CloudProcess(["spark", "--config", str(config)], tmp / "job.log", env=env)
    try:
        wait_for(lambda: total_events(tmp / "cloud.db") >= len(workload.unique), 600, "all events counted",
                 alive=job, interval=0.5)
        root = psutil.Process(job.proc.pid)
        cpu = sum(_cpu(p) for p in [root, *root.children(recursive=True)])
    finally:
        job.stop()
    batches = len(re.findall(r"aggregates batch=\d+ events=[1-9]", job.log()))
    print(f"  {'baseline' if source else 'this job'}: {cpu:.1f} CPU s for {len(workload.sequence):,} records "
          f"in {files} files, {batches} batches", flush=True)
    return cpu


def ingest_drain_rate(tmp: Path, broker: MosquittoBroker, events: list[dict], workers: int) -> float:
    """Events/s that ``workers`` ingest workers land, draining a backlog queued in their sessions."""
    config = write_config(tmp, broker, ingest={"roll_seconds": 1, "commit_interval_ms": 50},
                          live_feed={"max_rows": 1000})

    def start(tag: str) -> list[CloudProcess]:
        return [CloudProcess(["ingest", "--config", str(config), "--worker", str(i)], tmp / f"ingest-{tag}-{i}.log")
                for i in range(workers)]

    procs = start("subscribe")   # subscribe once, so the broker queues for every worker's session
    for proc in procs:
        wait_for(lambda: "ingest connected" in proc.log(), 30, "ingest to connect", alive=proc)
    for proc in procs:
        proc.stop()
    publish(broker.host, broker.port, events)
    started = time.monotonic()
    procs = start("drain")
    try:
        wait_for(lambda: len(read_records(tmp / "landing" / "events")) >= len(events), 600,
                 f"{workers} worker(s) to land the backlog", interval=0.5)
        elapsed = time.monotonic() - started
    finally:
        for proc in procs:
            proc.stop()
    return len(events) / elapsed


class Gateways:
    """One MQTT client per gateway publishing its events, as the agents would, each subscribed to its
    landed topic and counting the keys ingest acknowledges there (shared/landed_acks.py)."""

    def __init__(self, broker: MosquittoBroker, names: list[str]) -> None:
        self.clients: dict[str, mqtt.Client] = {}
        self.landed: dict[str, int] = {gw: 0 for gw in names}
        self.ack_messages = 0
        self.seq = 0
        subscribed = []
        for gw in names:
            client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=f"bench-acks-{gw}",
                                 protocol=mqtt.MQTTv5)
            client.max_inflight_messages_set(1000)
            client.max_queued_messages_set(0)
            done = threading.Event()
            client.on_subscribe = lambda c, u, mid, rcs, p, done=done: done.set()
            client.on_message = lambda c, u, msg, gw=gw: self._on_landed(gw, msg.payload)
            client.connect(broker.host, broker.port)
            client.loop_start()
            client.subscribe(topics.landed_topic(gw), qos=1)
            subscribed.append(done)
            self.clients[gw] = client
        if not all(done.wait(15) for done in subscribed):
            raise RuntimeError("a gateway could not subscribe to its landed topic")

    def _on_landed(self, gw: str, payload: bytes) -> None:
        self.landed[gw] += len(decode_landed(payload))
        self.ack_messages += 1

    def keys_landed(self) -> int:
        return sum(self.landed.values())

    def publish(self, events: list[dict], keyed: bool) -> None:
        """Every event in a message of its own, with a key like the agent's (``<outbox>:<seq>-<seq>``) or
        without one; returns once the broker has acknowledged them all (PUBACK)."""
        infos = []
        for event in events:
            gw = event["gateway"]
            props = None
            if keyed:
                self.seq += 1
                props = Properties(PacketTypes.PUBLISH)
                props.CorrelationData = message_key(0xbe00 + int(gw[2:]), self.seq, self.seq)
            infos.append(self.clients[gw].publish(topics.events_topic(gw), encode_event(event), qos=1,
                                                  properties=props))
        for info in infos:
            info.wait_for_publish(timeout=120)
            if not info.is_published():
                raise RuntimeError("broker did not acknowledge a publish within 120 s")

    def close(self) -> None:
        for client in self.clients.values():
            client.disconnect()
            client.loop_stop()


def _landed_lines(root: Path) -> tuple[int, float]:
    """Records written under ``root`` (closed and open files) and the latest write's time."""
    lines, last = 0, 0.0
    for path in root.rglob("part-*"):
        try:
            lines += path.read_bytes().count(b"\n")
            last = max(last, path.stat().st_mtime)
        except FileNotFoundError:   # renamed by a roll meanwhile: counted under its new name next time
            return -1, 0.0
    return lines, last


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def ack_round(tmp: Path, broker: MosquittoBroker, gateways: Gateways, events: list[dict], keyed: bool) -> dict:
    """One drain by one ingest worker: events/s from the first receipt to the last write; CPU seconds per
    event of ingest, the broker and this process (the gateways' clients) from the first record landed to
    the last; ingest's share of a core meanwhile; the landed acknowledgements ingest published."""
    tmp.mkdir()
    config = write_config(tmp, broker, ingest={"roll_seconds": 1, "commit_interval_ms": 50},
                          live_feed={"max_rows": 1000})
    gateways.publish(events, keyed)
    keys_before = gateways.keys_landed()
    proc = CloudProcess(["ingest", "--config", str(config)], tmp / "ingest.log")
    landing = tmp / "landing" / "events"
    ingest, mosquitto, me = psutil.Process(proc.proc.pid), psutil.Process(broker.proc.pid), psutil.Process()
    first_seen = None
    try:
        deadline = time.monotonic() + 600
        while True:
            count, last_write = _landed_lines(landing)
            if first_seen is None and count > 0:
                first_seen = (count, time.perf_counter(), _cpu(ingest), _cpu(mosquitto), _cpu(me))
            if count >= len(events):
                break
            if time.monotonic() > deadline or not proc.running:
                raise RuntimeError(f"ingest landed {count} of {len(events)} events; see {tmp / 'ingest.log'}")
            time.sleep(0.25 if first_seen else 0.02)
        end = (count, time.perf_counter(), _cpu(ingest), _cpu(mosquitto), _cpu(me))
        if keyed:
            wait_for(lambda: gateways.keys_landed() - keys_before >= len(events), 30, "every key acknowledged")
    finally:
        proc.stop()
    first = min(json.loads(line)["ingestTime"] for path in landing.rglob("part-*")
                for line in path.read_text().splitlines() if line)
    found = re.search(r"landed_acks=(\d+)", proc.log())
    drained = max(1, end[0] - first_seen[0])
    return {"rate": len(events) / (last_write - first / 1000),
            "ingest_cpu": (end[2] - first_seen[2]) / drained, "broker_cpu": (end[3] - first_seen[3]) / drained,
            "bench_cpu": (end[4] - first_seen[4]) / drained,
            "ingest_busy": (end[2] - first_seen[2]) / (end[1] - first_seen[1]),
            "acks": int(found[1]) if found else -1}


def landed_ack_rates(tmp: Path, events: int, rounds: int) -> dict:
    """Part 4: ingest draining the same backlog with keys and without, in alternating rounds (ABBA)."""
    broker = MosquittoBroker(tmp / "acks-broker").start()
    backlog = make_workload(unique=events, duplicates=0, out_of_order=0, seed=6).sequence
    gateways = Gateways(broker, sorted({e["gateway"] for e in backlog}))
    results: dict[bool, list[dict]] = {True: [], False: []}
    try:
        # ingest's session subscribes once, so that the broker queues the backlog for it; a first
        # drain, not counted, warms the broker, the page cache and the interpreter's files
        (tmp / "acks-warm").mkdir()
        warm = CloudProcess(["ingest", "--config", str(write_config(tmp / "acks-warm", broker))],
                            tmp / "acks-warm" / "ingest.log")
        wait_for(lambda: "ingest connected" in warm.log(), 30, "ingest to connect", alive=warm)
        warm.stop()
        ack_round(tmp / "acks-warm-drain", broker, gateways, backlog[:len(backlog) // 3], True)
        for pair in range(rounds):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for keyed in order:
                r = ack_round(tmp / f"acks-{pair}-{'keys' if keyed else 'none'}", broker, gateways, backlog, keyed)
                results[keyed].append(r)
                print(f"  round {pair + 1}, {'with keys   ' if keyed else 'without keys'}: {r['rate']:,.0f} events/s; "
                      f"CPU per event: ingest {r['ingest_cpu'] * 1e6:,.0f} us ({r['ingest_busy']:.0%} of a core), "
                      f"broker {r['broker_cpu'] * 1e6:,.0f} us, gateways {r['bench_cpu'] * 1e6:,.0f} us; "
                      f"{r['acks']:,} landed acknowledgements", flush=True)
    finally:
        gateways.close()
        broker.stop()
    on = [r["rate"] for r in results[True]]
    off = [r["rate"] for r in results[False]]
    rnd = random.Random(1)
    ratios = []
    for _ in range(2000):
        chosen = [rnd.randrange(rounds) for _ in range(rounds)]
        ratios.append(statistics.mean(on[i] for i in chosen) / statistics.mean(off[i] for i in chosen))
    ratios.sort()
    mean = {(keyed, name): statistics.mean(r[name] for r in results[keyed])
            for keyed in (True, False) for name in ("ingest_cpu", "broker_cpu", "bench_cpu", "ingest_busy")}
    return {"events": len(backlog), "on": on, "off": off, "mean": mean,
            "acks": statistics.mean(r["acks"] for r in results[True]),
            "acks_off": max(r["acks"] for r in results[False]),
            "keys_landed": gateways.keys_landed(),
            "ratio": statistics.mean(on) / statistics.mean(off),
            "interval": (ratios[int(.05 * len(ratios))], ratios[int(.95 * len(ratios)) - 1])}

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer probes and events (about 4 minutes)")
    parser.add_argument("--job-only", action="store_true", help="only the Spark job's throughput (part 3)")
    parser.add_argument("--job-copies", type=int, default=None,
                        help=f"copies of the {JOB_EVENTS:,}-event workload in the job's landing zone "
                             "(default 4, 10 without --quick); batches are a quarter of it")
    parser.add_argument("--baseline", default=BASELINE_REVISION, metavar="REV",
                        help="the git revision whose job runs as the throughput baseline (default %(default)s)")
    parser.add_argument("--acks-only", action="store_true", help="only landed acknowledgements (part 4)")
    parser.add_argument("--small-batches", action="store_true", help="only the job's CPU on small batches (part 5)")
    parser.add_argument("--small-baseline", default=SMALL_BASELINE_REVISION, metavar="REV",
                        help="the git revision whose job runs as the small batches' baseline (default %(default)s)")
    parser.add_argument("--small-rounds", type=int, default=2, metavar="N",
                        help="runs of each job in part 5, alternating (default %(default)s)")
    parser.add_argument("--ack-rounds", type=int, default=None, metavar="N",
                        help="pairs of drains with and without keys in part 4 (default 2, 4 without --quick)")
    args = parser.parse_args(argv)
    ack_events = 10_000 if args.quick else 30_000
    ack_pairs = args.ack_rounds or (2 if args.quick else 4)
    if args.acks_only:
        with tempfile.TemporaryDirectory(prefix="bench-cloud-") as tmpdir:
            print(f"landed acknowledgements: 1 ingest worker draining {ack_events:,} queued events, "
                  f"with keys and without, {ack_pairs} pairs of rounds:", flush=True)
            acks = landed_ack_rates(Path(tmpdir), ack_events, ack_pairs)
        print()
        return 0 if report_acks(acks) or args.quick else 1
    if args.small_batches:
        with tempfile.TemporaryDirectory(prefix="bench-cloud-") as tmpdir:
            tmp = Path(tmpdir)
            source = baseline_source(tmp, args.small_baseline)
            print(f"Spark job on small batches, this job against {args.small_baseline}'s, "
                  f"{args.small_rounds} runs each:", flush=True)
            ours, theirs = [], []
            for i in range(args.small_rounds):
                theirs.append(small_batches_cpu(tmp / f"small-baseline-{i}", source))
                ours.append(small_batches_cpu(tmp / f"small-{i}"))
        ours_runs, theirs_runs = (", ".join(f"{c:.1f}" for c in runs) for runs in (ours, theirs))
        print(f"\nSpark job on small batches: {statistics.mean(ours):.1f} CPU s (runs {ours_runs}); "
              f"the job of {args.small_baseline}: {statistics.mean(theirs):.1f} CPU s (runs {theirs_runs}); "
              f"this/baseline = {statistics.mean(ours) / statistics.mean(theirs):.2f}")
        return 0
    probes = 5 if args.quick else 15
    events = 30_000 if args.quick else 150_000
    copies = args.job_copies or (4 if args.quick else 10)
    with tempfile.TemporaryDirectory(prefix="bench-cloud-") as tmpdir:
        tmp = Path(tmpdir)
        if not args.job_only:
            broker = MosquittoBroker(tmp / "broker").start()
            local = MosquittoBroker(tmp / "local-broker").start()
            try:
                (tmp / "e2e").mkdir()
                print("end-to-end delay (sensor observation -> agent -> cloud -> count in SQLite), trigger 2 s, "
                      "roll 2 s:", flush=True)
                to_sqlite, to_landing, ingest_rate = end_to_end(tmp / "e2e", broker, local, probes)
                backlog = make_workload(unique=events // 5, duplicates=0, out_of_order=0, seed=5).sequence
                drain: dict[int, float] = {}
                for workers in (1, 2):
                    (tmp / f"drain-{workers}").mkdir()
                    drain[workers] = ingest_drain_rate(tmp / f"drain-{workers}", broker, backlog, workers)
                    print(f"  ingest, {workers} worker(s): {drain[workers]:,.0f} events/s draining {len(backlog):,} "
                          f"queued events", flush=True)
            finally:
                local.stop()
                broker.stop()
        landing = tmp / "job-landing" / "events"
        records, unique, files = job_landing_zone(landing, JOB_EVENTS, copies)
        print(f"Spark job throughput, local mode, {records:,} landing records in {files} files "
              f"(batches of {max(1, files // 4)} files):", flush=True)
        baseline_rate = job_throughput(tmp / "job-baseline", landing, unique, files,
                                       baseline_source(tmp, args.baseline))
        job_rate = job_throughput(tmp / "job", landing, unique, files)
        if not args.job_only:
            print(f"landed acknowledgements: 1 ingest worker draining {ack_events:,} queued events, "
                  f"with keys and without, {ack_pairs} pairs of rounds:", flush=True)
            (tmp / "acks").mkdir()
            acks = landed_ack_rates(tmp / "acks", ack_events, ack_pairs)
    print()
    if not args.job_only:
        print(f"end-to-end delay, observation to SQLite: p50 {statistics.median(to_sqlite):.2f} s, "
              f"max {max(to_sqlite):.2f} s over {len(to_sqlite)} probes (target < {TARGET_DELAY_S:.0f} s)")
        print(f"  baseline, up to ingest (observation -> closed landing file): p50 {statistics.median(to_landing):.2f} s, "
              f"max {max(to_landing):.2f} s")
        print(f"ingest scale-out: 2 workers drain {drain[2]:,.0f} events/s, 1 worker {drain[1]:,.0f} events/s: "
              f"{drain[2] / drain[1]:.2f}x")
    print(f"Spark job sustained throughput: {job_rate:,.0f} events/s (steady state over {records:,} records; "
          f"target >= {TARGET_JOB_RATE:,})")
    print(f"  baseline, the job of {args.baseline} on the same landing zone: {baseline_rate:,.0f} events/s; "
          f"job/baseline = {job_rate / baseline_rate:.2f}")
    if not args.job_only:
        print(f"  ingest landing rate from 5 gateways: {ingest_rate:,.0f} events/s; "
              f"job/ingest = {job_rate / ingest_rate:.2f}")
    acks_ok = args.job_only or report_acks(acks)
    delay_ok = args.job_only or max(to_sqlite) < TARGET_DELAY_S
    return 0 if delay_ok and (args.quick or (job_rate >= TARGET_JOB_RATE and acks_ok)) else 1


def report_acks(acks: dict) -> bool:
    """Print part 4's figures; whether ingest's rate with keys is within the target of its rate without."""
    ok = acks["ratio"] >= 1 - TARGET_ACK_COST
    low, high = acks["interval"]
    print(f"ingest with landed acknowledgements (every message keyed): {statistics.mean(acks['on']):,.0f} events/s "
          f"({', '.join(f'{r:,.0f}' for r in acks['on'])})")
    print(f"  without (no keys): {statistics.mean(acks['off']):,.0f} events/s "
          f"({', '.join(f'{r:,.0f}' for r in acks['off'])})")
    print(f"  with / without = {acks['ratio']:.3f}, 90 % interval over the pairs of rounds {low:.3f} - {high:.3f} "
          f"(target >= {1 - TARGET_ACK_COST:.2f}) {'OK' if ok else 'MISSED'}")
    m = acks["mean"]
    for label, name in (("ingest", "ingest_cpu"), ("broker", "broker_cpu"), ("gateways' clients", "bench_cpu")):
        print(f"  CPU per event landed, {label}: {m[True, name] * 1e6:,.0f} us with keys, "
              f"{m[False, name] * 1e6:,.0f} us without")
    print(f"  ingest busy while draining: {m[True, 'ingest_busy']:.0%} of a core with keys, "
          f"{m[False, 'ingest_busy']:.0%} without")
    print(f"  landed acknowledgements per drain of {acks['events']:,} events: {acks['acks']:,.0f} "
          f"(without keys: {acks['acks_off']}); keys the gateways received: {acks['keys_landed']:,}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
