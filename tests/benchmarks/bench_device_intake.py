"""Benchmark: the agent's sustained rate with Zigbee2MQTT payloads against N-Triples, in one run.

Two ``edgewave-agent run`` processes, each with a local broker of its own and the same config
document (a pattern over air temperature, and the shipped Zigbee2MQTT mapping preset), get
the same stream of readings from 50 sensors: one agent as N-Triples on
``ew/in/building/<sensor>``, the other as a Zigbee2MQTT device publishes it on
``zigbee2mqtt/<sensor>`` (``{"temperature": 21.3, "battery": 90, "linkquality": 120}``).
The N-Triples are the very triples the mapping makes of the JSON (the mapping is run here
to write them), so both engines do the same work and only the intake differs. One reading
in 20 is hot and completes the pattern; its match, numbered by its value, is timed from
publish to uplink. The rate is stepped up (the two agents take turns at each step) until
the lag at the end of a step exceeds the lag at its start by more than 50 ms or a match is
missing: the last good step is the agent's sustained rate. Printed: each step's lag and the
agent's CPU per message, the sustained rates and their ratio (target: the Zigbee2MQTT
agent within 20 % of the N-Triples one).

    python tests/benchmarks/bench_device_intake.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import psutil  # noqa: E402
from bench_agent import Receiver, _client, percentile, publish_paced, start_agent, wait_arrivals  # noqa: E402
from broker_process import MosquittoBroker  # noqa: E402

from edgewave.agent.mapping import compile_mappings, preset_triples  # noqa: E402
from edgewave.shared.configdoc import build_config_document  # noqa: E402
from edgewave.shared.ntriples import serialize  # noqa: E402
from edgewave.shared.uplink_batch import decode_batch, is_batch  # noqa: E402

STREAM = "http://example.org/stream/building"
BASE = "http://example.org/gw1/"
HOT = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX ew: <https://edgewave.dev/ns#>
REGISTER RSTREAM <hot> AS SELECT ?sensor ?t
FROM NAMED WINDOW <w> ON <http://example.org/stream/building> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?o sosa:observedProperty ew:AirTemperature ; sosa:madeBySensor ?sensor ;
                        sosa:hasSimpleResult ?t . } FILTER(?t > 500) }"""
MAPPINGS = preset_triples("zigbee2mqtt", stream=STREAM, base_iri=BASE)
ZIGBEE = next(m for m in compile_mappings(MAPPINGS) if m.topic_filter == "zigbee2mqtt/+")
HOT_FROM = 1000.0           # a hot reading's value is HOT_FROM + its number
TARGET_RATIO = 0.8


def reading(n: int) -> tuple[str, dict, int | None]:
    """The n-th reading: (device, Zigbee2MQTT payload, its number if it completes the pattern)."""
    device = f"room{n % 50}-temperature"
    if n % 20 == 0:
        return device, {"temperature": HOT_FROM + n, "battery": 90, "linkquality": 120}, n
    return device, {"temperature": round(21.0 + (n % 7) * 0.1, 1), "battery": 90, "linkquality": 120}, None


def zigbee_message(n: int) -> tuple[str, bytes, int | None]:
    device, payload, number = reading(n)
    return f"zigbee2mqtt/{device}", json.dumps(payload).encode(), number


def ntriples_message(n: int) -> tuple[str, bytes, int | None]:
    """The same reading as the triples the mapping makes of it (at the publish time, as the agent would)."""
    device, payload, number = reading(n)
    triples = ZIGBEE.map(json.dumps(payload).encode(), f"zigbee2mqtt/{device}", int(time.time() * 1000))
    return f"ew/in/building/{device}", ("\n".join(serialize(t) for t in triples) + "\n").encode(), number


def hot_numbers(payload: bytes) -> list[int]:
    events = decode_batch(payload) if is_batch(payload) else [json.loads(payload)]
    out = []
    for e in events:
        if e.get("pattern") == "hot":
            value = {b["variable"]: b["value"] for b in e["bindings"]}["t"]
            out.append(int(float(value.split('"')[1]) - HOT_FROM))
    return out


def step(pub, recv: Receiver, make, rate: int, seconds: float, pid: int, n0: int) -> tuple:  # noqa: ANN001
    """One step for one agent: (ok, missing, lag at start and end in ms, p99 ms, agent CPU µs per message)."""
    proc = psutil.Process(pid)
    cpu0 = sum(proc.cpu_times()[:2])
    sent = publish_paced(pub, rate, seconds, make, start_n=n0)
    wait_arrivals(recv, set(sent), 20)
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    got = {n: recv.arrivals[n] - t for n, t in sent.items() if n in recv.arrivals}
    ordered = [got[n] * 1000 for n in sorted(got)]
    quarter = max(1, len(ordered) // 4)
    head = statistics.median(ordered[:quarter]) if ordered else float("inf")
    tail = statistics.median(ordered[-quarter:]) if ordered else float("inf")
    ok = len(got) == len(sent) and tail - head < 50
    p99 = percentile(ordered, .99) if ordered else float("inf")
    return ok, len(sent) - len(got), head, tail, p99, cpu / (rate * seconds) * 1e6


def warm_up(pub, recv: Receiver, make) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 30
    n = 0
    while time.monotonic() < deadline and not recv.arrivals:
        topic, payload, _ = make(n)
        pub.publish(topic, payload, qos=1)
        n += 20
        time.sleep(0.2)
    if not recv.arrivals:
        raise RuntimeError("an agent produced no events")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    seconds = 2.0 if args.quick else 6.0
    rates = [300, 600] if args.quick else [500, 1000, 1500, 2000, 2500, 3000, 4000]

    work = Path(tempfile.mkdtemp(prefix="bench-device-intake-"))
    brokers = {name: MosquittoBroker(work / name).start() for name in ("local-nt", "local-z", "cloud")}
    bootstrap = work / "config.trig"
    bootstrap.write_text(build_config_document({"hot": HOT}, [], [], mappings=MAPPINGS))
    log = open(work / "agents.log", "wb")
    agents = {}
    try:
        sides = {}
        for name, gateway, broker, make in (("N-Triples", "gw1", "local-nt", ntriples_message),
                                            ("Zigbee2MQTT", "gw2", "local-z", zigbee_message)):
            agent = start_agent(work, gateway, brokers[broker], brokers["cloud"], bootstrap,
                                {"significance": {"deadband_absolute": 1.0, "max_silence_s": 3600}}, log)
            agents[name] = agent
            pub = _client(brokers[broker], f"bench-{gateway}-devices")
            pub.connect(brokers[broker].host, brokers[broker].port)
            pub.loop_start()
            recv = Receiver(brokers["cloud"], f"ew/{gateway}/events", hot_numbers)
            warm_up(pub, recv, make)
            sides[name] = (pub, recv, make, agent.pid)
        print(f"device intake: 50 sensors, 1 reading in 20 completes the pattern, steps of {seconds:g} s")
        print(f"  {'rate/s':>7} {'intake':12} {'ok':>3} {'missing':>7} {'lag start':>9} {'lag end':>8} "
              f"{'p99 ms':>7} {'CPU µs/msg':>10}")
        sustained = dict.fromkeys(sides, 0)
        running = set(sides)
        n0 = 1_000_000
        for rate in rates:
            for name in list(sides):
                if name not in running:
                    continue
                pub, recv, make, pid = sides[name]
                ok, missing, head, tail, p99, cpu_us = step(pub, recv, make, rate, seconds, pid, n0)
                print(f"  {rate:7d} {name:12} {'yes' if ok else 'no':>3} {missing:7d} {head:9.1f} {tail:8.1f} "
                      f"{p99:7.1f} {cpu_us:10.0f}")
                if ok:
                    sustained[name] = rate
                else:
                    running.discard(name)
                time.sleep(1.0)
            n0 += int(rate * seconds) + 20
            if not running:
                break
        ratio = sustained["Zigbee2MQTT"] / sustained["N-Triples"] if sustained["N-Triples"] else 0.0
        capped = " (both carried every step: raise the steps to find the limit)" if len(running) == 2 else ""
        print(f"sustained: N-Triples {sustained['N-Triples']}/s, Zigbee2MQTT {sustained['Zigbee2MQTT']}/s, "
              f"ratio {ratio:.2f} (target >= {TARGET_RATIO}){capped}")
        return 0 if ratio >= TARGET_RATIO else 1
    finally:
        for agent in agents.values():
            agent.terminate()
            agent.wait(30)
        for broker in brokers.values():
            broker.kill()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
