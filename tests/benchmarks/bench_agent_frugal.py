"""Benchmark: what the gateway agent costs a Raspberry-Pi-class gateway when it is not busy.

Two ``edgewave-agent run`` subprocesses with the shipped settings (``configs/agent.yaml``)
and the demo's config document (``configs/gateway-config.trig``), each between a local
Mosquitto of its own and one cloud Mosquitto: the first as shipped (durable windows on),
the second with ``state.durable_windows: false``. Both get the same sensor messages at
the same moments, so every figure is printed beside the same agent with durable windows
off, measured in the same run. A stand-in for ingest acknowledges what lands
(``ew/<gw>/events/landed``), as the cloud does.

Phases, one after the other:

1. **demo pace**: gw1's messages of the demo scenario (``configs/scenarios/demo.yaml``,
   recorded, about 170 messages and 160 kB a minute), published as timed, the recording
   repeated for the phase's length;
2. **10x pace**: the same, ten times faster;
3. **idle**: no sensor message at all, after a settling pause.

Printed per phase and agent: bytes written to storage per hour (``/proc/<pid>/io``
``write_bytes``: what reached the block layer's page cache accounting, so the data dir
must be on a disk filesystem, not tmpfs: the benchmark names the one it used and refuses
tmpfs), the peak resident memory (``VmHWM``) at the end of the demo-pace phase and again
at the end of the run (after the 10x phase), the resident memory (``VmRSS``) once started
and at the end of each of those phases; in the idle phase the agent's CPU in % of one core
and the written bytes per hour.

Targets (durable windows on), for the demo's pace: at most 10 MB written an hour, peak RSS
at most 40 MB; idle CPU under 1 % of a core. The exit code is non-zero if one is missed.

    python tests/benchmarks/bench_agent_frugal.py [--quick] [--minutes M] [--work DIR]

``--quick`` runs 60 s at the demo's pace, 30 s at 10x and 30 s idle (about 2.5 minutes);
the default is 5 minutes, 2 minutes and 1 minute. ``--work`` puts the brokers' and
agents' files there (default: a new directory under the system's temporary directory).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

import paho.mqtt.client as mqtt  # noqa: E402
import psutil  # noqa: E402
import yaml  # noqa: E402
from bench_agent import Receiver, demo_messages  # noqa: E402
from broker_process import MosquittoBroker  # noqa: E402
from paho.mqtt.enums import CallbackAPIVersion  # noqa: E402

KEY = "bench-key"
TARGET_MB_PER_HOUR = 10.0
TARGET_PEAK_MB = 40.0
TARGET_IDLE_CPU = 1.0


def filesystem_of(path: Path) -> tuple[str, str]:
    """(mount point, filesystem type) that holds ``path``: the longest mount point that is a prefix."""
    best = ("/", "?")
    resolved = str(path.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount, fstype, *_ = line.split()
        if (resolved == mount or resolved.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
            best = (mount, fstype)
    return best


def written_bytes(pid: int) -> int:
    """``write_bytes`` of /proc/<pid>/io: bytes the process caused to be sent to the storage layer."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/<pid>/io")


def memory_kb(pid: int, field: str) -> int:
    """``VmHWM`` (peak resident) or ``VmRSS`` (resident now) of /proc/<pid>/status, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/<pid>/status")


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def shipped_settings(work: Path, gateway: str, local: MosquittoBroker, cloud: MosquittoBroker,
                     extra: dict) -> dict:
    """configs/agent.yaml as shipped; only the brokers, the files and the key differ."""
    settings = yaml.safe_load((REPO / "configs/agent.yaml").read_text())
    settings.update(gateway=gateway, data_dir=str(work / f"data-{gateway}"))
    settings["local"].update(host=local.host, port=local.port)
    settings["cloud"].update(host=cloud.host, port=cloud.port)
    settings["config"].update(key=KEY, bootstrap=str(REPO / "configs/gateway-config.trig"))
    for section, values in extra.items():
        settings.setdefault(section, {}).update(values)
    return settings


def start_agent(work: Path, gateway: str, local: MosquittoBroker, cloud: MosquittoBroker, extra: dict,
                log) -> subprocess.Popen:  # noqa: ANN001
    path = work / f"agent-{gateway}.yaml"
    path.write_text(yaml.safe_dump(shipped_settings(work, gateway, local, cloud, extra)))
    return subprocess.Popen([sys.executable, "-m", "edgewave.agent.cli", "run", "--config", str(path)],
                            stdout=log, stderr=log, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def publisher(broker: MosquittoBroker, client_id: str) -> mqtt.Client:
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(2000)
    client.max_queued_messages_set(0)
    client.connect(broker.host, broker.port)
    client.loop_start()
    return client


def wait_subscribed(log_path: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_path.read_text(errors="replace").count("link=local event=subscribed") >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"the agents did not subscribe; log in {log_path}")


_OBSERVATION_MS = re.compile(r"/(\d{13})>")
_RESULT_TIME = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z"')


def shifted(payload: str, shift_ms: int) -> bytes:
    """The message as its sensor would send it ``shift_ms`` later: observation IRIs and result
    times moved on. A repeated recording otherwise repeats the very same observations, and
    every pattern matches each combination of the copies anew."""
    if not shift_ms:
        return payload.encode()
    payload = _OBSERVATION_MS.sub(lambda m: f"/{int(m.group(1)) + shift_ms}>", payload)

    def later(m: re.Match) -> str:
        when = datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc) + timedelta(milliseconds=shift_ms)
        return f'"{when.strftime("%Y-%m-%dT%H:%M:%S.")}{when.microsecond // 1000:03d}Z"'
    return _RESULT_TIME.sub(later, payload).encode()


def publish_recording(pubs: list[mqtt.Client], messages: list, seconds: float, speed: float,
                      first_lap: int = 0) -> tuple[int, int, int]:
    """The recording's messages at ``speed`` times their pace, repeated for ``seconds`` (each lap
    its own observations, ``shifted``), to every publisher at once (QoS 1, as the demo's
    sensors); returns (messages, payload bytes) per publisher, and the next lap's number."""
    first = messages[0].ms
    lap_ms = messages[-1].ms - first + 1000
    texts = [(m.ms - first, m.topic, "\n".join(m.lines) + "\n") for m in messages]
    t0 = time.perf_counter()
    sent = size = 0
    lap = 0
    while True:
        for offset_ms, topic, text in texts:
            at = (lap * lap_ms + offset_ms) / 1000 / speed
            if at >= seconds:
                time.sleep(max(0.0, t0 + seconds - time.perf_counter()))
                return sent, size, first_lap + lap + 1
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            payload = shifted(text, (first_lap + lap) * lap_ms)
            for pub in pubs:
                pub.publish(topic, payload, qos=1)
            sent += 1
            size += len(payload)
        lap += 1


class Phase:
    """What each agent wrote and used between ``__init__`` and ``stop``."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.t0 = time.perf_counter()
        self.written = [written_bytes(pid) for pid in pids]
        self.cpu = [cpu_seconds(pid) for pid in pids]

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.written = [written_bytes(pid) - w for pid, w in zip(self.pids, self.written)]
        self.cpu = [cpu_seconds(pid) - c for pid, c in zip(self.pids, self.cpu)]

    def mb_per_hour(self, i: int) -> float:
        return self.written[i] * 3600 / self.seconds / 1e6

    def cpu_percent(self, i: int) -> float:
        return 100 * self.cpu[i] / self.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 s at the demo's pace, 30 s at 10x, 30 s idle")
    parser.add_argument("--minutes", type=float, default=None, help="minutes at the demo's pace (default 5)")
    parser.add_argument("--work", type=Path, default=None, help="where the brokers' and agents' files go")
    args = parser.parse_args(argv)
    demo_s = 60.0 if args.quick else 300.0
    if args.minutes:
        demo_s = args.minutes * 60
    fast_s, idle_s, settle_s = (30.0, 30.0, 10.0) if args.quick else (120.0, 60.0, 15.0)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-frugal-", dir=args.work))
    mount, fstype = filesystem_of(work)
    if fstype in ("tmpfs", "ramfs"):
        print(f"{work} is on {fstype}: write_bytes would not count what is written; pass --work on a disk",
              file=sys.stderr)
        return 2
    messages = demo_messages()
    local_on = MosquittoBroker(work / "local-on").start()
    local_off = MosquittoBroker(work / "local-off").start()
    cloud = MosquittoBroker(work / "cloud").start()
    log_path = work / "agents.log"
    log = open(log_path, "wb")
    agents: list[subprocess.Popen] = []
    receivers: list[Receiver] = []
    try:
        agents.append(start_agent(work, "gw1", local_on, cloud, {}, log))
        agents.append(start_agent(work, "gw2", local_off, cloud, {"state": {"durable_windows": False}}, log))
        pids = [a.pid for a in agents]
        receivers = [Receiver(cloud, f"ew/{gw}/events", lambda payload: []) for gw in ("gw1", "gw2")]
        wait_subscribed(log_path, 2)
        time.sleep(2.0)
        pubs = [publisher(local_on, "bench-frugal-on"), publisher(local_off, "bench-frugal-off")]
        started_rss = [memory_kb(pid, "VmRSS") for pid in pids]

        demo = Phase(pids)
        demo_sent, demo_size, lap = publish_recording(pubs, messages, demo_s, 1.0)
        demo.stop()
        steady_rss = [memory_kb(pid, "VmRSS") for pid in pids]
        demo_peak = [memory_kb(pid, "VmHWM") for pid in pids]
        fast = Phase(pids)
        fast_sent, fast_size, _ = publish_recording(pubs, messages, fast_s, 10.0, lap)
        fast.stop()
        time.sleep(settle_s)
        idle = Phase(pids)
        time.sleep(idle_s)
        idle.stop()
        peak = [memory_kb(pid, "VmHWM") for pid in pids]
        end_rss = [memory_kb(pid, "VmRSS") for pid in pids]
        for agent in agents:
            if agent.poll() is not None:
                raise RuntimeError(f"an agent exited early (code {agent.returncode}); log in {log_path}")

        print(f"edgewave agent: storage, memory, idle ({'quick' if args.quick else 'full'}), "
              f"data dir on {mount} ({fstype}), loopback, real mosquitto")
        print(f"  demo pace: {demo_sent} msgs, {demo_size:,} bytes in {demo.seconds:.0f} s "
              f"({demo_sent * 3600 / demo.seconds:,.0f} msgs, {demo_size * 3600 / demo.seconds / 1e6:.1f} MB an hour); "
              f"10x: {fast_sent} msgs in {fast.seconds:.0f} s")
        print(f"{'figure':<50}{'durable on':>14}{'durable off':>14}{'target (on)':>14}")

        def row(name: str, on: float, off: float, fmt: str, target: str = "", ok: bool | None = None) -> None:
            verdict = "" if ok is None else ("  OK" if ok else "  MISSED")
            print(f"{name:<50}{format(on, fmt):>14}{format(off, fmt):>14}{target:>14}{verdict}")

        written_ok = demo.mb_per_hour(0) <= TARGET_MB_PER_HOUR
        row("written at the demo's pace (MB an hour)", demo.mb_per_hour(0), demo.mb_per_hour(1), ".2f",
            f"<= {TARGET_MB_PER_HOUR:g}", written_ok)
        row("  per sensor byte", demo.written[0] / demo_size, demo.written[1] / demo_size, ".3f")
        row("written at 10x the demo's pace (MB an hour)", fast.mb_per_hour(0), fast.mb_per_hour(1), ".2f")
        row("  per sensor byte", fast.written[0] / fast_size, fast.written[1] / fast_size, ".3f")
        row("written while idle (MB an hour)", idle.mb_per_hour(0), idle.mb_per_hour(1), ".2f")
        row("agent CPU at the demo's pace (% of a core)", demo.cpu_percent(0), demo.cpu_percent(1), ".2f")
        row("agent CPU at 10x (% of a core)", fast.cpu_percent(0), fast.cpu_percent(1), ".2f")
        idle_ok = idle.cpu_percent(0) < TARGET_IDLE_CPU
        row("agent CPU idle (% of a core)", idle.cpu_percent(0), idle.cpu_percent(1), ".2f",
            f"< {TARGET_IDLE_CPU:g}", idle_ok)
        peak_ok = demo_peak[0] / 1000 <= TARGET_PEAK_MB
        row("peak resident memory at the demo's pace (MB)", demo_peak[0] / 1000, demo_peak[1] / 1000, ".1f",
            f"<= {TARGET_PEAK_MB:g}", peak_ok)
        row("peak resident memory through 10x and idle (MB)", peak[0] / 1000, peak[1] / 1000, ".1f")
        row("resident memory once started (MB)", started_rss[0] / 1000, started_rss[1] / 1000, ".1f")
        row("resident memory, end of the demo pace (MB)", steady_rss[0] / 1000, steady_rss[1] / 1000, ".1f")
        row("resident memory, end of the idle phase (MB)", end_rss[0] / 1000, end_rss[1] / 1000, ".1f")
        missed = [name for name, ok in (("written an hour", written_ok), ("idle CPU", idle_ok),
                                        ("peak memory", peak_ok)) if not ok]
        print(f"targets missed: {', '.join(missed)}" if missed else "all targets met")
        return 1 if missed else 0
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.terminate()
                try:
                    agent.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    agent.kill()
                    agent.wait()
        for receiver in receivers:
            receiver.close()
        log.close()
        for broker in (local_on, local_off, cloud):
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
