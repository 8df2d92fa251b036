"""A per-instance aggregate pushed to a running agent, on real brokers, through agent crashes.

The real ``edgewave-agent run`` gets a config document pushed on the cloud broker with a
per-instance query (the average temperature per room over tumbling 2 s windows: a
per-minute aggregate, shortened) beside a continuous pattern. A sensor publishes readings
every 0.1 s for 9 s, QoS 1; the agent is killed (SIGKILL) twice and started again a second
later, while the readings go on (the local broker holds them for the agent's session).

What the cloud gets must say exactly what was published: each reported instance once (one
event id per instance), its bounds those of a 2 s tumbling window, and, since every reading
falls into exactly one instance, the instances' counts add up to the readings published and
their averages weighted by their counts to the readings' sum: nothing lost, nothing twice.
"""
from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest
from agent_harness import AVERAGE, FIRE, AgentProcess, CloudWatcher, Publisher, config_document, observation, \
    push_config, wait_for

from edgewave.shared.events import rows_dicts

pytestmark = pytest.mark.paced

EX = "http://example.org/"
READINGS = 90
EVERY_S = 0.1


def value(n: int) -> int:
    return 10 + n % 7


def instance_events(watcher: CloudWatcher) -> list[dict]:
    with watcher.lock:
        return [e for e in watcher.events if e["kind"] == "instance"]


def number(term: str) -> Decimal:
    return Decimal(term.split('"')[1])


@pytest.mark.parametrize("kills", [0, 2], ids=["no-crash", "two-sigkills"])
def test_a_pushed_aggregate_reports_each_instance_once_through_agent_crashes(tmp_path, mqtt_broker, mqtt_broker2,
                                                                            kills):
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "test-cloud-publisher")
    sensors = Publisher(mqtt_broker, "test-sensor")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2, {"significance": {"enabled": False}}).start()
    published: list[int] = []
    try:
        push_config(cloud, 1, config_document(1, patterns={"fire": FIRE, "average": AVERAGE}))
        assert watcher.wait_ack(1)["status"] == "applied", watcher.ack_for(1)

        def publish() -> None:
            for n in range(READINGS):
                sensors.publish("ew/in/fire/t1", observation(f"temp{n}", "t1", "temperature", value(n)))
                published.append(value(n))
                time.sleep(EVERY_S)

        feeder = threading.Thread(target=publish)
        feeder.start()
        for at_s in (3.0, 6.3)[:kills]:
            time.sleep(max(0.0, at_s - len(published) * EVERY_S))
            agent.kill()
            time.sleep(1.0)
            agent.start()
        feeder.join()
        total = len(published)

        def counted() -> int:
            unique = {e["id"]: e for e in instance_events(watcher)}
            return sum(int(number(row["n"])) for e in unique.values() for row in rows_dicts(e))
        wait_for(lambda: counted() >= total, 30, lambda: f"{counted()} of {total} readings in reported instances")
        time.sleep(2.5)                                # one more instance's time: nothing further may come
        events = {e["id"]: e for e in instance_events(watcher)}.values()
        ends = sorted(e["windowEnd"] for e in events)
        assert len(ends) == len(set(ends)), f"an instance reported twice with different ids: {ends}"
        assert all(e["windowEnd"] - e["windowStart"] == 2000 and e["windowEnd"] % 2000 == 0 for e in events)
        assert all(e["pattern"] == "average" and e["operator"] == "RSTREAM" for e in events)
        rows = [row for e in events for row in rows_dicts(e)]
        assert {row["room"] for row in rows} == {f"<{EX}room1>"}
        assert sum(int(number(row["n"])) for row in rows) == total
        weighted = sum(number(row["avg"]) * int(number(row["n"])) for row in rows)
        assert abs(weighted - sum(published)) < Decimal("0.001"), (weighted, sum(published))
        counters = agent.counters()
        assert counters["instance_queries"] == 1 and counters["late_triples"] == 0
        assert "Traceback" not in agent.log()
        print(f"{len(ends)} instances reported once each over {total} readings, {kills} SIGKILLs; "
              f"last run: restored {counters.get('state_restored')} messages, "
              f"{counters.get('state_replayed_instances')} instances replayed and not sent again")
    finally:
        sensors.close()
        cloud.close()
        agent.stop()
        watcher.close()


def test_the_running_agent_reads_its_documents_without_importing_rdflib(tmp_path, mqtt_broker, mqtt_broker2,
                                                                       monkeypatch):
    """rdflib and its SPARQL parser stay out of a gateway's memory: the real agent, with Python's
    import log on, applies a pushed per-instance query and refuses one with a SPARQL syntax error
    (read by its document reader, in a child process), and its own log names neither."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "test-cloud-publisher")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"fire": FIRE, "average": AVERAGE}))
        assert watcher.wait_ack(1)["status"] == "applied", watcher.ack_for(1)
        push_config(cloud, 2, config_document(2, patterns={"average": AVERAGE.replace("GROUP BY", "GROUP BY BY")}))
        refused = watcher.wait_ack(2)
        assert refused["status"] == "rejected" and "SPARQL syntax error" in refused["reason"], refused
        imported = {line.rsplit("|", 1)[1].strip() for line in agent.log().splitlines()
                    if line.startswith("import time:") and "|" in line}
        assert "edgewave.agent.runtime" in imported         # the import log is there to read
        assert not {name for name in imported if name.split(".")[0] in ("rdflib", "pyparsing")}
        assert agent.counters()["instance_queries"] == 1
    finally:
        cloud.close()
        agent.stop()
        watcher.close()
