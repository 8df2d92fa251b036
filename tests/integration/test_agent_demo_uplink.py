"""The demo scenario's agent with the shipped settings (configs/agent.yaml as it is, the
example config document configs/gateway-config.trig): what it sends the cloud is at most
a tenth of what its sensors sent it, and every match of the ground truth arrives.

One minute of simulated sensors at real-time pace (configs/scenarios/demo.yaml, as
`make demo` runs it), between two real Mosquitto brokers; the ratio is the agent's own
status counters, ``bytes_forwarded / bytes_in``."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from agent_harness import GATEWAY, KEY, AgentProcess, CloudWatcher, wait_for

pytestmark = pytest.mark.paced

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def shipped_settings(work: Path, local, cloud) -> dict:  # noqa: ANN001
    """configs/agent.yaml as shipped; only where the brokers and files are, and the key, differ."""
    settings = yaml.safe_load((REPO / "configs/agent.yaml").read_text())
    settings.update(gateway=GATEWAY, data_dir=str(work / "data"))
    settings["local"].update(host=local.host, port=local.port)
    settings["cloud"].update(host=cloud.host, port=cloud.port)
    settings["config"].update(key=KEY, bootstrap=str(REPO / "configs/gateway-config.trig"))
    # the state file the counters are read from, kept current
    settings["status"].update(local_interval_s=0.5, state_file_interval_s=0.5)
    return settings


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_sends_at_most_a_tenth_of_its_sensor_bytes_and_every_match(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2)
    agent.config_path.write_text(yaml.safe_dump(shipped_settings(tmp_path / "agent", mqtt_broker, mqtt_broker2)))
    agent.start()
    try:
        truth = tmp_path / "truth.jsonl"
        sim = subprocess.run([str(BIN / "edgewave-sim"), "run", "--config", "configs/sim.yaml",
                              "--scenario", "configs/scenarios/demo.yaml", "--gateway", GATEWAY,
                              "--broker", f"{mqtt_broker.host}:{mqtt_broker.port}", "--speed", "1",
                              "--truth", str(truth)], capture_output=True, text=True, cwd=REPO, timeout=180)
        assert sim.returncode == 0, sim.stderr[-2000:]
        expected = Counter(json.loads(line)["pattern"] for line in truth.read_text().splitlines())
        assert expected == {"fire": 5, "intrusion": 1, "silent-sensor-in-alarm": 1}

        def arrived() -> Counter:
            return Counter(e["pattern"] for e in watcher.matches())
        wait_for(lambda: arrived() == expected, 30, lambda: f"the ground truth {expected} (got {arrived()})")
        rooms = Counter((e["pattern"], {b["variable"]: b["value"] for b in e["bindings"]}.get("room"))
                        for e in watcher.matches())
        assert rooms == {("fire", "<http://example.org/gw1/room3>"): 4, ("fire", "<http://example.org/gw1/room2>"): 1,
                         ("intrusion", None): 1, ("silent-sensor-in-alarm", "<http://example.org/gw1/room5>"): 1}
        assert all(e["triples"] and e["entailed"] is not None for e in watcher.matches())   # evidence kept
        significant = watcher.significant()
        assert significant and all(e["sensor"] and e["property"] and e["result"] for e in significant)

        def settled() -> dict:
            c = agent.counters()
            return c if c.get("bytes_in") and c.get("forwarded") == len(watcher.events) else {}
        counters = wait_for(settled, 30, lambda: f"the counters to settle ({agent.counters()})")
        ratio = counters["bytes_forwarded"] / counters["bytes_in"]
        print(f"demo uplink: {counters['bytes_forwarded']} of {counters['bytes_in']} sensor bytes ({ratio:.1%}), "
              f"{len(watcher.events)} events in {len(watcher.event_messages)} messages")
        assert ratio <= 0.10, counters
        assert counters["bytes_forwarded"] == sum(size for _, size in watcher.event_messages)
    finally:
        agent.stop()
        watcher.close()
