"""The agent end to end: sensor publish -> engine -> uplink event; significance filter and its config."""
from __future__ import annotations

import json
import time

import pytest
from agent_harness import (EX, GATEWAY, AgentProcess, CloudWatcher, Publisher, config_document, observation,
                           push_config, wait_for)

from edgewave.shared.events import decode_event

pytestmark = pytest.mark.paced


@pytest.fixture
def rig(tmp_path, mqtt_broker, mqtt_broker2):
    """Local broker, cloud broker, a cloud watcher, two publishers; cleaned up afterwards."""
    watcher = CloudWatcher(mqtt_broker2)
    sensors = Publisher(mqtt_broker, "sensors")
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    agents: list[AgentProcess] = []

    def start_agent(**overrides) -> AgentProcess:
        agent = AgentProcess(tmp_path / f"agent{len(agents)}", mqtt_broker, mqtt_broker2, overrides).start()
        agents.append(agent)
        return agent

    yield start_agent, watcher, sensors, cloud
    for agent in agents:
        agent.stop()
    for c in (watcher, sensors, cloud):
        c.close()


def test_completing_publish_yields_exactly_one_match_event(rig):
    start_agent, watcher, sensors, cloud = rig
    agent = start_agent()
    push_config(cloud, 1, config_document(1))
    assert watcher.wait_ack(1)["status"] == "applied"

    sensors.publish("ew/in/fire/t1", observation("obs1", "t1", "temperature", 55.5))
    time.sleep(0.5)
    assert watcher.matches() == []                       # half a pattern: nothing matched yet
    sensors.publish("ew/in/fire/s1", observation("obs2", "s1", "smoke", 1))
    wait_for(lambda: watcher.matches("fire"), 20, "the fire match")
    time.sleep(1.0)                                      # anything else would arrive by now
    (event,) = watcher.matches()
    decode_event(json.dumps(event))                      # a valid uplink event
    assert event["gateway"] == GATEWAY and event["pattern"] == "fire"
    bindings = {b["variable"]: b["value"] for b in event["bindings"]}
    assert bindings["room"] == f"<{EX}room1>"
    assert bindings["t"] == '"55.5"^^<http://www.w3.org/2001/XMLSchema#decimal>'
    decimal = "<http://www.w3.org/2001/XMLSchema#decimal>"
    assert f'<{EX}obs1> <http://www.w3.org/ns/sosa/hasSimpleResult> "55.5"^^{decimal} .' in event["triples"]
    assert f"<{EX}obs2> <http://www.w3.org/ns/sosa/madeBySensor> <{EX}s1> ." in event["triples"]
    assert f"<{EX}s1> <{EX}locatedIn> <{EX}room1> ." in event["triples"]      # static data contributes
    assert event["id"].startswith("urn:edgewave:event:")
    # The temperature alone matched nothing, so it went up as a significant observation.
    significant = watcher.significant()
    assert [e["sensor"] for e in significant] == [f"<{EX}t1>"]
    wait_for(lambda: agent.counters().get("matches") == 1 and agent.counters().get("forwarded") == 2, 10,
             "counters in the state file")


def test_deadband_suppresses_small_changes_until_config_changes_it(rig):
    start_agent, watcher, sensors, cloud = rig
    agent = start_agent(significance={"deadband_absolute": 5.0, "max_rate_per_s": 100, "max_silence_s": 3600})
    push_config(cloud, 1, config_document(1))
    watcher.wait_ack(1)

    def send(n, value):
        sensors.publish("ew/in/air/h1", observation(f"hum{n}", "h1", "humidity", value))

    send(1, 50.0)
    wait_for(lambda: len(watcher.significant()) == 1, 20, "the first humidity value")
    send(2, 52.0)
    send(3, 54.9)                                  # within 5.0 of 50.0, the last forwarded value
    wait_for(lambda: agent.counters().get("below_deadband") == 2, 20, "two values below the deadband")
    assert len(watcher.significant()) == 1
    send(4, 55.5)                                  # 5.5 away from 50.0
    wait_for(lambda: len(watcher.significant()) == 2, 20, "the value beyond the deadband")
    assert [e["result"] for e in watcher.significant()][-1] == '"55.5"^^<http://www.w3.org/2001/XMLSchema#decimal>'

    narrower = f"[ a ew:SignificanceRule ; ew:property <{EX}humidity> ; ew:deadbandAbsolute 0.5 ]"
    push_config(cloud, 2, config_document(2, significance=narrower))
    assert watcher.wait_ack(2)["status"] == "applied"
    send(5, 56.2)                                  # 0.7 from 55.5: significant under the new deadband
    wait_for(lambda: len(watcher.significant()) == 3, 20, "a small change after the deadband narrowed")
    send(6, 56.4)                                  # 0.2: still below
    wait_for(lambda: agent.counters().get("below_deadband") == 3, 20, "the third value below the deadband")
    assert len(watcher.significant()) == 3


def test_bootstrap_document_runs_before_any_cloud_config(rig, tmp_path):
    start_agent, watcher, sensors, cloud = rig
    bootstrap = tmp_path / "bootstrap.trig"
    bootstrap.write_text(config_document(0, threshold=20))
    agent = start_agent(config={"bootstrap": str(bootstrap)})
    sensors.publish("ew/in/fire/t2", observation("obs1", "t2", "temperature", 25))
    sensors.publish("ew/in/fire/s2", observation("obs2", "s2", "smoke", 1))
    wait_for(lambda: watcher.matches("fire"), 20, "a match from the bootstrap patterns")
    assert {b["variable"]: b["value"] for b in watcher.matches("fire")[0]["bindings"]}["room"] == f"<{EX}room2>"
    assert agent.state()["configVersion"] == 0
    push_config(cloud, 1, config_document(1))          # the cloud's first document replaces it
    assert watcher.wait_ack(1)["status"] == "applied"
