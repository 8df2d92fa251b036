"""`make demo`: one gateway and the cloud tier, end to end, on this machine.

Provisions gw1 as an operator would (fleet CA, cloud broker configuration with TLS,
password file and ACLs, `gateway add gw1`, the bundle installed with `edgewave-agent
install --root`), starts the two Mosquitto brokers with the generated configurations
(no anonymous clients), the cloud tier (ingest + Spark job), and the gateway agent over TLS; pushes the example config
(configs/gateway-config.trig: the fire, intrusion, patient, close-friends and silent-sensor-in-alarm
patterns and the per-minute CO2 average per room)
with push-config; runs one minute of simulated sensors (configs/scenarios/demo.yaml: an
intrusion, a CO2 sensor falling silent in alarm, two fires) at real-time pace, printing the
intrusion and silent-sensor alerts as the cloud receives them; then shows what the cloud aggregated
next to the simulator's ground truth, and the operator dashboard's address with a demo
login (a generated password; the user is in the demo's cloud.yaml). Everything runs under
var/demo/ and keeps serving the dashboard until Ctrl-C (``--exit``: stop at once).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml

from edgewave.cloud.settings import load_settings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from broker_process import MosquittoBroker  # noqa: E402  (the same launcher the tests use)
from fleet_rig import FleetRig, installed_gateway  # noqa: E402  (provisioning through the real CLIs)

BIN = Path(sys.executable).parent
DEMO_USER = "demo"


def dashboard_port(preferred: int) -> int:
    """``preferred`` if nothing listens there, else any free port."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as uvicorn binds: a port in TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def demo_login(work: Path, port: int) -> tuple[dict, str]:
    """The dashboard section of the demo's cloud.yaml (an operator with a generated password) and the password."""
    from edgewave.cloud.dashboard.auth import hash_password

    password = secrets.token_urlsafe(12)
    (work / "dashboard.password").write_text(password + "\n")
    os.chmod(work / "dashboard.password", 0o600)
    section = {"host": "127.0.0.1", "port": port, "secret_key_file": str(work / "cloud/dashboard-secret"),
               "users": {DEMO_USER: {"role": "operator", "password_hash": hash_password(password)}},
               "alarm_keys": {"fire": ["room"]}}
    return section, password


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def start(name: str, args: list[str], work: Path) -> subprocess.Popen:
    log = open(work / f"{name}.log", "w")
    say(f"starting {name}: {' '.join(args[:3])} ... (log: {work / (name + '.log')})")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)


def query(db: Path, sql: str) -> list[tuple]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []  # tables appear with the job's first batch


def sensor_name(iri: str) -> str:
    """``room5-co2`` of ``<http://example.org/gw1/sensor/room5-co2>``."""
    return iri.rsplit("/", 1)[-1].rstrip(">")


def clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def literal(term: str) -> str:
    """The lexical form of an N-Triples literal (``2480`` of ``"2480"^^<...#decimal>``)."""
    return term.split('"')[1] if term.startswith('"') else term


def alert_text(event: dict) -> str | None:
    """An intrusion or silent-sensor match as an operator reads it (None for other patterns).
    A match's window is when its first and last triple arrived at the gateway; an absence's
    ends at the deadline that passed."""
    b = {item["variable"]: item["value"] for item in event["bindings"]}
    if event["pattern"] == "intrusion":
        return (f"ALERT intrusion at {event['gateway']} (armed): door {sensor_name(b['door'])} opened at "
                f"{clock(event['window_start'])}, then motion sensor {sensor_name(b['motionSensor'])} saw movement "
                f"at {clock(event['window_end'])}")
    if event["pattern"] == "silent-sensor-in-alarm":
        silent_s = (event["window_end"] - event["window_start"]) / 1000
        return (f"ALERT silent sensor at {event['gateway']}: CO2 sensor {sensor_name(b['sensor'])} "
                f"({sensor_name(b['room'])}) reported {literal(b['level'])} ppm, above the 2000 ppm alarm level, "
                f"at {clock(event['window_start'])} and has sent nothing in the {silent_s:g} s since: "
                f"{sensor_name(b['room'])}'s air is no longer watched")
    return None


class Alerts:
    """Prints the intrusion and silent-sensor matches as ingest lands them (the cloud's live feed)."""

    def __init__(self, feed: Path) -> None:
        self.feed = feed
        self.seq = 0
        self.count = 0

    def poll(self) -> None:
        from edgewave.cloud.live_feed import read_feed

        try:
            events = read_feed(self.feed, self.seq)
        except sqlite3.Error:
            return   # being created by ingest: next time
        for event in events:
            self.seq = max(self.seq, event["seq"])
            text = alert_text(event) if event["kind"] == "match" else None
            if text:
                self.count += 1
                say(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "var" / "demo", help="working directory (wiped)")
    parser.add_argument("--wait", type=float, default=90.0, help="seconds to wait for the cloud's counts")
    parser.add_argument("--dashboard-port", type=int, default=8090, help="the dashboard's port (another if taken)")
    parser.add_argument("--exit", action="store_true", help="stop everything after the summary instead of "
                                                               "serving the dashboard until Ctrl-C")
    args = parser.parse_args(argv)

    work = args.work
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    procs: list[subprocess.Popen] = []
    brokers: list[MosquittoBroker] = []
    try:
        # The secured topology: a fleet CA, the cloud broker with TLS, a password file and
        # ACLs, gw1 provisioned and its bundle installed, its local broker with its own users.
        say("provisioning: tls-init, broker-init, gateway add gw1, edgewave-agent install --root")
        port = dashboard_port(args.dashboard_port)
        dashboard, password = demo_login(work, port)
        rig = FleetRig(work / "cloud", extra={"spark": {"checkpoint": str(work / "cloud/checkpoint"),
                                                        "history": str(work / "cloud/history"),
                                                        "trigger_seconds": 2},
                                              "dashboard": dashboard}).init(gateways=("gw1",))
        brokers.append(rig.start_broker())
        agent_yaml, local, _ = installed_gateway(rig, "gw1", work)
        brokers.append(local)
        settings = yaml.safe_load(agent_yaml.read_text())
        settings.update(status={"interval_s": 5, "state_file_interval_s": 1})   # the counters printed at the end
        agent_yaml.write_text(yaml.safe_dump(settings))
        cloud_yaml = rig.config
        say(f"brokers: gateway-local {local.url} (users agent, sensors), cloud 127.0.0.1:{rig.tls_port} (TLS) "
            f"and 127.0.0.1:{rig.plain_port} (the cloud's own services), anonymous clients refused")

        procs.append(start("cloud", [str(BIN / "edgewave-cloud"), "run", "--config", str(cloud_yaml)], work))
        procs.append(start("agent", [str(BIN / "edgewave-agent"), "run", "--config", str(agent_yaml)], work))

        say("pushing configs/gateway-config.trig to gw1 (signed, retained) and waiting for its ack")
        push = subprocess.run([str(BIN / "edgewave-cloud"), "push-config", "--config", str(cloud_yaml),
                               "--gateway", "gw1", "--timeout", "60", str(REPO / "configs/gateway-config.trig")],
                              capture_output=True, text=True, cwd=REPO)
        print(push.stdout.strip())
        if push.returncode != 0:
            print(push.stderr, file=sys.stderr)
            return 1

        truth = work / "truth.jsonl"
        say("simulated sensors: 60 s of gw1's armed residence, real time: an intrusion (room 1's door, then "
            "motion in room 6), room 5's CO2 sensor silent in alarm, fires in rooms 3 and 2")
        alerts = Alerts(load_settings(cloud_yaml, read_secrets=False).live_feed_path)
        with open(work / "sim.log", "w") as sim_log:
            sim = subprocess.Popen([str(BIN / "edgewave-sim"), "run", "--config", "configs/sim.yaml",
                                    "--scenario", "configs/scenarios/demo.yaml", "--gateway", "gw1",
                                    "--broker", local.url, "--speed", "1", "--truth", str(truth),
                                    "--username", "sensors",
                                    "--password-file", str(work / "gw1-root/etc/edgewave/sensors.password")],
                                   stdout=sim_log, stderr=subprocess.STDOUT, cwd=REPO)
            while sim.poll() is None:
                alerts.poll()
                time.sleep(0.5)
        if sim.returncode != 0:
            print((work / "sim.log").read_text(), file=sys.stderr)
            return 1
        expected: dict[str, int] = {}
        for line in truth.read_text().splitlines():
            row = json.loads(line)
            expected[row["pattern"]] = expected.get(row["pattern"], 0) + 1
        say(f"ground truth: {expected}; waiting for the cloud's aggregates")

        db = work / "cloud" / "cloud.db"
        deadline = time.monotonic() + args.wait
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            counts = dict(query(db, "SELECT pattern, SUM(count) FROM matches_per_minute "
                                    "WHERE gateway='gw1' GROUP BY pattern"))
            alerts.poll()
            if all(counts.get(p, 0) >= n for p, n in expected.items()):
                break
            time.sleep(1)
        alerts.poll()

        print("\nmatches per pattern (cloud SQLite vs ground truth):")
        for pattern in sorted(set(expected) | set(counts)):
            print(f"  {pattern:24} cloud={counts.get(pattern, 0):3}  truth={expected.get(pattern, 0):3}")
        print("\nrooms that raised fire alarms:")
        for value, count in query(db, "SELECT value, count FROM binding_top WHERE pattern='fire' "
                                      "AND variable='room' ORDER BY rank"):
            print(f"  {value:40} {count}")
        print("\nsignificant observations forwarded per property:")
        for prop, count in query(db, "SELECT property, SUM(count) FROM significant_per_minute "
                                     "GROUP BY property ORDER BY 2 DESC"):
            print(f"  {prop:60} {count}")
        print("\nCO2 per room, per minute (the per-instance query co2-per-room; a minute is reported when it ends):")
        # the first minute may hold only the scenario's first seconds and no reading (CO2 sensors report
        # every 30 s): wait for a minute with rows, which the idle clock closes at the latest a minute on
        while time.monotonic() < deadline and not query(db, "SELECT 1 FROM instance_results WHERE "
                                                            "query='co2-per-room' AND rows != '[]' LIMIT 1"):
            time.sleep(1)
        for begin, end, rows in query(db, "SELECT window_start, window_end, rows FROM instance_results "
                                          "WHERE gateway='gw1' AND query='co2-per-room' ORDER BY window_end"):
            minute = f"{time.strftime('%H:%M', time.localtime(begin / 1000))}-" \
                     f"{time.strftime('%H:%M', time.localtime(end / 1000))}"
            if rows == "[]":
                print(f"  {minute}  no CO2 reading in this minute")
            for row in json.loads(rows):
                figures = {k: v.split('"')[1] for k, v in row.items() if v.startswith('"')}
                print(f"  {minute}  {row['room'].rsplit('/', 1)[-1].rstrip('>'):8} average {figures.get('average')} "
                      f"ppm (lowest {figures.get('lowest')}, highest {figures.get('highest')}, "
                      f"{figures.get('readings')} readings)")
        print("\ndelay, match to cloud ingest:")
        for kind, n, p50, mx in query(db, "SELECT kind, SUM(count), MAX(p50_ms), MAX(max_ms) "
                                          "FROM delay_per_minute GROUP BY kind"):
            print(f"  {kind:12} events={n}  p50<={p50} ms  max={mx} ms")
        for gw, state, version in query(db, "SELECT gateway, state, config_version FROM gateways"):
            print(f"\ngateway {gw}: {state}, config version {version}")
        state = Path(settings["data_dir"]) / "status.json"
        counters = json.loads(state.read_text()).get("counters", {}) if state.exists() else {}
        if counters.get("bytes_in"):
            print(f"\nuplink: {counters['bytes_forwarded']} bytes sent for {counters['bytes_in']} sensor bytes "
                  f"({100 * counters['bytes_forwarded'] / counters['bytes_in']:.1f} %), "
                  f"{counters['forwarded']} events")
        ok = all(counts.get(p, 0) == n for p, n in expected.items())
        say("the cloud saw exactly the ground truth" if ok else "the cloud's counts differ from the ground truth")
        print(f"\ndashboard: http://127.0.0.1:{port}/  user {DEMO_USER}, password {password} "
              f"(also in {work / 'dashboard.password'})")
        if not args.exit:
            say("serving the dashboard; Ctrl-C stops everything")

            def stop(signum: int, frame: object) -> None:
                raise KeyboardInterrupt   # SIGTERM too, and SIGINT even where a shell ignored it for us

            signal.signal(signal.SIGINT, stop)
            signal.signal(signal.SIGTERM, stop)
            try:
                while all(proc.poll() is None for proc in procs):
                    time.sleep(1)
                say("a demo process ended; stopping")
            except KeyboardInterrupt:
                print()
        return 0 if ok else 1
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for broker in brokers:
            broker.stop()
        say(f"stopped; logs and data are in {work}")


if __name__ == "__main__":
    sys.exit(main())
