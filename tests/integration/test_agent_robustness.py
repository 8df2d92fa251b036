"""Bad input never stops the agent; a corrupt outbox is moved aside; shutdown is graceful."""
from __future__ import annotations

import random

from agent_harness import (ALARM, EX, AgentProcess, CloudWatcher, Publisher, alarm, config_document, dedup, levels,
                           push_config, wait_for)


def test_ten_thousand_bad_messages_in_a_valid_stream(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    sensors = Publisher(mqtt_broker, "sensors")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2,
                         {"input": {"max_message_bytes": 2048}}).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        watcher.wait_ack(1)
        rng = random.Random(4)
        bad_kinds = [
            lambda i: b"this is not n-triples " + str(i).encode(),
            lambda i: f"<{EX}a{i}> <{EX}p> .\n".encode(),                      # missing object
            lambda i: b"\xff\xfe\x00garbage",                                   # not UTF-8
            lambda i: b"<http://example.org/x> <http://example.org/p> \"" + b"y" * 3000 + b"\" .\n",  # oversized
            lambda i: alarm(100000 + i)[:-1] + b" extra tokens",                # valid start, junk end
        ]
        valid = 0
        counts = {"bad": 0, "oversized": 0}
        for i in range(10_000):
            kind = rng.randrange(len(bad_kinds))
            counts["oversized" if kind == 3 else "bad"] += 1
            sensors.publish("ew/in/alarm/s1", bad_kinds[kind](i), qos=0, wait=False)
            if i % 100 == 0:
                valid += 1
                sensors.publish("ew/in/alarm/s1", alarm(valid), qos=1)
        wait_for(lambda: len(dedup(watcher.matches("alarm"))) == valid, 120, f"all {valid} valid matches")
        assert levels(dedup(watcher.matches("alarm"))) == list(range(1, valid + 1))
        state = wait_for(lambda: agent.counters().get("messages_in") == 10_000 + valid and agent.counters(), 60,
                         "every message counted")
        assert state["malformed"] == counts["bad"] and state["oversized"] == counts["oversized"]
        assert agent.proc.poll() is None
        log = agent.log()
        assert log.count("reason=malformed") <= 2 and log.count("reason=oversized") <= 1   # once per minute
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()


def test_corrupt_outbox_is_moved_aside_and_agent_starts(tmp_path, mqtt_broker, mqtt_broker2):
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2)
    agent.data_dir.mkdir(parents=True)
    (agent.data_dir / "outbox.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 40)
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    sensors = Publisher(mqtt_broker, "sensors")
    try:
        agent.start()
        assert "CORRUPT_FILE_MOVED_ASIDE" in agent.log()
        assert list(agent.data_dir.glob("outbox.db.corrupt-*"))
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        watcher.wait_ack(1)
        sensors.publish("ew/in/alarm/s1", alarm(1))
        wait_for(lambda: watcher.matches("alarm"), 20, "a match through the fresh outbox")
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()


def test_status_cli_and_graceful_shutdown(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    sensors = Publisher(mqtt_broker, "sensors")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        watcher.wait_ack(1)
        wait_for(lambda: any(s["state"] == "online" for s in watcher.statuses), 20, "online status")
        for n in range(1, 6):
            sensors.publish("ew/in/alarm/s1", alarm(n))
        sensors.publish("ew/in/alarm/s1", b"broken")
        wait_for(lambda: agent.counters().get("messages_in") == 6, 20, "six messages counted")
        result = agent.cli("status")
        assert result.returncode == 0, result.stderr
        lines = {line.split()[0] if not line.startswith("config version") else "config version":
                 line.rsplit(None, 1)[-1] for line in result.stdout.splitlines()}
        assert lines["state"] == "online" and lines["config version"] == "1"
        assert lines["malformed"] == "1" and lines["matches"] == "5" and lines["messages_in"] == "6"

        assert agent.stop() == 0
        assert "event=stopped drained=True outbox_pending=0" in agent.log()
        assert len(dedup(watcher.matches("alarm"))) == 5
        wait_for(lambda: watcher.statuses and watcher.statuses[-1]["state"] == "offline", 10, "offline status")
        assert watcher.statuses[-1]["configVersion"] == 1
        assert agent.cli("status").returncode == 3          # not running any more
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()


def test_last_will_marks_a_killed_agent_offline(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2,
                         {"cloud": {"keepalive_s": 2}}).start()
    try:
        wait_for(lambda: any(s["state"] == "online" for s in watcher.statuses), 20, "online status")
        agent.kill()
        wait_for(lambda: watcher.statuses[-1]["state"] == "offline", 20, "the Last Will")
    finally:
        agent.kill()
        watcher.close()
