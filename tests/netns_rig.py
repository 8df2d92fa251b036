"""The uplink between two network hosts, through the faults of a field link, on real parts.

A gateway's uplink is a cellular or DSL line: packets are lost and delayed, NAT boxes drop
an idle connection without a reset (a half-open TCP connection that only MQTT keepalive
finds), links are gone for minutes. tests/fault_rig.py fails processes and brokers on one
loopback interface; this rig puts the gateway and the cloud on network hosts of their own
so that the faults can be in the network between them:

- ``NetPair``: two network namespaces made for the run, the gateway's and the cloud's,
  joined by a veth pair (10.231.<n>.1 and .2/30). Each end of the veth has an nftables
  table of the run's own with a netdev ``ingress`` chain: every packet the link carries
  passes one of them where it arrives.
- The impairments are the same rule in both chains, for IP packets (why at the receiving
  end, and why not ARP: ``NetPair.link_rule``): random loss (``numgen random mod 100 < N
  drop``), a silent cut (every packet dropped: no RST or FIN reaches either side, so both
  keep a half-open connection), and back to clear. Latency (this kernel has no netem
  qdisc) comes from tests/link_proxy.py, a TCP proxy on the cloud's host between the
  agent and the cloud broker that delays each chunk, in order.
- ``NetnsRig`` is fault_rig's ``Rig`` (same scenario, same checks, same run) with its
  parts on the two hosts, each started with ``ip netns exec``: on the gateway the local
  Mosquitto, ``edgewave-agent run`` and the sensors (fault_rig's ``Sensors`` in a process
  of their own there); on the cloud the cloud Mosquitto (anonymous, as fault_rig's) and
  ``edgewave-cloud ingest``. The agent runs with the shipped keepalive (30 s), reconnect
  backoff (0.5-30 s) and landed re-send wait (15 s): what a gateway in the field does.
- ``SparkCheck``: the landing zones of several runs (each run its own gateway id) through
  one run of the real Spark job, whose aggregates must count each run's fires and
  significant observations once.

A run is checked as fault_rig checks one (``Outcome.problems``: every fire of the ground
truth and every event the agent made landed, counted once by event id), and the agent's
outbox file must hold no row after the drain. It also reports, for each time the link came
back, how long until the cloud landed an event (``Recovery``).

The namespaces, the veth pair and the nftables tables are removed when a run ends, however
it ends; their names hold the test process's id, and a later run removes what a killed one
left. Needs root, ``ip`` (iproute2) and ``nft`` (nftables): ``require_network_namespaces``
fails, saying which is missing.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from agent_harness import AgentProcess
from broker_process import MosquittoBroker, find_mosquitto
from cloud_harness import CloudProcess, query, write_config
from fault_rig import Message, Outcome, Recording, Rig, Sensors, key_variable

NAME_PREFIX = "ewnf"            # namespaces: ewnf-gw-<pid>x<n>, ewnf-cloud-<pid>x<n>
TABLE = "ewnf_link"             # the nftables table on each end of the veth
BROKER_PORT = 1883
PROXY_PORT = 1884
LINK_PROXY = Path(__file__).with_name("link_proxy.py")
# What a gateway in the field runs with (configs/agent.yaml); AgentProcess's defaults are
# shorter, for tests that fail processes, not links.
SHIPPED_AGENT = {"reconnect": {"min_delay_s": 0.5, "max_delay_s": 30.0},
                 "uplink": {"landed": {"resend_after_s": 15}}}


# -- the machine ---------------------------------------------------------------------------------
def _tool(name: str) -> str | None:
    """A system binary; /usr/sbin and /sbin are often not on a user's PATH."""
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_network_namespaces() -> None:
    """Fail, saying why, where the rig cannot be built: these tests never skip."""
    why = []
    if os.geteuid() != 0:
        why.append(f"they need root to make network namespaces, veth pairs and nftables tables, and this "
                   f"process runs as uid {os.geteuid()}: run them as root")
    ip, nft = _tool("ip"), _tool("nft")
    if ip is None:
        why.append("`ip` (iproute2) is not installed")
    else:
        listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=False)
        if listed.returncode != 0:
            why.append(f"`ip netns` does not work here: {listed.stderr.strip()}")
    if nft is None:
        why.append("`nft` (nftables) is not installed")
    if why:
        raise AssertionError("the network-fault tests cannot run: " + "; ".join(why) +
                             " (`make setup` installs iproute2 and nftables: scripts/install-system-packages.sh)")


def _run(*command: str, stdin: str | None = None) -> None:
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")


def _namespaces() -> list[str]:
    listed = subprocess.run([_tool("ip") or "ip", "netns", "list"], capture_output=True, text=True, check=False)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def _remove_stale() -> None:
    """Namespaces a killed run left (its process is gone): removed, with their veth and table."""
    for name in _namespaces():
        if not name.startswith(NAME_PREFIX + "-"):
            continue
        pid = name.rsplit("-", 1)[-1].split("x")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            subprocess.run([_tool("ip") or "ip", "netns", "del", name], capture_output=True, check=False)


class NetPair:
    """Two network hosts of the run's own, the gateway's and the cloud's, joined by a veth pair."""

    _made = itertools.count(1)

    def __init__(self) -> None:
        n = next(NetPair._made)
        tag = f"{os.getpid()}x{n}"              # unique per run; a killed run's names never clash
        self.gateway = f"{NAME_PREFIX}-gw-{tag}"
        self.cloud = f"{NAME_PREFIX}-cloud-{tag}"
        self.gateway_if = f"ewg{tag}"           # at most 15 characters
        self.cloud_if = f"ewc{tag}"
        subnet = (n - 1) % 250 + 1
        self.gateway_address = f"10.231.{subnet}.1"
        self.cloud_address = f"10.231.{subnet}.2"
        self.ip = _tool("ip") or "ip"
        self.nft_binary = _tool("nft") or "nft"
        self._made_namespaces: list[str] = []

    def exec(self, namespace: str) -> list[str]:
        """The prefix that runs a command on ``namespace``'s host."""
        return [self.ip, "netns", "exec", namespace]

    def create(self) -> None:
        _remove_stale()
        try:
            for namespace in (self.gateway, self.cloud):
                _run(self.ip, "netns", "add", namespace)
                self._made_namespaces.append(namespace)
            _run(self.ip, "link", "add", self.gateway_if, "netns", self.gateway, "type", "veth",
                 "peer", "name", self.cloud_if, "netns", self.cloud)
            for namespace, interface, address in ((self.gateway, self.gateway_if, self.gateway_address),
                                                  (self.cloud, self.cloud_if, self.cloud_address)):
                _run(self.ip, "-n", namespace, "addr", "add", f"{address}/30", "dev", interface)
                _run(self.ip, "-n", namespace, "link", "set", interface, "up")
                _run(self.ip, "-n", namespace, "link", "set", "lo", "up")
            for namespace, interface in ((self.gateway, self.gateway_if), (self.cloud, self.cloud_if)):
                self.nft(namespace, f"""table netdev {TABLE} {{
  chain arriving {{ type filter hook ingress device "{interface}" priority 0; policy accept; }}
}}
""")
        except BaseException:
            self.remove()
            raise

    def nft(self, namespace: str, script: str) -> None:
        """Run an nftables script (one transaction) on ``namespace``'s host."""
        _run(*self.exec(namespace), self.nft_binary, "-f", "-", stdin=script)

    def link_rule(self, rule: str | None) -> None:
        """The rule every IP packet crossing the veth meets, either way (None: the link is clear).

        Each direction is dropped where it arrives (the ingress of the receiving end), so
        that neither host's own stack sees a packet fail to leave: a drop in the sender's
        egress hook is a local transmit failure, and Linux ended such a connection with
        ETIMEDOUT about 8 s into a cut, which no NAT box does. ARP is left alone too: the
        gateway's next hop still answers, the loss is beyond it (dropping ARP made the
        kernel mark the neighbour failed within seconds and report "no route to host")."""
        for namespace in (self.gateway, self.cloud):
            script = f"flush chain netdev {TABLE} arriving\n"
            if rule:
                script += f"add rule netdev {TABLE} arriving meta protocol {{ ip, ip6 }} {rule}\n"
            self.nft(namespace, script)

    def remove(self) -> None:
        """The table, the veth pair and both namespaces; raises if any is left."""
        errors = []
        for namespace in self._made_namespaces:        # all of it goes with the namespaces anyway
            subprocess.run([*self.exec(namespace), self.nft_binary, "delete", "table", "netdev", TABLE],
                           capture_output=True, check=False)
        if self.gateway in self._made_namespaces:
            subprocess.run([self.ip, "-n", self.gateway, "link", "del", self.gateway_if], capture_output=True,
                           check=False)
        for namespace in reversed(self._made_namespaces):
            result = subprocess.run([self.ip, "netns", "del", namespace], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                errors.append(f"ip netns del {namespace}: {result.stderr.strip()}")
        left = set(self._made_namespaces) & set(_namespaces())
        self._made_namespaces = sorted(left)
        if errors or left:
            raise RuntimeError(f"network namespaces left behind: {sorted(left)} {errors}")


# -- the parts on their hosts ----------------------------------------------------------------------
def _read_line(pipe: IO[bytes], timeout: float) -> str:
    """One line from a child's stdout, or '' after ``timeout``."""
    ready, _, _ = select.select([pipe], [], [], timeout)
    return pipe.readline().decode(errors="replace").strip() if ready else ""


class NetnsBroker(MosquittoBroker):
    """A Mosquitto broker on one of the rig's hosts, listening on that host's address."""

    def __init__(self, workdir: Path, prefix: list[str], host: str, *, autosave_interval_s: int = 1) -> None:
        self.prefix = prefix
        super().__init__(workdir, port=BROKER_PORT, autosave_interval_s=autosave_interval_s)
        self.host = host
        self._write_config()

    def start(self, timeout: float = 15.0) -> NetnsBroker:
        """Started there; returns once it accepts connections there."""
        if self.running:
            return self
        self.proc = subprocess.Popen([*self.prefix, find_mosquitto(), "-c", str(self.config_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        probe = subprocess.Popen([*self.prefix, sys.executable, "-I", "-S", "-c", _PROBE, self.host, str(self.port),
                                  str(timeout)])
        while probe.poll() is None:
            if self.proc.poll() is not None:
                probe.kill()
                probe.wait()
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
                raise RuntimeError(f"mosquitto exited with {self.proc.returncode}: {err}{log}")
            time.sleep(0.05)
        if probe.returncode != 0:
            self.kill()
            raise RuntimeError(f"mosquitto did not accept connections on {self.url} within {timeout}s")
        return self


# Run on the broker's host (this process cannot reach it): connect until it works or time is up.
_PROBE = """import socket, sys, time
host, port, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
"""


class SensorsProcess:
    """fault_rig's ``Sensors`` on the gateway's host: this file run there as a process of its own,
    publishing the recording to the local broker. ``started`` is its monotonic start (one clock
    for every process of the machine), ``done`` is set when it exits."""

    def __init__(self, prefix: list[str], broker: MosquittoBroker, messages: list[Message], work: Path) -> None:
        path = work / "sensors.jsonl"
        path.write_text("".join(json.dumps([at, topic, payload.decode()]) + "\n" for at, topic, payload in messages))
        self.log_path = work / "sensors.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([*prefix, sys.executable, str(Path(__file__)), "sensors", str(path),
                                          broker.host, str(broker.port)], stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        line = _read_line(self.proc.stdout, 30)
        if not line.startswith("started "):
            self.close()
            raise AssertionError(f"the sensors did not start ({line!r}): {self.log_path.read_text()[-2000:]}")
        self.started = float(line.split()[1])
        self.done = threading.Event()
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self) -> None:
        self.proc.wait()
        self.done.set()

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def close(self) -> None:
        _end(self.proc)


def _end(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` (killed if it takes more than 10 s) and close its stdout pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _sensors_main(messages_path: str, host: str, port: str) -> None:
    """In the child: publish the recording, at its pace, then exit."""
    messages = [(at, topic, payload.encode()) for at, topic, payload in
                (json.loads(line) for line in Path(messages_path).read_text().splitlines())]
    sensors = Sensors(SimpleNamespace(host=host, port=int(port)), messages, client_id="netns-rig-sensors")
    print(f"started {sensors.started!r}", flush=True)
    sensors.done.wait()
    sensors.close()


class DelayProxy:
    """tests/link_proxy.py on the cloud's host, between the agent and the cloud broker; starts
    without delay (``delay()`` turns it on, ``passthrough()`` off)."""

    def __init__(self, prefix: list[str], listen: tuple[str, int], upstream: tuple[str, int],
                 delay_ms: float, jitter_ms: float, log_path: Path) -> None:
        self.host, self.port = listen
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([*prefix, sys.executable, str(LINK_PROXY), "--listen", f"{self.host}:{self.port}",
                                          "--upstream", f"{upstream[0]}:{upstream[1]}", "--delay-ms", str(delay_ms),
                                          "--jitter-ms", str(jitter_ms), "--passthrough"],
                                         stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        line = _read_line(self.proc.stdout, 30)
        if not line.startswith("listening"):
            self.stop()
            raise AssertionError(f"the delaying proxy did not start ({line!r}): {log_path.read_text()[-2000:]}")

    def delay(self) -> None:
        self.proc.send_signal(signal.SIGUSR2)

    def passthrough(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        _end(self.proc)


# -- what a run reports ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkChange:
    """A change the rig made to the link, with the outbox then (to tell what waited for it)."""

    state: str                  # "loss 30%", "cut", "delay 500±100 ms", or "clear"
    at_s: float                 # scenario seconds
    wall_ms: int
    waiting: int | None = None  # the outbox's depth then (the agent's status file)


@dataclass(frozen=True)
class Recovery:
    """The link came back: how long until the cloud landed an event."""

    at_s: float
    waiting: int | None         # events in the outbox when it came back
    first_s: float | None       # seconds to the first event landed after it (before the next fault); None: none
    backlog: int                # events made before it came back and landed after

    def describe(self) -> str:
        first = ("no event landed after it: none was left to send" if self.first_s is None
                 else f"first event landed {self.first_s:.2f} s later")
        return (f"link back at {self.at_s:.1f}s with {self.waiting if self.waiting is not None else '?'} events "
                f"in the outbox: {first}; {self.backlog} events made before it landed after it")


@dataclass
class NetOutcome(Outcome):
    """fault_rig's Outcome, and what the link did to the run (for the report and the Spark check)."""

    gateway: str = ""
    link: list[LinkChange] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    cloud_link: list[tuple[float, str]] = field(default_factory=list)   # (scenario s, agent log event)
    connect_failures: int = 0
    broker_timeouts: int = 0                  # the cloud broker gave up on a silent client (keepalive)
    outbox_rows_left: int = 0
    sensors_rc: int | None = 0
    delivery_s: list[float] = field(default_factory=list)  # made while impaired -> first landed
    landing: Path | None = None

    def problems(self) -> list[str]:
        found = super().problems()
        if self.sensors_rc != 0:
            found.insert(0, f"the sensors exited with {self.sensors_rc}")
        if self.outbox_rows_left:
            found.append(f"{self.outbox_rows_left} rows left in the agent's outbox after it drained")
        return found

    def recovery_times(self) -> list[float | None]:
        return [r.first_s for r in self.recoveries]

    def report(self) -> str:
        lines = [f"{self.gateway}: {self.summary()}",
                 "  link: " + ", ".join(f"{c.state} at {c.at_s:.1f}s" for c in self.link),
                 "  agent's cloud link: " + (", ".join(f"{what} at {at:.1f}s" for at, what in self.cloud_link)
                                             or "no change") +
                 f"; {self.connect_failures} connect attempts failed; the cloud broker timed out "
                 f"{self.broker_timeouts} silent client(s)"]
        if self.delivery_s:
            lines.append(f"  {len(self.delivery_s)} events made while the link was impaired landed after "
                         f"{statistics.median(self.delivery_s):.2f} s (median), {max(self.delivery_s):.2f} s (max)")
        lines += [f"  {r.describe()}" for r in self.recoveries]
        return "\n".join(lines)


def _wall_ms(log_line: str) -> int | None:
    match = re.match(r"ts=(\S+)Z ", log_line)
    if not match:
        return None
    stamp = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)


def _landing_records(landing: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((landing / "events").rglob("*")):
        if path.is_file():
            records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


# -- the rig -----------------------------------------------------------------------------------------
class NetnsRig(Rig):
    """fault_rig's Rig with the gateway and the cloud on two network hosts, and link faults.

    ``gateway``: the agent's gateway id (one per run, so that runs can share one Spark run);
    ``delay``: (ms, jitter ms) puts the delaying proxy between the agent and the cloud broker."""

    def __init__(self, work: Path, recording: Recording, *, gateway: str,
                 delay: tuple[float, float] | None = None) -> None:
        require_network_namespaces()
        self.net = NetPair()
        self.gateway = gateway
        self.delay_ms = delay
        self.proxy: DelayProxy | None = None
        self.link_changes: list[LinkChange] = []
        self.started_wall = 0.0
        super().__init__(work, recording, agent_settings=SHIPPED_AGENT)

    # -- parts ---------------------------------------------------------------------------------
    def make_broker(self, name: str, **options: Any) -> MosquittoBroker:
        if name == "local":
            return NetnsBroker(self.work / name, self.net.exec(self.net.gateway), "127.0.0.1", **options)
        return NetnsBroker(self.work / name, self.net.exec(self.net.cloud), self.net.cloud_address, **options)

    def make_agent(self, overrides: dict) -> AgentProcess:
        uplink = self.cloud if self.delay_ms is None else SimpleNamespace(host=self.net.cloud_address, port=PROXY_PORT)
        return AgentProcess(self.work / "agent", self.local, uplink, dict(overrides, gateway=self.gateway),
                            command_prefix=self.net.exec(self.net.gateway))

    def start_sensors(self) -> SensorsProcess:
        sensors = SensorsProcess(self.net.exec(self.net.gateway), self.local, self.recording.messages, self.work)
        self.started_wall = time.time() - (time.monotonic() - sensors.started)
        return sensors

    def start_ingest(self, worker: int, env: dict[str, str] | None = None) -> CloudProcess:
        proc = CloudProcess(["ingest", "--config", str(self.cloud_config), "--worker", str(worker)],
                            self.work / f"ingest-{worker}.log", env=env, prefix=self.net.exec(self.net.cloud))
        self.ingest[worker] = proc
        return proc

    # -- link faults (actions for ``run``, at scenario seconds) -----------------------------------------
    def _changed(self, state: str) -> None:
        waiting = (self.agent.state().get("outbox") or {}).get("depth")
        self.link_changes.append(LinkChange(state, self.now_s(), int(time.time() * 1000), waiting))
        self.faults.append(f"link {state} at {self.now_s():.1f}s")

    def lose(self, percent: int) -> Callable[[], None]:
        """Drop ``percent`` % of the packets, each way."""
        def action() -> None:
            self.net.link_rule(f"numgen random mod 100 < {percent} drop")
            self._changed(f"loss {percent}%")
        return action

    def cut(self) -> Callable[[], None]:
        """Drop every packet, silently: no RST, no FIN reaches either side."""
        def action() -> None:
            self.net.link_rule("drop")
            self._changed("cut")
        return action

    def delay(self) -> Callable[[], None]:
        def action() -> None:
            assert self.proxy is not None, "NetnsRig(delay=...) puts the proxy in the path"
            self.proxy.delay()
            self._changed(f"delay {self.proxy.delay_ms:.0f}±{self.proxy.jitter_ms:.0f} ms")
        return action

    def clear(self) -> Callable[[], None]:
        """The link is good again: no drop rule, no delay."""
        def action() -> None:
            self.net.link_rule(None)
            if self.proxy is not None:
                self.proxy.passthrough()
            self._changed("clear")
        return action

    def flapping(self, start_s: float, end_s: float, down_s: float, up_s: float) -> list[tuple[float, Callable[[], None]]]:
        """Cut for ``down_s``, clear for ``up_s``, over and over from ``start_s``; clear by ``end_s``."""
        faults = []
        at = start_s
        while at + down_s <= end_s:
            faults += [(at, self.cut()), (at + down_s, self.clear())]
            at += down_s + up_s
        return faults

    # -- a run ------------------------------------------------------------------------------------
    def run(self, faults: list[tuple[float, Callable[[], None]]], *,
            ingest_env: dict[int, dict[str, str]] | None = None, timeout_s: float = 300) -> NetOutcome:
        """The scenario through the faults (then the link clear), on the two hosts; what landed."""
        self.net.create()
        try:
            if self.delay_ms is not None:
                self.proxy = DelayProxy(self.net.exec(self.net.cloud), (self.net.cloud_address, PROXY_PORT),
                                        (self.net.cloud_address, BROKER_PORT), *self.delay_ms,
                                        self.work / "link-proxy.log")
            try:
                outcome = super().run(faults, ingest_env=ingest_env, timeout_s=timeout_s)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{self._diagnosis()}") from exc
        finally:
            if self.proxy is not None:
                self.proxy.stop()
            self.net.remove()
        return self._net_outcome(outcome)

    def _diagnosis(self) -> str:
        changes = ", ".join(f"{c.state} at {c.at_s:.1f}s" for c in self.link_changes)
        tail = "\n".join(self.agent.log().splitlines()[-25:])
        return f"link: {changes}\nthe agent's log, last lines:\n{tail}"

    def _net_outcome(self, outcome: Outcome) -> NetOutcome:
        records = _landing_records(self.work / "landing")
        first_landed: dict[str, int] = {}
        made: dict[str, int] = {}
        for r in records:
            first_landed[r["id"]] = min(first_landed.get(r["id"], math.inf), r["ingestTime"])
            made[r["id"]] = r["emittedAt"]
        agent_log = outcome.agent_log.splitlines()
        cloud_link = []
        for line in agent_log:
            if "link=cloud event=disconnected" in line or "link=cloud event=connected" in line:
                wall = _wall_ms(line)
                if wall is not None:
                    what = "lost" if "disconnected" in line else "connected"
                    cloud_link.append((wall / 1000 - self.started_wall, what))
        broker_log = self.cloud.log_path.read_text(errors="replace") if self.cloud.log_path.exists() else ""
        sensors = self.sensors
        return NetOutcome(
            **vars(outcome), gateway=self.gateway, link=list(self.link_changes),
            recoveries=self._recoveries(records), cloud_link=cloud_link,
            connect_failures=sum("link=cloud event=connect_failed" in line for line in agent_log),
            broker_timeouts=broker_log.count("has exceeded timeout"),
            outbox_rows_left=_outbox_rows(self.agent.data_dir / "outbox.db"),
            sensors_rc=sensors.returncode if isinstance(sensors, SensorsProcess) else 0,
            delivery_s=[(first_landed[i] - made[i]) / 1000 for i in made if self._impaired(made[i])],
            landing=self.work / "landing")

    def _impaired(self, wall_ms: int) -> bool:
        """Whether the link was impaired at ``wall_ms``."""
        state = "clear"
        for change in self.link_changes:
            if change.wall_ms > wall_ms:
                break
            state = change.state
        return state != "clear"

    def _recoveries(self, records: list[dict[str, Any]]) -> list[Recovery]:
        found = []
        for i, change in enumerate(self.link_changes):
            if change.state != "clear":
                continue
            until = next((c.wall_ms for c in self.link_changes[i + 1:] if c.state != "clear"), math.inf)
            after = [r for r in records if change.wall_ms <= r["ingestTime"] < until]
            first = min((r["ingestTime"] for r in after), default=None)
            found.append(Recovery(at_s=change.at_s, waiting=change.waiting,
                                  first_s=None if first is None else (first - change.wall_ms) / 1000,
                                  backlog=len({r["id"] for r in after if r["emittedAt"] < change.wall_ms})))
        return found


def _outbox_rows(outbox: Path) -> int:
    """Rows still in the outbox file (sent or not): none once everything landed."""
    conn = sqlite3.connect(outbox)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        conn.close()


# -- the cloud's aggregates, once for every run ----------------------------------------------------------
class SparkCheck:
    """The landing zones of several runs (a gateway id each) through one run of the real Spark
    job (``edgewave-cloud spark --available-now``): its aggregates must count each run's fires,
    room by room, and its significant observations exactly once (the job drops what a re-send
    landed twice by event id). One run, not one per fault: the job takes a minute to start."""

    def __init__(self, work: Path) -> None:
        self.work = Path(work)
        self.runs: list[NetOutcome] = []
        self.seconds = 0.0

    def add(self, outcome: NetOutcome) -> None:
        self.runs.append(outcome)

    def problems(self) -> list[str]:
        if not self.runs:
            return []
        events = self.work / "landing" / "events"
        for run in self.runs:
            assert run.landing is not None
            for path in sorted((run.landing / "events").rglob("*.jsonl")):
                target = events / path.parent.name / f"{run.gateway}-{path.name}"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        config = write_config(self.work)
        started = time.monotonic()
        job = CloudProcess(["spark", "--config", str(config), "--available-now"], self.work / "spark.log")
        try:
            code = job.wait(timeout=420)
        except subprocess.TimeoutExpired:
            job.kill9()
            return [f"the Spark job did not finish in 420 s: {job.log()[-3000:]}"]
        self.seconds = time.monotonic() - started
        if code != 0:
            return [f"the Spark job exited with {code}: {job.log()[-3000:]}"]
        database = self.work / "cloud.db"
        matches = Counter({(g, p): n for g, p, n in query(
            database, "SELECT gateway, pattern, SUM(count) FROM matches_per_minute GROUP BY gateway, pattern")})
        significant = dict(query(database, "SELECT gateway, SUM(count) FROM significant_per_minute GROUP BY gateway"))
        rooms = Counter({v: n for v, n in query(
            database, "SELECT value, SUM(count) FROM binding_values WHERE variable = 'room' GROUP BY value")})
        want_matches: Counter = Counter()
        want_rooms: Counter = Counter()
        found = []
        for run in self.runs:
            for (pattern, key), n in run.truth.items():
                want_matches[(run.gateway, pattern)] += n
                if key_variable(pattern) == "room":
                    want_rooms[key] += n
            if significant.get(run.gateway, 0) != run.significant:
                found.append(f"{run.gateway}: {significant.get(run.gateway, 0)} significant observations in the "
                             f"aggregates, {run.significant} landed")
        if matches != want_matches:
            found.append(f"matches in the aggregates {dict(matches)} != the ground truth {dict(want_matches)}")
        if rooms != want_rooms:
            found.append(f"rooms in the aggregates {dict(rooms)} != the ground truth {dict(want_rooms)}")
        return found

    def summary(self) -> str:
        return (f"one Spark run over {len(self.runs)} runs' landing zones ({', '.join(r.gateway for r in self.runs)}): "
                f"{self.seconds:.0f} s")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "sensors":
        with contextlib.suppress(KeyboardInterrupt):
            _sensors_main(*sys.argv[2:])
    else:
        sys.exit(f"usage: {sys.argv[0]} sensors MESSAGES.jsonl HOST PORT (the rig runs it)")
