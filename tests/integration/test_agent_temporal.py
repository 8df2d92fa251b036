"""Temporal patterns pushed to a running agent, on real brokers: an ordered pair (SEQ), a
silent sensor (an absence with a timer), through agent crashes, and a chained rule.

The real ``edgewave-agent run`` gets a config document pushed on the cloud broker; sensors
publish N-Triples messages, QoS 1, to its local broker; a watcher on the cloud broker
stands in for ingest. A silent sensor must be reported once per silence, within a second of
its deadline, with no other traffic to move the engine's clock; a SIGKILL between a
heartbeat and its deadline, or after the alert, must still give exactly one alert.
"""
from __future__ import annotations

import time

import pytest
from agent_harness import EX, PREFIXES, XSD, AgentProcess, CloudWatcher, Publisher, config_document, push_config, \
    wait_for

from edgewave.shared.events import bindings_dict

pytestmark = pytest.mark.paced

STREAM = "<http://example.org/stream/fire>"
WITHIN_MS = 2000
SILENT = PREFIXES + f"""REGISTER RSTREAM <silent> AS SELECT ?sensor ?beat
FROM NAMED WINDOW <w> ON {STREAM} [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <w> {{
  ?sensor ex:heartbeat ?beat .
  FILTER NOT EXISTS {{ ?sensor ex:heartbeat ?next }} WITHIN PT{WITHIN_MS // 1000}S
}} }}"""
ENTRY = PREFIXES + f"""REGISTER RSTREAM <entry> AS SELECT ?door ?zone
FROM NAMED WINDOW <w> ON {STREAM} [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <w> {{ {{ ?door ex:opened ?t }} SEQ {{ ?door ex:motionIn ?zone }} }} }}"""

HOT = PREFIXES + f"""REGISTER RSTREAM <http://example.org/hot-rooms> AS CONSTRUCT {{ ?room ex:hotIn ?building }}
FROM NAMED WINDOW <w> ON {STREAM} [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <w> {{ ?room ex:temp ?t . ?room ex:in ?building FILTER(?t > 50) }} }}"""
BUILDING = PREFIXES + """REGISTER RSTREAM <building> AS SELECT ?building ?a ?b
FROM NAMED WINDOW <w> ON <http://example.org/hot-rooms> [RANGE PT3S STEP PT1S]
WHERE { WINDOW <w> { ?a ex:hotIn ?building . ?b ex:hotIn ?building FILTER(STR(?a) < STR(?b)) } }"""


def beat(sensor: str, n: int) -> bytes:
    return f'<{EX}{sensor}> <{EX}heartbeat> "{n}"^^<{XSD}integer> .\n'.encode()


def events_of(watcher: CloudWatcher, pattern: str) -> list[dict]:
    with watcher.lock:
        return list({e["id"]: e for e in watcher.events if e.get("pattern") == pattern}.values())


@pytest.fixture
def rig(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "test-cloud-publisher")
    sensors = Publisher(mqtt_broker, "test-sensor")
    # each message committed (and acknowledged) at once: the crash tests below kill the agent between a
    # heartbeat and its 2 s deadline, shorter than the shipped group commit's wait (docs/agent.md)
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2,
                         {"significance": {"enabled": False}, "outbox": {"group_commit_s": 0}}).start()
    push_config(cloud, 1, config_document(1, patterns={"silent": SILENT, "entry": ENTRY, "hot": HOT,
                                                       "building": BUILDING}))
    assert watcher.wait_ack(1)["status"] == "applied", watcher.ack_for(1)
    yield agent, sensors, watcher
    agent.stop()
    for client in (watcher, cloud, sensors):
        client.close()


def test_a_chained_rule_makes_a_building_alert_from_two_hot_rooms(rig) -> None:
    agent, sensors, watcher = rig
    for room, temp in (("r1", 60), ("r2", 20), ("r3", 70)):
        sensors.publish(f"ew/in/fire/{room}", f"<{EX}{room}> <{EX}in> <{EX}house> .\n"
                        f'<{EX}{room}> <{EX}temp> "{temp}"^^<{XSD}integer> .\n'.encode())
        time.sleep(0.1)
    [alert] = wait_for(lambda: events_of(watcher, "building"), 15, "the building alert")
    assert (bindings_dict(alert)["a"], bindings_dict(alert)["b"]) == (f"<{EX}r1>", f"<{EX}r3>")
    made = events_of(watcher, "http://example.org/hot-rooms")       # the rule's own matches go up too
    assert sorted(bindings_dict(m)["room"] for m in made) == [f"<{EX}r1>", f"<{EX}r3>"]
    # the alert names the rule matches it was built from: the events of r1's and r3's heat
    assert sorted(alert["derivedFrom"]) == sorted(m["id"] for m in made)
    assert all(m["derivedFrom"] is None for m in made)


def test_an_ordered_pair_and_a_silent_sensor_fire_on_time_with_no_other_traffic(rig) -> None:
    agent, sensors, watcher = rig
    sensors.publish("ew/in/fire/d1", f"<{EX}door1> <{EX}motionIn> <{EX}hall> .\n".encode())   # before: no match
    time.sleep(0.2)
    sensors.publish("ew/in/fire/d1", f'<{EX}door1> <{EX}opened> "1" .\n'.encode())
    time.sleep(0.2)
    sensors.publish("ew/in/fire/d1", f"<{EX}door1> <{EX}motionIn> <{EX}lobby> .\n".encode())
    wait_for(lambda: events_of(watcher, "entry"), 15, "the SEQ match")
    for n in range(5):
        sensors.publish("ew/in/fire/hb1", beat("hb1", n))
        time.sleep(0.3)
    alerts = wait_for(lambda: events_of(watcher, "silent"), 15, "the silent-sensor alert")
    time.sleep(WITHIN_MS / 1000 + 1.5)                     # no second alert for the same silence
    alerts = events_of(watcher, "silent")
    assert len(alerts) == 1, alerts
    alert = alerts[0]
    assert bindings_dict(alert)["beat"] == f'"4"^^<{XSD}integer>'    # the last heartbeat
    assert alert["windowEnd"] - alert["windowStart"] == WITHIN_MS  # by when the next beat was expected
    assert alert["expected"] == [f"<{EX}hb1> <{EX}heartbeat> ?next ."]  # and what it was
    # fired by the idle clock within a second of the deadline (emittedAt is the agent's wall clock)
    assert 0 < alert["emittedAt"] - alert["windowEnd"] <= 1000, alert
    [entry] = events_of(watcher, "entry")
    assert bindings_dict(entry)["zone"] == f"<{EX}lobby>"


# Down longer than the longest window plus WITHIN (5 s): the replay must still go back to the last heartbeat.
@pytest.mark.parametrize("down_s, when", [(6.0, "after"), (0.3, "before")],
                         ids=["deadline-passed-while-down", "deadline-after-restart"])
def test_an_agent_killed_between_a_heartbeat_and_its_deadline_reports_the_silence_once(rig, down_s, when) -> None:
    agent, sensors, watcher = rig
    for n in range(3):
        sensors.publish("ew/in/fire/hb1", beat("hb1", n))
        time.sleep(0.3)
    wait_for(lambda: agent.counters().get("triples", 0) >= 3, 10, "the heartbeats in the engine")
    agent.kill()
    time.sleep(down_s)
    agent.start()
    wait_for(lambda: events_of(watcher, "silent"), 15, f"the alert of a deadline {when} the restart")
    time.sleep(WITHIN_MS / 1000 + 1.5)
    alerts = events_of(watcher, "silent")
    assert len(alerts) == 1 and bindings_dict(alerts[0])["beat"] == f'"2"^^<{XSD}integer>', alerts


def test_an_alert_fired_before_a_crash_is_not_fired_again_after_it(rig) -> None:
    agent, sensors, watcher = rig
    for n in range(3):
        sensors.publish("ew/in/fire/hb1", beat("hb1", n))
        time.sleep(0.3)
    wait_for(lambda: events_of(watcher, "silent"), 15, "the alert")
    agent.kill()
    agent.start()
    sensors.publish("ew/in/fire/hb2", beat("hb2", 9))    # a message after the restart: the clock moves on
    wait_for(lambda: events_of(watcher, "silent") and len(events_of(watcher, "silent")) >= 2, 15,
             "hb2's alert")
    time.sleep(1.0)
    alerts = events_of(watcher, "silent")
    assert sorted(bindings_dict(a)["sensor"] for a in alerts) == [f"<{EX}hb1>", f"<{EX}hb2>"], alerts
    # not even sent again (the cloud would drop it by its id): the restarted engine fired hb2's only
    wait_for(lambda: agent.counters().get("absences_fired") == 1, 10,
             lambda: f"absences_fired {agent.counters().get('absences_fired')}, expected 1")
