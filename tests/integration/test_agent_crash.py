"""Nothing lost on a crash: the agent's windows survive a restart (agent/window_journal.py).

The demo's fire scenario (configs/scenarios/demo.yaml, recorded by ``edgewave-sim record``)
is published at its real pace, QoS 1, to a real local Mosquitto; the agent (the real
``edgewave-agent run``, the demo's config document as bootstrap) is stopped at ten seeded
random points, at least three of them inside a fire (between its first and last reading,
when a partial match waits in a window), and started again about a second later. The
cloud side is the cloud broker as the other agent tests observe it (``CloudWatcher``, no
Spark: the cloud's dedup by event id is done here). Checked against a run without stops,
beside it on brokers of its own:

- the matches that arrive, deduplicated by event id, are the reference run's, each once
  (compared by pattern and bindings: arrival times, and with them ids, differ per run),
  plus any "sensor silent" absence whose deadline fell while the agent was down (absences
  are timed by arrival: what sensors publish meanwhile arrives after the restart;
  docs/agent.md, "Durable windows"), counted and printed;
- an event arrives twice only if it was still in the outbox file when the agent was
  stopped (its PUBACK not yet recorded): nothing the agent had recorded as acknowledged is
  sent again. How many arrived twice is printed.

Variants: SIGKILL; SIGTERM; SIGKILL with the local broker restarted while the agent is down
(the test's sensors hold their messages while the broker is away, as a QoS 1 sensor with a
buffer would). Bad state files, and the wall clock stepped while the agent is down, follow.
"""
from __future__ import annotations

import json
import random
import signal
import sqlite3
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from agent_harness import AgentProcess, CloudWatcher, client, wait_for
from broker_process import MosquittoBroker
from fault_rig import ABSENCE_PATTERNS, CONFIG, FIRES_S, OUTAGE_SLACK_MS, Sensors, record_demo

from edgewave.agent.config import OutboxSettings

pytestmark = pytest.mark.paced

REPO = Path(__file__).resolve().parents[2]
SEED = 20261125
KILLS = 10
DOWN_S = 1.0
LEAD_S = 7.0     # s between a stop and the next one inside a fire


@pytest.fixture(scope="module")
def demo_messages(tmp_path_factory) -> list[tuple[float, str, bytes]]:
    """The demo scenario's messages for gw1: (seconds from the start, topic, payload)."""
    return record_demo(tmp_path_factory.mktemp("recording")).messages


def match_key(event: dict) -> tuple:
    return event["pattern"], tuple(sorted((b["variable"], b["value"]) for b in event["bindings"]))


def pending_ids(agent: AgentProcess) -> set[str]:
    """The events still in the stopped agent's outbox: sent again at its next start."""
    path = agent.data_dir / "outbox.db"
    if not path.exists():
        return set()
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT event_id FROM events")}
    finally:
        conn.close()


def kill_points(seed: int = SEED, count: int = KILLS) -> list[float]:
    """Seeded random times (s) in the one-minute scenario, three inside fires. A stop comes
    3.5 s after the one before at least (a restart takes about two), and LEAD_S before one
    inside a fire: a restart slowed by a loaded machine then delays no stop out of its fire
    (the second fire lasts 1.6 s)."""
    rng = random.Random(seed)
    first = rng.uniform(15.3, 16.7)
    inside = [first, rng.uniform(first + LEAD_S, 23.7), rng.uniform(35.2, 35.8)]
    # the rest where no stop inside a fire follows within LEAD_S
    spans = [(2.0, first - LEAD_S), (inside[1] + 3.5, inside[2] - LEAD_S), (inside[2] + 3.5, 56.0)]
    while True:
        others = []
        for _ in range(count - 3):
            low, high = rng.choice(spans)
            others.append(rng.uniform(low, high))
        points = sorted(inside + others)
        if all(b - a >= 3.5 for a, b in zip(points, points[1:])):
            return points


def run_demo(workdir: Path, local: MosquittoBroker, cloud: MosquittoBroker, messages: list,
             stops: list[float], how: str = "kill", restart_broker: bool = False) -> dict:
    """The demo scenario through one agent, stopped at ``stops`` (s); what the cloud saw."""
    watcher = CloudWatcher(cloud)
    agent = AgentProcess(workdir, local, cloud, {"config": {"bootstrap": str(CONFIG)},
                                                 "significance": {"enabled": False}}).start()
    sensors = Sensors(local, messages)
    resendable: set[str] = set()
    outages: list[tuple[int, int]] = []          # epoch ms: stopped, subscribed again
    inside_fire = 0
    try:
        for at in stops:
            delay = sensors.started + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            stopped_at = time.monotonic() - sensors.started
            inside_fire += any(a < stopped_at < b for a, b in FIRES_S)
            down_ms = int(time.time() * 1000)
            if how == "kill":
                agent.kill()
            else:
                assert agent.stop() == 0
            down = time.monotonic()
            resendable |= pending_ids(agent)
            if restart_broker:
                sensors.pause()
                local.stop()
                local.start()
                wait_for(sensors.client.is_connected, 15, "the sensors back on the restarted broker")
                sensors.running.set()
            time.sleep(max(0.0, DOWN_S - (time.monotonic() - down)))
            agent.start()
            outages.append((down_ms, int(time.time() * 1000)))
        assert sensors.done.wait(120), "the sensors finished the scenario"
        wait_for(lambda: agent.state().get("outbox", {}).get("depth") == 0
                 and agent.counters().get("messages_in", 0) > 0, 60, "an empty outbox")
        time.sleep(1.0)
        with watcher.lock:
            events = [e for e in watcher.events if e["kind"] == "match"]
        counters = agent.counters()
        log = agent.log()
    finally:
        sensors.close()
        agent.stop()
        watcher.close()
    return {"events": events, "resendable": resendable, "inside_fire": inside_fire, "counters": counters,
            "log": log, "outages": outages}


def reference_run(work: Path, messages: list) -> Counter:
    """The matches of a run without stops, on brokers of its own: the ground truth. It runs
    beside the run with stops (both at the scenario's pace, which leaves the CPU mostly idle)."""
    local, cloud = MosquittoBroker(work / "local").start(), MosquittoBroker(work / "cloud").start()
    try:
        run = run_demo(work / "agent", local, cloud, messages, [])
    finally:
        local.stop()
        cloud.stop()
    truth = Counter(match_key(e) for e in {e["id"]: e for e in run["events"]}.values())
    assert sum(n for (pattern, _), n in truth.items() if pattern == "fire") == 5    # demo.yaml's five fires
    return truth


def check_against_reference(run: dict, reference: Counter, what: str) -> None:
    events = run["events"]
    arrivals = Counter(e["id"] for e in events)
    unique = {e["id"]: e for e in events}
    got = Counter(match_key(e) for e in unique.values())
    # an absence that fell due while the agent was down (fault_rig.ABSENCE_PATTERNS says why)
    explained = Counter(match_key(e) for e in unique.values() if e["pattern"] in ABSENCE_PATTERNS and any(
        down <= e["windowEnd"] <= back + OUTAGE_SLACK_MS for down, back in run["outages"]))
    extra = got - reference
    assert reference - got == Counter() and extra - explained == Counter(), (
        f"{what}: missing {reference - got}, extra {extra - explained}")
    twice = {i for i, n in arrivals.items() if n > 1}
    assert twice <= run["resendable"], f"{what}: events sent again after their deletion was recorded: " \
                                       f"{twice - run['resendable']}"
    assert "Traceback" not in run["log"]
    print(f"{what}: {len(unique)} matches as in the reference run ({sum(extra.values())} absence(s) more, "
          f"fallen due while the agent was down); {len(twice)} event(s) arrived twice "
          f"(still in the outbox at a stop); restored {run['counters'].get('state_restored')} messages, "
          f"skipped {run['counters'].get('redelivered_skipped')} redeliveries in the last run")


@pytest.mark.realtime    # the stops are timed against the scenario's fires (kill_points leaves a slow restart room)
@pytest.mark.parametrize("how, restart_broker", [("kill", False), ("term", False), ("kill", True)],
                         ids=["sigkill", "sigterm", "sigkill-local-broker-restarted"])
def test_stops_in_the_demo_fire_scenario_lose_and_duplicate_no_match(tmp_path, mqtt_broker, mqtt_broker2,
                                                                      demo_messages, how, restart_broker):
    stops = kill_points(SEED + len(how) + restart_broker)
    with ThreadPoolExecutor(1) as pool:
        reference = pool.submit(reference_run, tmp_path / "reference", demo_messages)
        run = run_demo(tmp_path / "agent", mqtt_broker, mqtt_broker2, demo_messages, stops, how, restart_broker)
        truth = reference.result()
    assert run["inside_fire"] >= 3, f"only {run['inside_fire']} stops fell inside a fire"
    check_against_reference(run, truth, f"{how}{' + broker restart' if restart_broker else ''}")


def wait_acknowledged(agent: AgentProcess) -> None:
    """A message that made no match is journaled, and acknowledged, once its group commits
    (outbox.group_commit_s, the shipped default): only then is it the agent's, not the broker's."""
    def acknowledged() -> bool:
        agent.proc.send_signal(signal.SIGUSR1)      # a fresh state file soon, as `edgewave-agent status` asks
        state = agent.state()
        counters = state.get("counters") or {}
        return ((state.get("outbox") or {}).get("grouped") == 0
                and counters.get("messages_acknowledged", 0) >= counters.get("messages_in", 1))

    wait_for(acknowledged, OutboxSettings().group_commit_s + 20,
             lambda: f"the group committed and its messages acknowledged; status: {agent.state()}; "
                     f"log:\n{agent.log(since_start=True)}", interval=0.2)
    time.sleep(0.3)                          # the acknowledgement from the agent's socket to the broker

# -- bad state never stops a gateway ----------------------------------------------------------------

def _garbage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[200:6000] = bytes(random.Random(1).randrange(256) for _ in range(5800))
    path.write_bytes(bytes(data))


def _truncated(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _truncated_rows(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE journal SET payload = substr(payload, 1, length(payload) / 2)")
    conn.commit()
    conn.close()


def _foreign(name: str, value: str):
    def change(path: Path) -> None:
        conn = sqlite3.connect(path)
        conn.execute("UPDATE journal_meta SET value = ? WHERE name = ?", (value, name))
        conn.commit()
        conn.close()
    return change


@pytest.mark.parametrize("damage", [_garbage, _truncated, _truncated_rows, _foreign("format", "99"),
                                    _foreign("engine", "0.0.1"), _foreign("config_version", "41")],
                         ids=["garbage-bytes", "truncated-file", "truncated-rows", "other-format",
                              "other-agent-version", "other-config-version"])
def test_bad_state_is_discarded_logged_counted_and_the_agent_runs(tmp_path, mqtt_broker, mqtt_broker2, damage):
    watcher = CloudWatcher(mqtt_broker2)
    overrides = {"config": {"bootstrap": str(CONFIG)}, "significance": {"enabled": False}}
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2, overrides).start()
    sensors = client(mqtt_broker, "bad-state-sensors")
    sensors.loop_start()
    wait_for(sensors.is_connected, 15, "sensors connected")

    def publish(topic: str, payload: bytes) -> None:
        sensors.publish(topic, payload, qos=1).wait_for_publish(timeout=15)

    room3 = "http://example.org/gw1/"
    try:
        publish("ew/in/building/gw1-room3-smoke", smoke_message(1))
        wait_for(lambda: agent.counters().get("messages_in") == 1, 30, "the smoke message handled")
        wait_acknowledged(agent)
        agent.kill()
        outbox = agent.data_dir / "outbox.db"
        conn = sqlite3.connect(outbox)          # the WAL into the file, so that the damage hits the rows
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        damage(outbox)
        agent.start()
        wait_for(lambda: agent.counters().get("state_discarded") == 1, 30,
                 lambda: f"state_discarded counted; log:\n{agent.log(since_start=True)}")
        log = agent.log(since_start=True)
        assert log.count("event=state_discarded") == 1 and "Traceback" not in log
        publish("ew/in/building/gw1-room3-temperature", hot_message(1))
        publish("ew/in/building/gw1-room3-smoke", smoke_message(2))
        wait_for(lambda: len(watcher.matches("fire")) >= 1, 30, "the agent matches after discarding its state")
        assert {e["bindings"][0]["value"] for e in watcher.matches("fire")} == {f"<{room3}room3>"}
        assert len({e["id"] for e in watcher.matches("fire")}) == 1     # the discarded smoke joined nothing
        assert agent.proc.poll() is None
    finally:
        sensors.disconnect()
        sensors.loop_stop()
        agent.stop()
        watcher.close()


def smoke_message(n: int) -> bytes:
    """A room 3 smoke alarm in the demo's vocabulary (plain SOSA)."""
    obs = f"<http://example.org/gw1/obs/room3-smoke/test{n}>"
    return (f"{obs} <http://www.w3.org/ns/sosa/observedProperty> <https://edgewave.dev/ns#Smoke> .\n"
            f"{obs} <http://www.w3.org/ns/sosa/madeBySensor> <http://example.org/gw1/sensor/room3-smoke> .\n"
            f'{obs} <http://www.w3.org/ns/sosa/hasSimpleResult> "true"^^<http://www.w3.org/2001/XMLSchema#boolean> .\n'
            ).encode()


def hot_message(n: int, celsius: float = 70.0) -> bytes:
    obs = f"<http://example.org/gw1/obs/room3-temperature/test{n}>"
    return (f"{obs} <http://www.w3.org/ns/sosa/observedProperty> <https://edgewave.dev/ns#AirTemperature> .\n"
            f"{obs} <http://www.w3.org/ns/sosa/madeBySensor> <http://example.org/gw1/sensor/room3-temperature> .\n"
            f'{obs} <http://www.w3.org/ns/sosa/hasSimpleResult> "{celsius}"^^<http://www.w3.org/2001/XMLSchema#decimal> .\n'
            ).encode()


# -- the wall clock stepped while the agent is down --------------------------------------------------

HOUR_MS, DAY_MS = 3_600_000, 86_400_000


class SmokeThenHot:
    """A room 3 smoke alarm handled (and acknowledged), the agent killed and started again
    (with ``restart_env`` for the test hook), then a hot reading in room 3."""

    def __init__(self, tmp_path: Path, local: MosquittoBroker, cloud: MosquittoBroker, monkeypatch,
                 state: dict | None = None, start_env: str = "", restart_env: str = "") -> None:
        self.watcher = CloudWatcher(cloud)
        overrides = {"config": {"bootstrap": str(CONFIG)}, "significance": {"enabled": False}, "state": state or {}}
        monkeypatch.setenv("EDGEWAVE_AGENT_CLOCK", start_env)
        self.agent = AgentProcess(tmp_path / "agent", local, cloud, overrides).start()
        self.sensors = client(local, "smoke-then-hot-sensors")
        self.sensors.loop_start()
        try:
            wait_for(self.sensors.is_connected, 15, "sensors connected")
            self.sensors.publish("ew/in/building/gw1-room3-smoke", smoke_message(1), qos=1).wait_for_publish(15)
            wait_for(lambda: self.agent.counters().get("messages_in") == 1, 30, "the smoke message handled")
            wait_acknowledged(self.agent)
            self.agent.kill()
            monkeypatch.setenv("EDGEWAVE_AGENT_CLOCK", restart_env)
            time.sleep(DOWN_S)
            self.agent.start()
            self.sensors.publish("ew/in/building/gw1-room3-temperature", hot_message(1),
                                 qos=1).wait_for_publish(15)
            wait_for(lambda: self.agent.counters().get("messages_in") == 1, 30, "the hot reading handled")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.sensors.disconnect()
        self.sensors.loop_stop()
        self.agent.stop()
        self.watcher.close()


@pytest.mark.parametrize("offset_ms, boot, expected", [
    (-HOUR_MS, "same", "restored"), (DAY_MS, "same", "restored"),
    (-HOUR_MS, "other", "discarded"), (DAY_MS, "other", "expired")],
    ids=["back-1h-same-boot", "forward-1d-same-boot", "back-1h-other-boot", "forward-1d-other-boot"])
def test_clock_stepped_while_the_agent_is_down(tmp_path, mqtt_broker, mqtt_broker2, monkeypatch, offset_ms, boot,
                                                expected):
    """Documented in docs/agent.md (Durable windows, Time): on the same boot the restored windows
    age by the true time down (boot clock), whatever the step, and a match across the restart
    spans seconds; on another boot the wall clock decides: a day later the windows have
    expired (the journal's row is replayed for the per-instance query, and joins nothing); an
    hour earlier than the journal's last row the time down is unknown and the windows are
    discarded (counted)."""
    boot_id = "crash-test-boot-1" if boot == "same" else "crash-test-boot-2"
    run = SmokeThenHot(tmp_path, mqtt_broker, mqtt_broker2, monkeypatch,
                       start_env="wall_offset_ms=0,boot_id=crash-test-boot-1",
                       restart_env=f"wall_offset_ms={offset_ms},boot_id={boot_id}")
    stepped_now = int(time.time() * 1000) + offset_ms
    try:
        counters = run.agent.counters()
        if expected == "restored":
            wait_for(lambda: run.watcher.matches("fire"), 30, "the fire across the restart")
            (fire,) = run.watcher.matches("fire")
            assert counters["state_restored"] == 1
            # the smoke alarm kept its true age: the match spans the time down, not the step
            assert 0 <= fire["windowEnd"] - fire["windowStart"] < 30_000
            assert abs(fire["windowEnd"] - stepped_now) < 30_000       # on the stepped wall clock
        else:
            time.sleep(2.0)
            assert run.watcher.matches("fire") == []
            # A day later the smoke alarm is still replayed, for the per-instance query of the demo's
            # config (co2-per-room): the minute that held it closed while the agent was down and is
            # reported now. The continuous windows it enters have long expired.
            assert counters["state_restored"] == (1 if expected == "expired" else 0)
            assert counters["state_discarded"] == (1 if expected == "discarded" else 0)
            assert counters["state_clock_unknown"] == (1 if expected == "discarded" else 0)
        assert "Traceback" not in run.agent.log()
    finally:
        run.close()


def test_without_durable_windows_a_crash_loses_the_window(tmp_path, mqtt_broker, mqtt_broker2, monkeypatch):
    """state.durable_windows: false is the behaviour before the journal: the smoke alarm
    handled before the crash is gone, and the fire it would have made never arrives."""
    run = SmokeThenHot(tmp_path, mqtt_broker, mqtt_broker2, monkeypatch, state={"durable_windows": False})
    try:
        time.sleep(1.5)
        assert run.watcher.matches("fire") == []
    finally:
        run.close()


def test_status_message_carries_the_state_counters(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2,
                         {"config": {"bootstrap": str(CONFIG)}}).start()
    try:
        wait_for(lambda: watcher.statuses, 30, "a status message")
        with watcher.lock:
            counters = watcher.statuses[-1]["counters"]
        assert {"state_restored", "state_discarded", "redelivered_skipped", "state_truncated"} <= set(counters)
        assert json.dumps(counters)
    finally:
        agent.stop()
        watcher.close()
