"""Provisioning gateways: broker users and roles, signing keys and the bundle a gateway installs.

The cloud is the source of truth. For each gateway it keeps, under ``fleet.secrets_dir``
(0700, files 0600): the config-signing key (``config.key``, what push-config signs
with), the gateway's cloud-broker password and its local broker's passwords, and
during a key rotation the previous key. The ``fleet_gateways`` table in the cloud's
database records who was provisioned, revoked and rotated when. From these follow the
cloud broker's users and roles (``broker_access.py``: Mosquitto's dynamic-security plugin):
a running broker is changed through the plugin's control topic as the fleet's admin user
(``dynsec_control.py``); it drops a removed gateway's connection and refuses it from then
on. When no broker runs, the plugin's file is written for it to read when it starts.

A bundle (``<gateway>.tar.gz``, 0600) is everything ``edgewave-agent install`` needs:
``agent.yaml`` (paths relative to the bundle), the key file(s), the broker passwords,
the CA certificate, a client certificate when asked for, and the local broker's
configuration, password and ACL files.
"""
from __future__ import annotations

import grp
import io
import json
import logging
import os
import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from edgewave.shared import clock
from edgewave.shared.config_keys import format_time, key_id
from edgewave.shared.mosquitto_files import (GATEWAY_ID, LOCAL_AGENT_USER, LOCAL_SENSOR_USER, TlsListener,
                                             broker_conf_text, gateway_cloud_client_id, hash_password,
                                             local_acl_text)
from edgewave.shared.secret_files import ensure_private_dir, new_secret, read_secret, write_private

from .broker_access import BrokerAccess, access_document, broker_access, find_plugin
from .database import open_database, transaction
from .dynsec_control import BrokerUnreachable, ControlError, DynsecControl, converge
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
                     (gateway, clock.now_ms(), action, detail))

    # -- commands ------------------------------------------------------------------------------
    def add(self, gateway: str, *, client_cert: bool = False) -> Path:
        """Provision ``gateway``: broker user and role, signing key, bundle. Returns the bundle."""
        self._check_id(gateway)
        if gateway in (self.conf.cloud_user, self.conf.admin_user):
            raise FleetError(f"{gateway} is one of the cloud's own broker users (fleet.cloud_user, fleet.admin_user)")
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
                         (gateway, clock.now_ms(), key_id(key), int(client_cert)))
            self._log(conn, gateway, "add", f"key_id={key_id(key)} client_cert={client_cert}")
        bundle = self.bundle(gateway)
        self.apply_access()
        log.info("fleet event=gateway_added gateway=%s key_id=%s client_cert=%s bundle=%s",
                 gateway, key_id(key), client_cert, bundle)
        return bundle

    def remove(self, gateway: str) -> None:
        """Revoke ``gateway``: its broker user and role go (the broker drops its connection),
        its secrets and bundle are deleted."""
        if self.record(gateway) is None:
            raise FleetError(f"gateway {gateway} is not provisioned")
        with transaction(self.db) as conn:
            conn.execute("UPDATE fleet_gateways SET removed_ms = ? WHERE gateway = ?", (clock.now_ms(), gateway))
            self._log(conn, gateway, "remove")
        # Secrets first: should the broker not take the change now, nothing of the gateway's is
        # left here, and broker-init later deletes its user (it is no longer in the registry).
        shutil.rmtree(self.conf.gateway_dir(gateway), ignore_errors=True)
        self.bundle_path(gateway).unlink(missing_ok=True)
        self.apply_access()
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
        until_ms = clock.now_ms() + int(overlap_s * 1000)
        with transaction(self.db) as conn:
            conn.execute("UPDATE fleet_gateways SET key_id = ?, previous_key_id = ?, overlap_until_ms = ? "
                         "WHERE gateway = ?", (key_id(new), key_id(old), until_ms, gateway))
            self._log(conn, gateway, "rotate-key", f"from={key_id(old)} to={key_id(new)} "
                                                   f"overlap_until={format_time(until_ms / 1000)}")
        bundle = self.bundle(gateway)
        log.info("fleet event=key_rotated gateway=%s from_key_id=%s to_key_id=%s overlap_until=%s bundle=%s",
                 gateway, key_id(old), key_id(new), format_time(until_ms / 1000), bundle)
        return bundle

    # -- the cloud broker's users and roles ------------------------------------------------------
    def cloud_password_path(self) -> Path:
        return Path(self.conf.secrets_dir) / "cloud-broker.password"

    def admin_password_path(self) -> Path:
        return Path(self.conf.secrets_dir) / "broker-admin.password"

    def init_broker(self) -> tuple[Path, str]:
        """The cloud's own broker user (its password in the secrets dir; point
        ``broker.password_file`` at it), the fleet's admin user, the dynamic-security file, and
        the broker's configuration at ``fleet.broker_conf``. Safe to run again: existing
        passwords stay, and a running broker is brought up to date through its control topic.
        Returns the configuration's path and how the users reached the broker (``apply_access``)."""
        ensure_private_dir(self.conf.secrets_dir)
        for path in (self.cloud_password_path(), self.admin_password_path()):
            if not path.exists():
                write_private(path, new_secret() + "\n")
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
        try:
            plugin = find_plugin(self.conf.dynsec_plugin)
        except FileNotFoundError as exc:
            raise FleetError(str(exc)) from exc
        text = broker_conf_text(dynsec=(plugin, str(Path(self.conf.dynsec_file).resolve())),
                                plain_listener=plain, tls=tls,
                                persistence_location=(str(Path(self.conf.persistence_location).resolve())
                                                      if self.conf.persistence_location else None),
                                pid_file=(str(Path(self.conf.broker_pid_file).resolve())
                                          if self.conf.broker_pid_file else None))
        path = Path(self.conf.broker_conf)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        how = self.apply_access(upgrading=True)
        for legacy in ("password_file", "acl_file", "broker_reload_command"):
            if getattr(self.conf, legacy):
                log.warning("fleet event=setting_unused setting=fleet.%s reason='the cloud broker's users and "
                            "ACLs are in fleet.dynsec_file now: remove the setting (and the old files)'", legacy)
        log.info("fleet event=broker_initialised conf=%s dynsec_file=%s plugin=%s tls=%s users=%s",
                 path, self.conf.dynsec_file, plugin, tls is not None, how)
        return path, how

    def wanted_access(self) -> BrokerAccess:
        """The admin, the cloud's user (once broker-init made its password) and every active gateway."""
        admin = self.admin_password_path()
        if not admin.exists():
            ensure_private_dir(self.conf.secrets_dir)
            write_private(admin, new_secret() + "\n")
        cloud = None
        if self.cloud_password_path().exists():
            cloud = (self.conf.cloud_user, read_secret(self.cloud_password_path()))
        gateways = {}
        for record in self.records():
            if GATEWAY_ID.match(record.gateway):
                gateways[record.gateway] = read_secret(self.conf.gateway_dir(record.gateway) / BROKER_PASSWORD)
            else:   # recorded before ids were checked whole (a final newline): no broker access
                log.error("fleet event=gateway_id_invalid gateway=%r action='no broker user or role; "
                          "gateway remove it'", record.gateway)
        return broker_access(admin=(self.conf.admin_user, read_secret(admin)), cloud=cloud, gateways=gateways)

    def apply_access(self, *, upgrading: bool = False) -> str:
        """Bring the broker's users and roles to what the registry says.

        A running broker is changed through its control topic (it rewrites its file itself):
        returns ``broker``. When there is no connection to the broker's address (not running),
        the file is written for it to read when it starts: ``file``; a broker that runs but
        cannot be reached from here does not get the change (the log and the CLI say so). A
        broker that answers but refuses the admin runs a configuration from before broker-init:
        with ``upgrading`` (broker-init) the file is written and the broker
        must be restarted on the new configuration (``restart``); otherwise a FleetError says so."""
        access = self.wanted_access()
        try:
            with DynsecControl(self.settings.broker, self.conf.admin_user,
                               read_secret(self.admin_password_path())) as control:
                converge(control, access)
            return "broker"
        except BrokerUnreachable as exc:
            self.write_access_file(access)
            log.warning("fleet event=broker_file_written file=%s reason=%r note='a broker running elsewhere "
                        "does not have this change; it reads the file when it starts'",
                        self.conf.dynsec_file, str(exc))
            return "file"
        except ControlError as exc:
            if not upgrading:
                raise FleetError(f"the registry is updated but the broker is not: {exc}; once the broker runs "
                                 f"the configuration broker-init writes, run `edgewave-cloud broker-init`") from exc
            self.write_access_file(access)
            log.warning("fleet event=broker_restart_needed file=%s reason=%r action='restart the broker on %s'",
                        self.conf.dynsec_file, str(exc), self.conf.broker_conf)
            return "restart"

    def write_access_file(self, access: BrokerAccess) -> None:
        """The plugin's file (0600; 0660 in ``fleet.broker_group``, whose directory the broker
        must be able to write: it saves the file through a new one beside it)."""
        path = Path(self.conf.dynsec_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, json.dumps(access_document(access), indent=1) + "\n")
        if self.conf.broker_group:
            gid = grp.getgrnam(self.conf.broker_group).gr_gid
            os.chown(path.parent, -1, gid)
            os.chmod(path.parent, 0o770)
            os.chown(path, -1, gid)
            os.chmod(path, 0o660)

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

        rotating = (record.overlap_until_ms is not None and record.overlap_until_ms > clock.now_ms()
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
                                 "client_id": gateway_cloud_client_id(gateway),   # the only one it may use
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
    """The fleet of ``settings``; a SettingsError when a cloud user's name is not one a gateway could have."""
    for key in ("cloud_user", "admin_user"):
        if GATEWAY_ID.match(getattr(settings.fleet, key)) is None:
            raise SettingsError(f"fleet.{key} {getattr(settings.fleet, key)!r} is not a valid MQTT user name here")
    return Fleet(settings)
