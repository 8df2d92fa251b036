"""Provisioning gateways: broker users, ACLs, signing keys and the bundle a gateway installs.

The cloud is the source of truth. For each gateway it keeps, under ``fleet.secrets_dir``
(0700, files 0600): the config-signing key (``config.key``, what push-config signs
with), the gateway's cloud-broker password and its local broker's passwords, and
during a key rotation the previous key. The ``fleet_gateways`` table in the cloud's
database records who was provisioned, revoked and rotated when. From these the cloud
broker's password and ACL files are written whole on every change, then the broker is
told to re-read them (SIGHUP to ``fleet.broker_pid_file``, or
``fleet.broker_reload_command``). Mosquitto disconnects a client whose user has gone
from the password file when it re-reads it, and refuses it from then on.

A bundle (``<gateway>.tar.gz``, 0600) is everything ``edgewave-agent install`` needs:
``agent.yaml`` (paths relative to the bundle), the key file(s), the broker passwords,
the CA certificate, a client certificate when asked for, and the local broker's
configuration, password and ACL files.
"""
from __future__ import annotations

import grp
import io
import logging
import os
import shlex
import signal
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from edgewave.shared.config_keys import format_time, key_id
from edgewave.shared.mosquitto_files import (GATEWAY_ID, LOCAL_AGENT_USER, LOCAL_SENSOR_USER, TlsListener,
                                             broker_conf_text, cloud_acl_text, hash_password, local_acl_text,
                                             write_password_file)
from edgewave.shared.secret_files import ensure_private_dir, new_secret, read_secret, write_private

from .database import open_database, transaction
from .settings import CloudSettings, FleetSettings, SettingsError

log = logging.getLogger("edgewave.cloud.fleet")

BROKER_PASSWORD = "broker.password"
PREVIOUS_KEY = "config.key.previous"
LOCAL_AGENT_PASSWORD = "local-agent.password"
LOCAL_SENSORS_PASSWORD = "local-sensors.password"
CLIENT_CERT, CLIENT_KEY = "client.crt", "client.key"


class FleetError(Exception):
    """A provisioning request that cannot be carried out; the message says why."""


@dataclass(frozen=True)
class GatewayRecord:
    gateway: str
    added_ms: int
    removed_ms: int | None
    key_id: str | None
    previous_key_id: str | None
    overlap_until_ms: int | None
    client_cert: bool


SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_gateways (
    gateway TEXT PRIMARY KEY,
    added_ms INTEGER NOT NULL,
    removed_ms INTEGER,
    key_id TEXT,
    previous_key_id TEXT,
    overlap_until_ms INTEGER,
    client_cert INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS fleet_log (
    id INTEGER PRIMARY KEY,
    gateway TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    action TEXT NOT NULL,
    detail TEXT
);
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Fleet:
    """The provisioned gateways of one cloud, and the broker files that follow from them."""

    def __init__(self, settings: CloudSettings) -> None:
        self.settings = settings
        self.conf: FleetSettings = settings.fleet
        self.db = open_database(settings.database)
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.conn.close()

    # -- registry ------------------------------------------------------------------------------
    def records(self, include_removed: bool = False) -> list[GatewayRecord]:
        rows = self.db.execute("SELECT gateway, added_ms, removed_ms, key_id, previous_key_id, overlap_until_ms, "
                               "client_cert FROM fleet_gateways ORDER BY gateway").fetchall()
        out = [GatewayRecord(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]
        return out if include_removed else [r for r in out if r.removed_ms is None]

    def record(self, gateway: str) -> GatewayRecord | None:
        found = [r for r in self.records() if r.gateway == gateway]
        return found[0] if found else None

    def _log(self, conn: Any, gateway: str, action: str, detail: str = "") -> None:
        conn.execute("INSERT INTO fleet_log (gateway, at_ms, action, detail) VALUES (?, ?, ?, ?)",
                     (gateway, _now_ms(), action, detail))

    # -- commands ------------------------------------------------------------------------------
    def add(self, gateway: str, *, client_cert: bool = False) -> Path:
        """Provision ``gateway``: broker user, ACL entries, signing key, bundle. Returns the bundle."""
        self._check_id(gateway)
        if gateway == self.conf.cloud_user:
            raise FleetError(f"{gateway} is the cloud's own broker user (fleet.cloud_user)")
        if self.record(gateway) is not None:
            raise FleetError(f"gateway {gateway} is already provisioned (gateway bundle {gateway} writes its "
                             f"bundle again; gateway remove {gateway} revokes it)")
        if gateway in self.settings.gateways:
            raise FleetError(f"gateway {gateway} has a key in cloud.yaml (gateways.{gateway}); remove it first")
        if client_cert and not (self.conf.tls_ca and self.conf.tls_ca_key):
            raise FleetError("--client-cert needs fleet.tls_ca and fleet.tls_ca_key (the CA that signs them)")
        directory = ensure_private_dir(self.conf.gateway_dir(gateway))
        key = new_secret()
        write_private(directory / "config.key", key + "\n")
        write_private(directory / BROKER_PASSWORD, new_secret() + "\n")
        write_private(directory / LOCAL_AGENT_PASSWORD, new_secret() + "\n")
        write_private(directory / LOCAL_SENSORS_PASSWORD, new_secret() + "\n")
        if client_cert:
            from .pki import issue

            issue(Path(self.conf.tls_ca), Path(self.conf.tls_ca_key), directory / CLIENT_CERT,
                  directory / CLIENT_KEY, common_name=gateway, client=True)
        with transaction(self.db) as conn:
            conn.execute("INSERT OR REPLACE INTO fleet_gateways (gateway, added_ms, removed_ms, key_id, "
                         "previous_key_id, overlap_until_ms, client_cert) VALUES (?, ?, NULL, ?, NULL, NULL, ?)",
                         (gateway, _now_ms(), key_id(key), int(client_cert)))
            self._log(conn, gateway, "add", f"key_id={key_id(key)} client_cert={client_cert}")
        bundle = self.bundle(gateway)
        self.write_broker_files()
        self.reload_broker()
        log.info("fleet event=gateway_added gateway=%s key_id=%s client_cert=%s bundle=%s",
                 gateway, key_id(key), client_cert, bundle)
        return bundle

    def remove(self, gateway: str) -> None:
        """Revoke ``gateway``: its user and ACL entries go, the broker re-reads them (and drops
        the gateway's connection), its secrets and bundle are deleted."""
        if self.record(gateway) is None:
            raise FleetError(f"gateway {gateway} is not provisioned")
        with transaction(self.db) as conn:
            conn.execute("UPDATE fleet_gateways SET removed_ms = ? WHERE gateway = ?", (_now_ms(), gateway))
            self._log(conn, gateway, "remove")
        self.write_broker_files()
        self.reload_broker()
        shutil.rmtree(self.conf.gateway_dir(gateway), ignore_errors=True)
        self.bundle_path(gateway).unlink(missing_ok=True)
        log.info("fleet event=gateway_removed gateway=%s", gateway)

    def rotate_key(self, gateway: str, overlap_s: float | None = None) -> Path:
        """A new signing key for ``gateway``; the cloud signs with it from now on. The bundle
        written carries both keys and the end of the overlap, during which the agent still
        accepts documents signed with the old one."""
        record = self.record(gateway)
        if record is None:
            raise FleetError(f"gateway {gateway} is not provisioned")
        overlap_s = self.conf.key_overlap_s if overlap_s is None else overlap_s
        if overlap_s < 0:
            raise FleetError("the overlap must not be negative")
        directory = self.conf.gateway_dir(gateway)
        old = read_secret(directory / "config.key")
        new = new_secret()
        write_private(directory / PREVIOUS_KEY, old + "\n")
        write_private(directory / "config.key", new + "\n")
        until_ms = _now_ms() + int(overlap_s * 1000)
        with transaction(self.db) as conn:
            conn.execute("UPDATE fleet_gateways SET key_id = ?, previous_key_id = ?, overlap_until_ms = ? "
                         "WHERE gateway = ?", (key_id(new), key_id(old), until_ms, gateway))
            self._log(conn, gateway, "rotate-key", f"from={key_id(old)} to={key_id(new)} "
                                                   f"overlap_until={format_time(until_ms / 1000)}")
        bundle = self.bundle(gateway)
        log.info("fleet event=key_rotated gateway=%s from_key_id=%s to_key_id=%s overlap_until=%s bundle=%s",
                 gateway, key_id(old), key_id(new), format_time(until_ms / 1000), bundle)
        return bundle

    # -- the cloud broker's files ----------------------------------------------------------------
    def cloud_password_path(self) -> Path:
        return Path(self.conf.secrets_dir) / "cloud-broker.password"

    def init_broker(self) -> Path:
        """The cloud's own broker user (its password in the secrets dir; point
        ``broker.password_file`` at it), the password and ACL files, and the broker's
        configuration at ``fleet.broker_conf``. Safe to run again: an existing password stays."""
        ensure_private_dir(self.conf.secrets_dir)
        if not self.cloud_password_path().exists():
            write_private(self.cloud_password_path(), new_secret() + "\n")
        self.write_broker_files()
        tls = None
        if self.conf.tls_cert or self.conf.tls_key:
            if not (self.conf.tls_ca and self.conf.tls_cert and self.conf.tls_key):
                raise FleetError("fleet.tls_ca, tls_cert and tls_key are needed together for the TLS listener")
            tls = TlsListener(self.conf.public_port, str(Path(self.conf.tls_ca).resolve()),
                              str(Path(self.conf.tls_cert).resolve()), str(Path(self.conf.tls_key).resolve()),
                              require_certificate=self.conf.require_client_certificate)
        plain = None
        if self.conf.plain_listener:
            host, _, port = self.conf.plain_listener.rpartition(":")
            plain = (host or None, int(port))
        text = broker_conf_text(password_file=str(Path(self.conf.password_file).resolve()),
                                acl_file=str(Path(self.conf.acl_file).resolve()), plain_listener=plain, tls=tls,
                                persistence_location=(str(Path(self.conf.persistence_location).resolve())
                                                      if self.conf.persistence_location else None),
                                pid_file=(str(Path(self.conf.broker_pid_file).resolve())
                                          if self.conf.broker_pid_file else None))
        path = Path(self.conf.broker_conf)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        log.info("fleet event=broker_initialised conf=%s password_file=%s acl_file=%s tls=%s",
                 path, self.conf.password_file, self.conf.acl_file, tls is not None)
        return path

    def write_broker_files(self) -> None:
        """The password and ACL files from the registry: the cloud's user and every active gateway."""
        users: dict[str, str] = {}
        cloud_users: list[str] = []
        if self.cloud_password_path().exists():
            users[self.conf.cloud_user] = hash_password(read_secret(self.cloud_password_path()))
            cloud_users.append(self.conf.cloud_user)
        gateways = []
        for record in self.records():
            if GATEWAY_ID.match(record.gateway):
                gateways.append(record.gateway)
            else:   # recorded before ids were checked whole (a final newline): no broker access
                log.error("fleet event=gateway_id_invalid gateway=%r action='no broker user or ACL entries; "
                          "gateway remove it'", record.gateway)
        for gateway in gateways:
            users[gateway] = hash_password(read_secret(self.conf.gateway_dir(gateway) / BROKER_PASSWORD))
        write_password_file(self.conf.password_file, users)
        write_private(self.conf.acl_file, cloud_acl_text(cloud_users, gateways))
        if self.conf.broker_group:
            # Mosquitto reads both after dropping privileges to its own user (and on SIGHUP).
            gid = grp.getgrnam(self.conf.broker_group).gr_gid
            for path in (self.conf.password_file, self.conf.acl_file):
                os.chown(path, -1, gid)
                os.chmod(path, 0o640)

    def reload_broker(self) -> bool:
        """Make the broker re-read its password and ACL files; False when nothing is configured."""
        if self.conf.broker_reload_command:
            subprocess.run(shlex.split(self.conf.broker_reload_command), check=True, timeout=60)
            log.info("fleet event=broker_reloaded how=command")
            return True
        if self.conf.broker_pid_file:
            try:
                pid = int(Path(self.conf.broker_pid_file).read_text().strip())
                os.kill(pid, signal.SIGHUP)
            except (FileNotFoundError, ProcessLookupError) as exc:
                # Not running: it reads the files when it starts.
                log.warning("fleet event=broker_not_reloaded reason='broker not running' pid_file=%s error=%r",
                            self.conf.broker_pid_file, str(exc))
                return False
            except (OSError, ValueError) as exc:
                raise FleetError(f"cannot reload the broker through fleet.broker_pid_file "
                                 f"{self.conf.broker_pid_file}: {exc}") from exc
            log.info("fleet event=broker_reloaded how=sighup pid=%d", pid)
            return True
        log.warning("fleet event=broker_not_reloaded reason='neither fleet.broker_pid_file nor "
                    "fleet.broker_reload_command is set: reload the broker (SIGHUP) yourself'")
        return False

    # -- bundles -----------------------------------------------------------------------------------
    def bundle_path(self, gateway: str) -> Path:
        return Path(self.conf.bundles_dir) / f"{gateway}.tar.gz"

    def bundle(self, gateway: str) -> Path:
        """Write ``<bundles_dir>/<gateway>.tar.gz`` (0600) from the gateway's current secrets."""
        record = self.record(gateway)
        if record is None:
            raise FleetError(f"gateway {gateway} is not provisioned")
        directory = self.conf.gateway_dir(gateway)
        files: dict[str, bytes] = {}
        secret = set()

        def add(name: str, data: bytes, is_secret: bool = True) -> str:
            files[name] = data
            if is_secret:
                secret.add(name)
            return name

        rotating = (record.overlap_until_ms is not None and record.overlap_until_ms > _now_ms()
                    and (directory / PREVIOUS_KEY).exists())
        config: dict[str, Any] = {}
        if rotating:
            # The agent still holds the old key as its current one and learns the new one as
            # its next; it switches on the first document signed with the new key.
            config["key_file"] = add("config.key", (directory / PREVIOUS_KEY).read_bytes())
            config["next_key_file"] = add("config.next.key", (directory / "config.key").read_bytes())
            config["key_overlap_until"] = format_time(record.overlap_until_ms / 1000)
        else:
            config["key_file"] = add("config.key", (directory / "config.key").read_bytes())
        cloud: dict[str, Any] = {"host": self.conf.public_host or self.settings.broker.host,
                                 "port": self.conf.public_port, "username": gateway,
                                 "password_file": add("cloud.password", (directory / BROKER_PASSWORD).read_bytes())}
        tls: dict[str, Any] = {}
        if self.conf.tls_ca:
            tls["ca"] = add("ca.crt", Path(self.conf.tls_ca).read_bytes(), is_secret=False)
        if record.client_cert:
            tls["cert"] = add(CLIENT_CERT, (directory / CLIENT_CERT).read_bytes(), is_secret=False)
            tls["key"] = add(CLIENT_KEY, (directory / CLIENT_KEY).read_bytes())
        if tls:
            cloud["tls"] = tls
        agent_yaml = {
            "gateway": gateway,
            "data_dir": "/var/lib/edgewave-agent",
            "local": {"host": "127.0.0.1", "port": 1883, "username": LOCAL_AGENT_USER,
                      "password_file": add("local-agent.password", (directory / LOCAL_AGENT_PASSWORD).read_bytes())},
            "cloud": cloud,
            "config": config,
        }
        header = (f"# edgewave agent for {gateway}, written by edgewave-cloud on "
                  f"{format_time(time.time())}.\n# File names are relative to this file; "
                  f"`edgewave-agent install --bundle` makes them absolute.\n"
                  f"# Every option: configs/agent.yaml.\n")
        add("agent.yaml", (header + yaml.safe_dump(agent_yaml, sort_keys=False)).encode(), is_secret=False)
        # The gateway's local broker: its own users, sensors write ew/in/#, the agent reads it.
        sensors_password = read_secret(directory / LOCAL_SENSORS_PASSWORD)
        add("local-broker/passwd", "".join(
            f"{user}:{hash_password(read_secret(directory / name))}\n"
            for user, name in ((LOCAL_AGENT_USER, LOCAL_AGENT_PASSWORD),
                               (LOCAL_SENSOR_USER, LOCAL_SENSORS_PASSWORD))).encode())
        add("local-broker/acl", local_acl_text().encode(), is_secret=False)
        add("local-broker/sensors.password", (sensors_password + "\n").encode())
        add("local-broker/edgewave.conf", broker_conf_text(
            password_file="/etc/mosquitto/edgewave.passwd", acl_file="/etc/mosquitto/edgewave.acl",
            plain_listener=(None, 1883)).encode(), is_secret=False)
        path = self.bundle_path(gateway)
        ensure_private_dir(path.parent)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for name in sorted(files):
                info = tarfile.TarInfo(f"{gateway}/{name}")
                info.size = len(files[name])
                info.mode = 0o600 if name in secret else 0o644
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(files[name]))
        write_private(path, buffer.getvalue())
        return path

    @staticmethod
    def _check_id(gateway: str) -> None:
        if not GATEWAY_ID.match(gateway):
            raise FleetError(f"invalid gateway id {gateway!r}: letters, digits, '.', '_', '-' "
                             f"(starting with a letter or digit), at most 63")


def open_fleet(settings: CloudSettings) -> Fleet:
    """The fleet of ``settings``; a SettingsError when the cloud user's name could be a gateway's."""
    if GATEWAY_ID.match(settings.fleet.cloud_user) is None:
        raise SettingsError(f"fleet.cloud_user {settings.fleet.cloud_user!r} is not a valid MQTT user name here")
    return Fleet(settings)
