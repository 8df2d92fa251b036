"""A provisioned fleet for tests: the real `edgewave-cloud tls-init / broker-init / gateway add`
in a temporary directory, and real Mosquitto brokers run with the files they generate.

Used by tests/integration/test_fleet_*.py and scripts/demo.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import paho.mqtt.client as mqtt
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from broker_process import MosquittoBroker, free_port

if TYPE_CHECKING:
    from edgewave.cloud.dynsec_control import DynsecControl
from edgewave.shared.mosquitto_files import (TlsListener, broker_conf_text, gateway_cloud_client_id, hash_password,
                                             write_password_file)


@dataclass
class Creds:
    """What a client needs to reach a broker (shaped like MosquittoBroker for agent_harness)."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None
    client_tls: dict[str, str] | None = None


class GeneratedBroker(MosquittoBroker):
    """Mosquitto run with a configuration edgewave generated; the test adds only its log,
    and ``user root`` when the tests run as root (mosquitto would switch users)."""

    def __init__(self, workdir: Path, conf_text: str, port: int) -> None:
        self.conf_text = conf_text
        super().__init__(workdir, port=port)

    def _write_config(self) -> None:
        lines = [self.conf_text, f"log_dest file {self.log_path}", "log_type error", "log_type warning",
                 "log_type notice"]
        if os.geteuid() == 0:
            lines.append("user root")
        self.config_path.write_text("\n".join(lines) + "\n")


def cloud_cli(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """`edgewave-cloud ARGS` as a subprocess."""
    result = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", *args], capture_output=True,
                            text=True, timeout=120, cwd=cwd)
    if check and result.returncode != 0:
        raise AssertionError(f"edgewave-cloud {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def agent_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`edgewave-agent ARGS` as a subprocess."""
    result = subprocess.run([sys.executable, "-m", "edgewave.agent.cli", *args], capture_output=True,
                            text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"edgewave-agent {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


class FleetRig:
    """A cloud directory with its CA, broker files and provisioned gateways."""

    def __init__(self, root: Path, *, server_names: tuple[str, ...] = ("localhost", "127.0.0.1"),
                 require_client_certificate: bool = False, extra: dict[str, Any] | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.plain_port = free_port()
        self.tls_port = free_port()
        self.tls_dir = self.root / "tls"
        self.config = self.root / "cloud.yaml"
        secrets = self.root / "secrets"
        cfg: dict[str, Any] = {
            "broker": {"host": "127.0.0.1", "port": self.plain_port, "username": "edgewave-cloud",
                       "password_file": str(secrets / "cloud-broker.password")},
            "landing_zone": str(self.root / "landing"),
            "database": str(self.root / "cloud.db"),
            "ingest": {"roll_seconds": 1, "commit_interval_ms": 20},
            "push": {"ack_timeout_s": 20},
            "fleet": {
                "secrets_dir": str(secrets),
                "bundles_dir": str(self.root / "bundles"),
                "dynsec_file": str(self.root / "broker/dynamic-security.json"),
                "broker_conf": str(self.root / "broker/mosquitto.conf"),
                "broker_pid_file": str(self.root / "broker/mosquitto.pid"),
                "persistence_location": str(self.root / "broker/data"),
                "public_host": "127.0.0.1",
                "public_port": self.tls_port,
                "plain_listener": f"127.0.0.1:{self.plain_port}",
                "tls_ca": str(self.tls_dir / "ca.crt"),
                "tls_cert": str(self.tls_dir / "server.crt"),
                "tls_key": str(self.tls_dir / "server.key"),
                "tls_ca_key": str(self.tls_dir / "ca.key"),
                "require_client_certificate": require_client_certificate,
            },
        }
        for section, values in (extra or {}).items():
            cfg.setdefault(section, {}).update(values)
        self.config.write_text(yaml.safe_dump(cfg))
        self.server_names = server_names
        self.broker: GeneratedBroker | None = None

    def cloud(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return cloud_cli(*args, "--config", str(self.config), check=check)

    def init(self, gateways: tuple[str, ...] = ()) -> "FleetRig":
        names = [a for name in self.server_names for a in ("--name", name)]
        cloud_cli("tls-init", "--dir", str(self.tls_dir), *names)
        self.cloud("broker-init")
        for gateway in gateways:
            self.cloud("gateway", "add", gateway)
        return self

    def start_broker(self) -> GeneratedBroker:
        conf = (self.root / "broker/mosquitto.conf").read_text()
        (self.root / "broker/data").mkdir(parents=True, exist_ok=True)
        self.broker = GeneratedBroker(self.root / "broker-run", conf, self.plain_port).start()
        return self.broker

    def start_legacy_broker(self) -> GeneratedBroker:
        """The cloud broker as provisioning configured it before dynamic security: a password
        file and an ACL file (which check no subscription and bind no client id), on the
        rig's ports. Stands in for a running fleet an upgrade starts from."""
        users = {"edgewave-cloud": hash_password(self.secret("cloud-broker.password"))}
        acl = ["user edgewave-cloud", "topic read ew/#", "topic write ew/#", ""]
        for gateway in sorted(p.name for p in (self.root / "secrets/gateways").iterdir()):
            users[gateway] = hash_password(self.secret("gateways", gateway, "broker.password"))
            acl += [f"user {gateway}", f"topic write ew/{gateway}/#", f"topic read ew/{gateway}/#", ""]
        broker_dir = self.root / "broker"
        write_password_file(broker_dir / "passwd", users)
        (broker_dir / "acl").write_text("\n".join(acl))
        tls = TlsListener(self.tls_port, str(self.tls_dir / "ca.crt"), str(self.tls_dir / "server.crt"),
                          str(self.tls_dir / "server.key"))
        conf = broker_conf_text(password_file=str(broker_dir / "passwd"), acl_file=str(broker_dir / "acl"),
                                plain_listener=("127.0.0.1", self.plain_port), tls=tls)
        return GeneratedBroker(self.root / "legacy-broker-run", conf, self.plain_port).start()

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.kill()

    # -- what clients need -------------------------------------------------------------------
    def secret(self, *parts: str) -> str:
        return (self.root / "secrets" / Path(*parts)).read_text().strip()

    def cloud_creds(self) -> Creds:
        return Creds("127.0.0.1", self.plain_port, "edgewave-cloud", self.secret("cloud-broker.password"))

    def gateway_creds(self, gateway: str, *, tls: bool = True) -> Creds:
        password = self.secret("gateways", gateway, "broker.password")
        if not tls:
            return Creds("127.0.0.1", self.plain_port, gateway, password)
        return Creds("127.0.0.1", self.tls_port, gateway, password, {"ca": str(self.tls_dir / "ca.crt")})

    def gateway_probe(self, gateway: str, client_id: str | None = None) -> "Probe":
        """A probe as ``gateway`` over TLS, with the one client id its user may use unless told otherwise."""
        return Probe(self.gateway_creds(gateway), client_id or gateway_cloud_client_id(gateway))

    def admin(self) -> "DynsecControl":
        """The fleet's admin connection to the running broker's control topic, as `gateway add/remove` use."""
        from edgewave.cloud.dynsec_control import DynsecControl
        from edgewave.shared.broker import BrokerSettings

        return DynsecControl(BrokerSettings(host="127.0.0.1", port=self.plain_port), "edgewave-admin",
                             self.secret("broker-admin.password"))

    def broker_clients(self) -> dict[str, dict[str, Any]]:
        """The running broker's dynamic-security clients (username -> clientid, roles)."""
        with self.admin() as control:
            listed = control.run([{"command": "listClients", "verbose": True}])[0]["data"]["clients"]
        return {c["username"]: {"clientid": c.get("clientid"), "roles": [r["rolename"] for r in c["roles"]]}
                for c in listed}

    def bundle(self, gateway: str) -> Path:
        return self.root / "bundles" / f"{gateway}.tar.gz"

    def bundle_file(self, gateway: str, name: str) -> bytes:
        with tarfile.open(self.bundle(gateway), "r:gz") as tar:
            member = tar.extractfile(f"{gateway}/{name}")
            assert member is not None
            return member.read()


@contextmanager
def running_fleet(root: Path, gateways: tuple[str, ...]) -> Iterator[FleetRig]:
    """A provisioned fleet with its cloud broker started; the broker is stopped afterwards."""
    rig = FleetRig(root).init(gateways=gateways)
    rig.start_broker()
    try:
        yield rig
    finally:
        rig.stop()


class Probe:
    """A bare MQTT 5 client that records what the broker answers: CONNACK, SUBACK and PUBACK
    reason codes, and messages received."""

    def __init__(self, creds: Creds, client_id: str) -> None:
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5)
        if creds.username is not None:
            self.client.username_pw_set(creds.username, creds.password)
        if creds.client_tls:
            self.client.tls_set(ca_certs=creds.client_tls["ca"], certfile=creds.client_tls.get("cert"),
                                keyfile=creds.client_tls.get("key"))
        self.connack = threading.Event()
        self.connect_rc: Any = None
        self.disconnected = threading.Event()
        self.messages: list[tuple[str, bytes]] = []
        self.suback: dict[int, list[Any]] = {}
        self.puback: dict[int, int] = {}
        self._events = threading.Condition()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda c, u, f, rc, p: self.disconnected.set()
        self.client.on_subscribe = self._on_subscribe
        self.client.on_publish = self._on_publish
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(60, 120)     # one connection: a probe never retries by itself
        try:
            self.client.connect(creds.host, creds.port, keepalive=10)
        except Exception as exc:      # TLS verification failures surface here
            self.connect_error: Exception | None = exc
            return
        self.connect_error = None
        self.client.loop_start()
        self.connack.wait(30)             # TLS handshakes are slow on a loaded 2-core machine

    @property
    def connected(self) -> bool:
        return self.connect_error is None and self.connect_rc is not None and not self.connect_rc.is_failure

    def _on_connect(self, c, u, flags, rc, props) -> None:  # noqa: ANN001
        self.connect_rc = rc
        self.connack.set()

    def _on_subscribe(self, c, u, mid, rcs, props) -> None:  # noqa: ANN001
        with self._events:
            self.suback[mid] = list(rcs)
            self._events.notify_all()

    def _on_publish(self, c, u, mid, rc, props) -> None:  # noqa: ANN001
        with self._events:
            self.puback[mid] = int(getattr(rc, "value", rc) or 0)
            self._events.notify_all()

    def _on_message(self, c, u, msg) -> None:  # noqa: ANN001
        with self._events:
            self.messages.append((msg.topic, msg.payload))
            self._events.notify_all()

    def subscribe(self, topic: str, qos: int = 1) -> int:
        """The SUBACK reason code (0-2 granted, 0x87 not authorised)."""
        _, mid = self.client.subscribe(topic, qos=qos)
        with self._events:
            assert self._events.wait_for(lambda: mid in self.suback, 10), f"no SUBACK for {topic}"
            return int(self.suback[mid][0].value)

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> int:
        """QoS 1 publish; the PUBACK reason code (0 accepted, 0x87 not authorised)."""
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        with self._events:
            assert self._events.wait_for(lambda: info.mid in self.puback, 10), f"no PUBACK on {topic}"
            return self.puback[info.mid]

    def received(self, topic: str) -> list[bytes]:
        with self._events:
            return [p for t, p in self.messages if t == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


NOT_AUTHORIZED = 0x87


def install(rig: FleetRig, gateway: str, root: Path) -> subprocess.CompletedProcess:
    """`edgewave-agent install --bundle <the gateway's bundle> --root ROOT`."""
    return agent_cli("install", "--bundle", str(rig.bundle(gateway)), "--root", str(root))


def point_at_local_broker(config: Path, port: int) -> None:
    """The installed agent.yaml with its local broker on the test's port, and quick timers."""
    settings = yaml.safe_load(config.read_text())
    settings["local"]["port"] = port
    settings["reconnect"] = {"min_delay_s": 0.1, "max_delay_s": 1.0}
    settings["status"] = {"interval_s": 2, "local_interval_s": 0.2, "state_file_interval_s": 0.2}
    config.write_text(yaml.safe_dump(settings))


class AgentRun:
    """`edgewave-agent run` on an installed config (its local port moved to the test's broker)."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log_path = log
        self._log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "edgewave.agent.cli", "run", "--config", str(config)],
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


def installed_gateway(rig: FleetRig, gateway: str, tmp_path: Path) -> tuple[Path, GeneratedBroker, Creds]:
    """Install the bundle under tmp_path, start its local broker; the config's local port follows."""
    root = tmp_path / f"{gateway}-root"
    install(rig, gateway, root)
    port = free_port()
    conf = (root / "etc/mosquitto/conf.d/edgewave.conf").read_text().replace("listener 1883", f"listener {port} 127.0.0.1")
    local = GeneratedBroker(tmp_path / f"{gateway}-local-broker", conf, port).start()
    config = root / "etc/edgewave/agent.yaml"
    point_at_local_broker(config, port)
    sensors = Creds("127.0.0.1", port, "sensors", (root / "etc/edgewave/sensors.password").read_text().strip())
    return config, local, sensors
