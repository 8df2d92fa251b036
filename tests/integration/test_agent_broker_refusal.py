"""A cloud broker that refuses the uplink (PUBACK with a failure reason): events stay in the outbox."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from agent_harness import (ALARM, AgentProcess, CloudWatcher, Publisher, alarm, config_document, dedup, levels,
                           push_config, wait_for)
from broker_process import MosquittoBroker

ALLOW_ALL = "topic readwrite #\n"
DENY_EVENTS = "topic readwrite ew/gw1/config\ntopic readwrite ew/gw1/config/ack\ntopic readwrite ew/gw1/status\n" \
              "topic read ew/gw1/events\n"


class AclBroker(MosquittoBroker):
    """Mosquitto with an ACL file that the test rewrites and reloads (SIGHUP)."""

    def __init__(self, workdir: Path) -> None:
        self.acl_path = Path(workdir) / "acl"
        super().__init__(workdir)

    def _write_config(self) -> None:
        self.acl_path.parent.mkdir(parents=True, exist_ok=True)
        self.acl_path.write_text(DENY_EVENTS)
        super()._write_config()
        with self.config_path.open("a") as f:
            f.write(f"acl_file {self.acl_path}\n")

    def set_acl(self, text: str) -> None:
        self.acl_path.write_text(text)
        assert self.proc is not None
        self.proc.send_signal(signal.SIGHUP)


@pytest.fixture
def acl_cloud(tmp_path):
    broker = AclBroker(tmp_path / "acl-broker").start()
    yield broker
    broker.kill()


def test_refused_events_are_kept_and_sent_once_allowed(tmp_path, mqtt_broker, acl_cloud):
    watcher = CloudWatcher(acl_cloud)
    cloud = Publisher(acl_cloud, "cloud-publisher")
    sensors = Publisher(mqtt_broker, "sensors")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, acl_cloud, {"outbox": {"resend_after_s": 1}}).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        assert watcher.wait_ack(1)["status"] == "applied"
        for n in range(1, 6):
            sensors.publish("ew/in/alarm/s1", alarm(n))
        wait_for(lambda: "event=broker_rejected" in agent.log(), 20, "the broker's refusal in the log")
        time.sleep(1.0)
        assert watcher.matches() == []
        assert agent.state()["outbox"]["depth"] == 5           # refused events are not deleted
        acl_cloud.set_acl(ALLOW_ALL)
        wait_for(lambda: len(dedup(watcher.matches("alarm"))) == 5, 30, "the five events once allowed")
        assert levels(dedup(watcher.matches("alarm"))) == [1, 2, 3, 4, 5]
        wait_for(lambda: agent.state()["outbox"]["depth"] == 0, 20, "an empty outbox")
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()
