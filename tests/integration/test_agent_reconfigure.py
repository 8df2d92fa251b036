"""Reconfiguration by signed documents: rejections with reasons change nothing; good ones swap in by difference."""
from __future__ import annotations

import time

import pytest
from agent_harness import (ALARM, EX, FIRE, INTRUSION, AgentProcess, CloudWatcher, Publisher, alarm,
                           config_document, dedup, levels, observation, push_config, wait_for)


@pytest.fixture
def rig(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    sensors = Publisher(mqtt_broker, "sensors")
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()
    yield agent, watcher, sensors, cloud
    agent.stop()
    for c in (watcher, sensors, cloud):
        c.close()


def door_opened(n: int) -> bytes:
    return f"<{EX}ev{n}> <{EX}doorOpened> <{EX}door1> .\n".encode()


def motion(n: int) -> bytes:
    return f"<{EX}ev{n}> <{EX}motionIn> <{EX}room1> .\n<{EX}ev{n}> <{EX}seenBy> <{EX}pir1> .\n".encode()


def test_rejected_documents_change_nothing_and_say_why(rig):
    agent, watcher, sensors, cloud = rig
    push_config(cloud, 5, config_document(5))
    assert watcher.wait_ack(5)["status"] == "applied"

    push_config(cloud, 6, config_document(6, threshold=10), key="not-the-gateway-key")
    ack = watcher.wait_ack(6)
    assert ack["status"] == "rejected" and "bad signature" in ack["reason"]

    push_config(cloud, 4, config_document(4, threshold=10))
    ack = watcher.wait_ack(4)
    assert ack["status"] == "rejected" and "stale version" in ack["reason"]

    broken = config_document(7, patterns={"fire": FIRE.replace("WHERE {", "WHERE {{ oops", 1)})
    push_config(cloud, 7, broken)
    ack = watcher.wait_ack(7)
    assert ack["status"] == "rejected" and "parse error" in ack["reason"]
    assert "line" in ack["reason"] and "column" in ack["reason"]

    other_stream = config_document(8, patterns={"x": INTRUSION.replace(
        "http://example.org/stream/security", "http://elsewhere.org/stream")})
    # The agent's default rule reaches http://example.org/stream/<segment> only.
    push_config(cloud, 8, other_stream)
    ack = watcher.wait_ack(8)
    assert ack["status"] == "rejected" and "unknown stream" in ack["reason"]

    # The version-5 patterns, with threshold 50, still run: 45 does not fire, 55 does.
    sensors.publish("ew/in/fire/s1", observation("smoke1", "s1", "smoke", 1))
    sensors.publish("ew/in/fire/t1", observation("temp1", "t1", "temperature", 45))
    sensors.publish("ew/in/fire/t1", observation("temp2", "t1", "temperature", 55))
    wait_for(lambda: watcher.matches("fire"), 20, "a fire match under the old config")
    time.sleep(0.5)
    assert [dict((b["variable"], b["value"]) for b in e["bindings"])["t"] for e in watcher.matches("fire")] == [
        '"55"^^<http://www.w3.org/2001/XMLSchema#integer>']
    wait_for(lambda: agent.state().get("configVersion") == 5, 10, "status reporting version 5")
    assert agent.counters()["config_rejected"] == 4


def test_threshold_change_keeps_other_partial_matches(rig):
    agent, watcher, sensors, cloud = rig
    push_config(cloud, 1, config_document(1, threshold=50))
    watcher.wait_ack(1)
    sensors.publish("ew/in/security/door1", door_opened(1))          # half of an intrusion
    sensors.publish("ew/in/fire/s1", observation("smoke1", "s1", "smoke", 1))
    sensors.publish("ew/in/fire/t1", observation("temp1", "t1", "temperature", 45))
    wait_for(lambda: agent.counters().get("messages_in") == 3, 20, "three messages processed")
    assert watcher.matches() == []                                    # 45 is below 50

    push_config(cloud, 2, config_document(2, threshold=40))           # only a static triple changes
    assert watcher.wait_ack(2)["status"] == "applied"
    assert "kept=fire,intrusion" in agent.log() or "kept=intrusion,fire" in agent.log()

    sensors.publish("ew/in/security/pir1", motion(2))                # completes the intrusion
    wait_for(lambda: watcher.matches("intrusion"), 20, "the intrusion match across the config change")
    sensors.publish("ew/in/fire/t1", observation("temp2", "t1", "temperature", 45))
    wait_for(lambda: watcher.matches("fire"), 20, "a fire match under the new threshold")
    time.sleep(0.5)
    fire = watcher.matches("fire")
    # temp1 (45, before the change) also joins now: static data applies to partial matches too.
    assert len(fire) >= 1
    assert all(dict((b["variable"], b["value"]) for b in e["bindings"])["t"].startswith('"45"') for e in fire)
    (intrusion,) = watcher.matches("intrusion")
    assert {b["variable"]: b["value"] for b in intrusion["bindings"]}["room"] == f"<{EX}room1>"
    wait_for(lambda: agent.state().get("configVersion") == 2, 10, "status reporting version 2")


def test_rollback_returns_to_previous_config_and_cloud_sees_it(rig):
    agent, watcher, sensors, cloud = rig
    push_config(cloud, 1, config_document(1, threshold=50))
    watcher.wait_ack(1)
    push_config(cloud, 2, config_document(2, threshold=10))
    watcher.wait_ack(2)
    result = agent.cli("rollback")
    assert result.returncode == 0, result.stderr
    assert "to version 1" in result.stdout
    wait_for(lambda: any(s.get("configVersion") == 1 for s in watcher.statuses[-3:]), 20,
             "status on the cloud broker showing version 1")
    sensors.publish("ew/in/fire/s1", observation("smoke1", "s1", "smoke", 1))
    sensors.publish("ew/in/fire/t1", observation("temp1", "t1", "temperature", 30))   # fires only at 10
    sensors.publish("ew/in/fire/t1", observation("temp2", "t1", "temperature", 60))
    wait_for(lambda: watcher.matches("fire"), 20, "a fire match under version 1")
    time.sleep(0.5)
    assert len(watcher.matches("fire")) == 1
    # The retained version 2 is not re-applied: it is at the high-water mark.
    push_config(cloud, 2, config_document(2, threshold=10))
    wait_for(lambda: len([a for a in watcher.acks if a["version"] == 2]) == 2, 20, "second ack for version 2")
    assert watcher.ack_for(2)["status"] == "rejected"


def test_config_sent_while_agent_was_away_arrives_through_its_persistent_session(tmp_path, mqtt_broker,
                                                                                   mqtt_broker2):
    from edgewave.shared import configdoc

    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()
    try:
        wait_for(lambda: "link=cloud event=subscribed" in agent.log(), 20, "the config subscription")
        agent.stop()
        # Not retained: only the broker's copy of the agent's session can deliver it.
        payload = configdoc.sign_envelope("gw1", 9, config_document(9), "trig", "test-key-gw1")
        cloud.publish("ew/gw1/config", payload, retain=False)
        agent.start()
        assert watcher.wait_ack(9)["status"] == "applied"
        assert "session_present=True" in agent.log(since_start=True)
    finally:
        agent.stop()
        watcher.close()
        cloud.close()


def test_configs_applied_mid_stream_keep_every_match_in_order(rig):
    """A sensor message that arrives while a config is being applied waits its turn behind it:
    the agent handles messages on the network thread when nothing is queued and queues them
    otherwise, and neither path may let a message overtake an older one or lose one."""
    agent, watcher, sensors, cloud = rig
    push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
    assert watcher.wait_ack(1)["status"] == "applied"
    total, versions = 1500, range(2, 7)
    for n in range(1, total + 1):
        sensors.publish("ew/in/alarm/s1", alarm(n), wait=False)
        if n % 250 == 0 and n // 250 + 1 in versions:       # a new threshold every 250 alarms
            version = n // 250 + 1
            push_config(cloud, version, config_document(version, patterns={"alarm": ALARM}, threshold=version))
        if n % 50 == 0:
            time.sleep(0.02)                                  # about 1,500 alarms/s, in bursts
    for version in versions:
        assert watcher.wait_ack(version)["status"] == "applied"
    wait_for(lambda: len(dedup(watcher.matches("alarm"))) >= total, 60, f"all {total} alarm matches")
    assert levels(dedup(watcher.matches("alarm"))) == list(range(1, total + 1))
    assert agent.counters().get("queue_full", 0) == 0
