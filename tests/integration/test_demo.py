"""`make demo` (scripts/demo.py --exit): the whole secured topology on this machine sees
exactly the simulator's ground truth (the fires, the intrusion and the silent sensor in alarm),
prints what README.md shows, the intrusion and silent-sensor alerts among it as they land, and
its agent, with the shipped settings, sends the cloud at most a tenth of the bytes its sensors
sent it."""
from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_demo_sees_exactly_the_ground_truth(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--exit",
                           "--work", str(tmp_path / "demo"), "--dashboard-port", str(_free_port())],
                          cwd=REPO, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "the cloud saw exactly the ground truth" in out + done.stderr
    assert re.search(r"^\s+fire\s+cloud=\s*5\s+truth=\s*5$", out, re.M), out
    # the ordered intrusion (door, then motion) and the silent sensor in alarm, in the config document
    assert re.search(r"^\s+intrusion\s+cloud=\s*1\s+truth=\s*1$", out, re.M), out
    assert re.search(r"^\s+silent-sensor-in-alarm\s+cloud=\s*1\s+truth=\s*1$", out, re.M), out
    # ... printed in words as they land, each once
    intrusion = re.findall(r"^\[demo [\d:]+\] ALERT intrusion at gw1 \(armed\): door room1-door opened at "
                           r"(\d\d:\d\d:\d\d), then motion sensor room6-motion saw movement at (\d\d:\d\d:\d\d)$",
                           out, re.M)
    assert len(intrusion) == 1, out
    door, motion = (sum(int(part) * unit for part, unit in zip(hms.split(":"), (3600, 60, 1))) for hms in intrusion[0])
    assert 0 < (motion - door) % 86400 < 60, out          # the door first, then the motion, within the window
    silent = re.findall(r"^\[demo [\d:]+\] ALERT silent sensor at gw1: CO2 sensor room5-co2 \(room5\) reported "
                        r"2480 ppm, above the 2000 ppm alarm level, at \d\d:\d\d:\d\d and has sent nothing in "
                        r"the 10 s since", out, re.M)
    assert len(silent) == 1, out
    rooms = dict(re.findall(r"^\s+(<http://example\.org/gw1/room\d>)\s+(\d+)$", out, re.M))
    assert rooms == {"<http://example.org/gw1/room3>": "4", "<http://example.org/gw1/room2>": "1"}, out
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/", out, re.M), out
    # the per-instance query: the CO2 of the rooms whose sensors reported in a minute that ended (the
    # first may be cut by the scenario's start; the minute of its end is reported after the demo's end)
    co2 = re.findall(r"^\s+\d\d:\d\d-\d\d:\d\d\s+(room\d)\s+average ([\d.]+) ppm \(lowest ([\d.]+), "
                     r"highest ([\d.]+), (\d) readings\)$", out, re.M)
    assert co2 and {room for room, *_ in co2} <= {f"room{n}" for n in range(1, 8)}, out
    assert all(float(low) <= float(average) <= float(high) for _, average, low, high, _ in co2), out
    # with the shipped agent settings, the uplink carries at most a tenth of the sensor bytes
    sent = re.search(r"^uplink: (\d+) bytes sent for (\d+) sensor bytes", out, re.M)
    assert sent and 0 < int(sent[1]) <= 0.10 * int(sent[2]), out
