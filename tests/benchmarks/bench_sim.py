"""Benchmark: can one simulator process drive 20 gateways x 50 sensors at 1 msg/sensor/s?

Figures (all against a real Mosquitto on loopback, started here):
  baseline   raw paho publishes of prebuilt payloads of the same size, one connection
  generate   the simulator's stream alone (state machines + N-Triples encoding), no I/O;
             also per payload format (--format senml, zigbee2mqtt, tasmota, esphome)
  publish    the simulator at --speed max to the broker, 20 connections (one per gateway)
  real time  the simulator at --speed 1 for the 1,000 msg/s load; a subscriber counts arrivals
  replay     `edgewave-sim replay --speed 1 --realtime` of a recorded run: how far each message's
             arrival at a subscriber is from its recorded time (relative to the run's median
             offset), next to a bare `time.sleep` loop on the same schedule (the platform's floor)
Target: the real-time run keeps up (>= 97 % of the scheduled messages per wall second,
none lost), full-speed publishing has headroom over 1,000 msg/s, and the replay keeps 95 % of
its messages within 5 ms of their recorded relative time.

    python tests/benchmarks/bench_sim.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from broker_process import MosquittoBroker  # noqa: E402

from edgewave.firmware_sim.clock import Pacer  # noqa: E402
from edgewave.firmware_sim.config import load_config  # noqa: E402
from edgewave.firmware_sim.publisher import MqttSink  # noqa: E402
from edgewave.firmware_sim.simulation import Simulation  # noqa: E402

GATEWAYS, RATE = 20, 1.0


def simulation(seconds: float, payload_format: str = "ntriples") -> Simulation:
    return Simulation(load_config(None, gateways=GATEWAYS, rate=RATE, payload_format=payload_format),
                      duration_s=seconds)


class Counter:
    def __init__(self, broker: MosquittoBroker) -> None:
        self.count = 0
        self.arrivals: list[float] = []  # time.monotonic() of each message
        ready = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-sim-counter")
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe("ew/in/#")
        self.client.on_subscribe = lambda c, u, m, rc, p: ready.set()
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        ready.wait(10)

    def _on_message(self, client, userdata, msg) -> None:
        self.arrivals.append(time.monotonic())
        self.count += 1

    def wait_for(self, n: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count < n and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def bench_generate(seconds: float, payload_format: str = "ntriples") -> tuple[int, float, list]:
    sim = simulation(seconds, payload_format)
    began = time.perf_counter()
    messages = list(sim.messages())
    return len(messages), time.perf_counter() - began, messages


def bench_baseline(broker: MosquittoBroker, messages: list) -> float:
    payloads = [(m.topic, m.payload) for m in messages]
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-sim-baseline")
    client.connect(broker.host, broker.port)
    client.loop_start()
    time.sleep(0.2)
    began = time.perf_counter()
    info = None
    for topic, payload in payloads:
        info = client.publish(topic, payload, qos=0)
    info.wait_for_publish(60)
    elapsed = time.perf_counter() - began
    client.disconnect()
    client.loop_stop()
    return len(payloads) / elapsed


def pump(sim: Simulation, broker: MosquittoBroker, speed: float | None) -> tuple[int, float, float, MqttSink]:
    config = sim.config
    sink = MqttSink({gw.id: gw.broker.__class__(**{**gw.broker.__dict__, "host": broker.host, "port": broker.port})
                     for gw in config.gateways}, paced=speed is not None)
    sink.open()
    pacer = Pacer(speed, sleep=sink.idle)
    count = 0
    began = time.perf_counter()
    for message in sim.messages():
        pacer.wait(message.ms)
        sink.send(message)
        count += 1
    sink.close()
    return count, time.perf_counter() - began, pacer.max_lateness_s, sink


def deviations_ms(times_s: list[float], scheduled_ms: list[int]) -> list[float]:
    """|actual - scheduled - median offset| per message, in ms, sorted."""
    offsets = [t * 1000.0 - ms for t, ms in zip(times_s, scheduled_ms)]
    center = statistics.median(offsets)
    return sorted(abs(o - center) for o in offsets)


def describe(devs: list[float]) -> str:
    def q(p: float) -> float:
        return devs[min(len(devs) - 1, int(len(devs) * p))]
    return f"p50 {q(0.5):.2f} ms, p95 {q(0.95):.2f} ms, p99 {q(0.99):.2f} ms, max {devs[-1]:.1f} ms"


def bare_sleep_loop(scheduled_ms: list[int]) -> list[float]:
    """The platform's floor: wake at each scheduled time with nothing but time.sleep."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        fifo = True
    except (AttributeError, PermissionError, OSError):
        fifo = False
    woke = []
    origin = time.monotonic() - scheduled_ms[0] / 1000.0
    for ms in scheduled_ms:
        delay = origin + ms / 1000.0 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        woke.append(time.monotonic())
    if fifo:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return woke


def bench_replay_timing(broker: MosquittoBroker, seconds: float, tmp: Path) -> float:
    """Replay a recorded run at speed 1; returns the p95 deviation in ms."""
    from edgewave.firmware_sim.recording import read_messages

    recording = tmp / "replay.tsv"
    sim = [sys.executable, "-m", "edgewave.firmware_sim.cli", "--log-level", "WARNING"]
    subprocess.run(sim + ["record", "--duration", str(int(seconds)), "--rate", "0.5", "--out", str(recording)],
                   check=True, capture_output=True)
    scheduled = [m.ms for m in read_messages(recording)]
    counter = Counter(broker)
    subprocess.run(sim + ["replay", str(recording), "--speed", "1", "--realtime", "--broker",
                          f"{broker.host}:{broker.port}"], check=True, capture_output=True)
    counter.wait_for(len(scheduled))
    counter.close()
    replay = deviations_ms(counter.arrivals, scheduled)
    floor = deviations_ms(bare_sleep_loop(scheduled), scheduled)
    print(f"replay   : {len(scheduled)} messages over {seconds:.0f} s, arrival vs recorded time: {describe(replay)}")
    print(f"           baseline, a bare time.sleep loop on the same schedule:   {describe(floor)}")
    return replay[min(len(replay) - 1, int(len(replay) * 0.95))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args(argv)
    gen_seconds, rt_seconds = (20.0, 5.0) if args.quick else (60.0, 15.0)
    target = GATEWAYS * 50 * RATE
    print(f"fleet: {GATEWAYS} gateways x 50 sensors at {RATE:g} msg/sensor/s = {target:.0f} msg/s scheduled")

    n, elapsed, messages = bench_generate(gen_seconds)
    gen_rate = n / elapsed
    print(f"generate : {n} messages ({gen_seconds:.0f} s of sim time) in {elapsed:.2f} s = {gen_rate:,.0f} msg/s")
    for fmt in ("senml", "zigbee2mqtt", "tasmota", "esphome"):
        n_fmt, elapsed_fmt, _ = bench_generate(gen_seconds / 4, fmt)
        print(f"           --format {fmt}: {n_fmt / elapsed_fmt:,.0f} msg/s")

    with tempfile.TemporaryDirectory() as tmp:
        broker = MosquittoBroker(Path(tmp) / "broker").start()
        try:
            base_rate = bench_baseline(broker, messages)
            print(f"baseline : raw paho publish of the same payloads: {base_rate:,.0f} msg/s")

            count, elapsed, _, sink = pump(simulation(gen_seconds), broker, None)
            pub_rate = count / elapsed
            print(f"publish  : simulator at --speed max, {GATEWAYS} connections: {pub_rate:,.0f} msg/s "
                  f"({pub_rate / base_rate:.2f} x baseline), dropped {sink.dropped}")

            counter = Counter(broker)
            count, elapsed, late, sink = pump(simulation(rt_seconds), broker, 1.0)
            counter.wait_for(count)
            counter.close()
            achieved = count / elapsed
            print(f"real time: {count} messages in {elapsed:.2f} s wall for {rt_seconds:.0f} s sim = "
                  f"{achieved:,.0f} msg/s, max lateness {late * 1000:.1f} ms, received {counter.count}, "
                  f"dropped {sink.dropped}")
            received = counter.count
            replay_p95 = bench_replay_timing(broker, 5.0 if args.quick else 20.0, Path(tmp))
        finally:
            broker.kill()

    ok = achieved >= 0.97 * target and received == count and pub_rate > target and replay_p95 <= 5.0
    print(f"target {'met' if ok else 'MISSED'}: real-time rate {achieved / target:.1%} of scheduled, "
          f"full-speed headroom {pub_rate / target:.1f} x the 1,000 msg/s load, "
          f"replay p95 {replay_p95:.2f} ms (<= 5 ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
