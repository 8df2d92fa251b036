"""A reproducible uplink workload for the cloud tests and benchmark, with its ground truth.

Events are built with the shared codec (``match_event`` / ``significant_event``),
so their ids are the real ones. ``sequence`` is the order gateways publish in:
per gateway mostly in match-time order, with some events moved later (out of
order) and some published twice (duplicates, as a store-and-forward resend
would). The expected aggregates are computed from the unique events in plain
Python, independently of the Spark job.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from edgewave.shared.events import encode_event, match_event, significant_event
from edgewave.shared.topics import events_topic

EX = "http://example.org/"
PATTERNS = {
    "fire": ("room", [f"<{EX}room{i}>" for i in range(1, 9)]),
    "overheat": ("machine", [f"<{EX}machine{i}>" for i in range(1, 5)]),
}
PROPERTIES = [f"<{EX}temperature>", f"<{EX}humidity>"]


@dataclass
class Workload:
    unique: list[dict[str, Any]] = field(default_factory=list)
    sequence: list[dict[str, Any]] = field(default_factory=list)
    out_of_order: int = 0

    @property
    def duplicates(self) -> int:
        return len(self.sequence) - len(self.unique)

    def expected_matches(self) -> dict[tuple[str, str, int], int]:
        return dict(Counter((e["gateway"], e["pattern"], e["windowEnd"] // 60000 * 60000)
                            for e in self.unique if e["kind"] == "match"))

    def expected_bindings(self) -> dict[tuple[str, str, str], int]:
        return dict(Counter((e["pattern"], b["variable"], b["value"])
                            for e in self.unique if e["kind"] == "match" for b in e["bindings"]))

    def expected_significant(self) -> dict[tuple[str, str, str, int], int]:
        return dict(Counter((e["gateway"], e["sensor"], e["property"], e["windowEnd"] // 60000 * 60000)
                            for e in self.unique if e["kind"] == "significant"))

    def expected_delay_counts(self) -> dict[tuple[int, str], int]:
        """Events per (minute of match time, kind): the count column of delay_per_minute."""
        return dict(Counter((e["windowEnd"] // 60000 * 60000, e["kind"]) for e in self.unique))

    def expected_counts(self) -> dict[str, dict]:
        """Every count the job keeps, by table (cloud_harness.aggregate_counts reads them back)."""
        return {"matches_per_minute": self.expected_matches(), "binding_values": self.expected_bindings(),
                "significant_per_minute": self.expected_significant(),
                "delay_per_minute": self.expected_delay_counts()}


def make_workload(*, unique: int = 9000, duplicates: int = 1000, out_of_order: int = 500, gateways: int = 5,
                  seed: int = 7, base_ms: int | None = None, spacing_ms: int = 200) -> Workload:
    """``unique`` events over ``gateways`` gateways, ``duplicates`` resends, ``out_of_order`` moved late."""
    rng = random.Random(seed)
    base = base_ms if base_ms is not None else (int(time.time() * 1000) - 3_600_000) // 60000 * 60000
    names = [f"gw{i}" for i in range(1, gateways + 1)]
    per_gateway: dict[str, list[dict[str, Any]]] = {gw: [] for gw in names}
    for i in range(unique):
        gw = names[i % gateways]
        n = len(per_gateway[gw])
        end = base + n * spacing_ms + rng.randrange(spacing_ms)
        if rng.random() < 0.8:
            pattern = "fire" if rng.random() < 0.7 else "overheat"
            variable, values = PATTERNS[pattern]
            value = values[min(int(rng.expovariate(0.6)), len(values) - 1)]  # skewed: a few rooms dominate
            sensor = f"<{EX}{gw}/sensor{n}>"
            triples = [((sensor, f"<{EX}locatedIn>", value), end - 1000),
                       ((sensor, f"<{EX}alarm>", f'"{i}"'), end)]
            event = match_event(gw, pattern, {variable: value}, end - 1000, end, triples, end + 3)
        else:
            sensor = f"<{EX}{gw}/sensor{rng.randrange(3)}>"
            prop = rng.choice(PROPERTIES)
            result = f'"{rng.uniform(10, 40):.2f}"'
            event = significant_event(gw, sensor, prop, result, end, [(sensor, prop, result)], end + 2)
        per_gateway[gw].append(event)
    workload = Workload()
    for gw in names:
        workload.unique.extend(per_gateway[gw])
    # Out of order: move events later in their gateway's publish order (by 2..150 positions) until
    # exactly ``out_of_order`` events are published after one with a later match time.
    streams = {gw: list(per_gateway[gw]) for gw in names}
    late = {gw: 0 for gw in names}
    while sum(late.values()) < out_of_order:
        gw = rng.choice(names)
        seq = streams[gw]
        k = rng.randrange(len(seq) - 2)
        seq.insert(min(len(seq), k + 2 + rng.randrange(150)), seq.pop(k))
        late[gw] = _count_late(seq)
    # Duplicates: resend an event already sent, later in the same gateway's order.
    for _ in range(duplicates):
        gw = rng.choice(names)
        seq = streams[gw]
        k = rng.randrange(len(seq))
        seq.insert(min(len(seq), k + 1 + rng.randrange(300)), seq[k])
    # Interleave the gateways as they would arrive at the broker.
    cursors = {gw: 0 for gw in names}
    while any(cursors[gw] < len(streams[gw]) for gw in names):
        for gw in names:
            if cursors[gw] < len(streams[gw]):
                workload.sequence.append(streams[gw][cursors[gw]])
                cursors[gw] += 1
    workload.out_of_order = sum(_count_late(streams[gw]) for gw in names)
    return workload


def _count_late(seq: list[dict[str, Any]]) -> int:
    """Events (first copies) published after an event with a later match time."""
    latest, seen, late = -1, set(), 0
    for event in seq:
        if event["id"] in seen:
            continue
        seen.add(event["id"])
        if event["windowEnd"] < latest:
            late += 1
        latest = max(latest, event["windowEnd"])
    return late


def publish(host: str, port: int, events: list[dict[str, Any]], *, rate: float | None = None,
            stop: threading.Event | None = None) -> int:
    """Publish events at QoS 1, one client per gateway (as the agents would); returns how many went out."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    clients: dict[str, mqtt.Client] = {}
    infos = []
    sent = 0
    started = time.monotonic()
    try:
        for event in events:
            if stop is not None and stop.is_set():
                break
            gw = event["gateway"]
            if gw not in clients:
                client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=f"test-agent-{gw}",
                                     protocol=mqtt.MQTTv5)
                client.max_inflight_messages_set(1000)
                client.max_queued_messages_set(0)
                client.connect(host, port)
                client.loop_start()
                clients[gw] = client
            infos.append(clients[gw].publish(events_topic(gw), encode_event(event), qos=1))
            sent += 1
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        for info in infos:
            info.wait_for_publish(timeout=120)
            if not info.is_published():
                raise RuntimeError("broker did not acknowledge a publish within 120 s")
    finally:
        for client in clients.values():
            client.disconnect()
            client.loop_stop()
    return sent
