"""`edgewave-sim run` against a real broker that goes away and comes back: the simulator
counts what it could not send, reconnects, and carries on."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from test_sim_sosa import Subscriber  # same folder

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli"]


def test_run_survives_a_broker_restart(mqtt_broker) -> None:
    sub = Subscriber(mqtt_broker.host, mqtt_broker.port)
    proc = subprocess.Popen(SIM + ["run", "--config", str(CONFIG), "--gateway", "gw1", "--rate", "2",
                                   "--duration", "240", "--speed", "20",
                                   "--broker", f"{mqtt_broker.host}:{mqtt_broker.port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(sub.received) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sub.received) >= 200, "the simulator did not start publishing"
        mqtt_broker.stop()
        time.sleep(1.5)
        mqtt_broker.start()
        before = len(sub.received)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sub.close()
    assert proc.returncode == 0, err
    assert "mqtt_disconnected gateway=gw1" in err
    assert "mqtt_connected gateway=gw1" in err.split("mqtt_disconnected", 1)[1], "no reconnect"
    assert len(sub.received) > before + 100, "nothing published after the broker came back"
    done = [line for line in err.splitlines() if "run_done" in line][0]
    dropped = int(done.split("dropped=")[1].split()[0])
    sent = int(done.split("sent=")[1].split()[0])
    assert dropped > 0 and sent > 0
