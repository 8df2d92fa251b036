"""`edgewave-agent install`: put a provisioned gateway's bundle (or flags) in place.

What it does, as root on a gateway:

1. creates the service user (``useradd --system``) if it is missing;
2. writes ``/etc/edgewave/agent.yaml`` (file names from the bundle made absolute,
   ``data_dir`` set) and next to it the key file(s) and broker passwords, mode 0600
   owned by the service user, and the CA certificate;
3. installs the local broker's files from the bundle (``/etc/mosquitto/conf.d/edgewave.conf``,
   ``edgewave.passwd``, ``edgewave.acl``; the sensors' password is left in
   ``/etc/edgewave/sensors.password`` for whoever configures the sensors);
4. writes ``/etc/systemd/system/edgewave-agent.service`` and runs ``systemctl daemon-reload``,
   ``systemctl enable edgewave-agent`` and ``systemctl restart`` of mosquitto and the agent.

With ``--root DIR`` every path is inside DIR, the unit and agent.yaml point there, and
nothing is run: the commands a real install would run are printed instead. That is how
it is tested without root. Installing again (a new bundle after ``rotate-key``) replaces
the files and restarts the agent; the data directory (outbox, applied configs) stays.
"""
from __future__ import annotations

import argparse
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from edgewave.agent.config import SettingsError, settings_from_dict
from edgewave.agent.systemd_unit import DEFAULT_USER, render_unit
from edgewave.shared.secret_files import write_private

SERVICE = "edgewave-agent"
# Files a bundle's agent.yaml names, relative to itself: (section path, key).
PATH_SETTINGS = [("local", "password_file"), ("cloud", "password_file"),
                 ("local", "tls", "ca"), ("local", "tls", "cert"), ("local", "tls", "key"),
                 ("cloud", "tls", "ca"), ("cloud", "tls", "cert"), ("cloud", "tls", "key"),
                 ("config", "key_file"), ("config", "next_key_file"), ("config", "bootstrap")]
PUBLIC = {"agent.yaml", "ca.crt", "client.crt", "local-broker/acl", "local-broker/edgewave.conf"}
MAX_BUNDLE_FILE = 1024 * 1024


class InstallError(Exception):
    """The bundle or the flags cannot make a working install; the message says why."""


@dataclass
class Layout:
    """Where an install puts things: the real system's paths, or the same ones under ``root``."""

    root: Path | None
    etc: Path = field(init=False)
    data_dir: Path = field(init=False)
    unit: Path = field(init=False)
    mosquitto: Path = field(init=False)

    def __post_init__(self) -> None:
        base = self.root.resolve() if self.root else Path("/")
        self.etc = base / "etc/edgewave"
        self.data_dir = base / "var/lib/edgewave-agent"
        self.unit = base / "etc/systemd/system" / f"{SERVICE}.service"
        self.mosquitto = base / "etc/mosquitto"


def read_bundle(path: Path) -> tuple[str, dict[str, bytes]]:
    """The gateway id and the files of a bundle, checked: one top folder, plain files only,
    no absolute names, no '..'."""
    files: dict[str, bytes] = {}
    tops: set[str] = set()
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                name = PurePosixPath(member.name)
                if member.isdir():
                    continue
                if not member.isfile() or name.is_absolute() or ".." in name.parts or len(name.parts) < 2:
                    raise InstallError(f"{path}: unexpected entry {member.name!r} (not a bundle from edgewave-cloud?)")
                if member.size > MAX_BUNDLE_FILE:
                    raise InstallError(f"{path}: {member.name} is too large for a bundle file")
                tops.add(name.parts[0])
                extracted = tar.extractfile(member)
                assert extracted is not None
                files[str(PurePosixPath(*name.parts[1:]))] = extracted.read()
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"cannot read bundle {path}: {exc}") from exc
    if len(tops) != 1 or "agent.yaml" not in files:
        raise InstallError(f"{path}: a bundle holds one folder named after the gateway, with agent.yaml in it")
    return tops.pop(), files


def bundle_from_flags(args: argparse.Namespace) -> tuple[str, dict[str, bytes]]:
    """The same shape as a bundle, from ``--gateway``, ``--cloud``, ``--key-file`` and friends."""
    if not (args.gateway and args.cloud and args.key_file):
        raise InstallError("without --bundle, --gateway, --cloud HOST:PORT and --key-file are required")
    host, _, port = args.cloud.rpartition(":")
    if not host or not port.isdigit():
        raise InstallError(f"--cloud expects HOST:PORT, got {args.cloud!r}")
    files: dict[str, bytes] = {"config.key": Path(args.key_file).read_bytes()}
    cloud: dict[str, Any] = {"host": host, "port": int(port)}
    if args.cloud_user:
        cloud["username"] = args.cloud_user
    if args.cloud_password_file:
        files["cloud.password"] = Path(args.cloud_password_file).read_bytes()
        cloud["password_file"] = "cloud.password"
    if args.ca:
        files["ca.crt"] = Path(args.ca).read_bytes()
        cloud["tls"] = {"ca": "ca.crt"}
    settings = {"gateway": args.gateway, "cloud": cloud, "config": {"key_file": "config.key"}}
    files["agent.yaml"] = yaml.safe_dump(settings, sort_keys=False).encode()
    return args.gateway, files


def _resolve_paths(settings: dict[str, Any], etc: Path) -> None:
    for path in PATH_SETTINGS:
        node: Any = settings
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(path[-1]), str) and not node[path[-1]].startswith("/"):
            node[path[-1]] = str(etc / node[path[-1]])


class Installer:
    """One install: files first, then (unless ``--root``) the system commands."""

    def __init__(self, layout: Layout, user: str, out: Any = sys.stdout) -> None:
        self.layout = layout
        self.user = user
        self.out = out
        self.commands: list[list[str]] = []

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def _owner(self) -> tuple[int, int] | None:
        if self.layout.root is not None:
            return None
        entry = pwd.getpwnam(self.user)
        return entry.pw_uid, entry.pw_gid

    def _secret(self, path: Path, data: bytes, owner: tuple[int, int] | None) -> None:
        write_private(path, data)
        if owner is not None:
            os.chown(path, *owner)

    def install(self, gateway: str, files: dict[str, bytes], executable: str) -> Path:
        layout = self.layout
        if layout.root is None:
            if os.geteuid() != 0:
                raise InstallError("installing into the system needs root (or use --root DIR to try it out)")
            self._ensure_user()
        owner = self._owner()
        try:
            settings = yaml.safe_load(files["agent.yaml"]) or {}
        except yaml.YAMLError as exc:
            raise InstallError(f"the bundle's agent.yaml is not valid YAML: {exc}") from exc
        if settings.get("gateway") != gateway:
            raise InstallError(f"the bundle's agent.yaml is for {settings.get('gateway')!r}, its folder for {gateway!r}")
        layout.etc.mkdir(parents=True, exist_ok=True)
        os.chmod(layout.etc, 0o750)
        if owner is not None:
            os.chown(layout.etc, 0, owner[1])
        for name, data in sorted(files.items()):
            if name == "agent.yaml" or name.startswith("local-broker/"):
                continue
            target = layout.etc / name
            if name in PUBLIC:
                target.write_bytes(data)
                os.chmod(target, 0o644)
            else:
                self._secret(target, data, owner)
            self.say(f"wrote {target}{'' if name in PUBLIC else ' (mode 0600)'}")
        settings["data_dir"] = str(layout.data_dir)
        _resolve_paths(settings, layout.etc)
        try:
            settings_from_dict(settings)
        except SettingsError as exc:
            raise InstallError(f"the resulting agent.yaml would not load: {exc}") from exc
        config_path = layout.etc / "agent.yaml"
        config_path.write_text(f"# edgewave agent for {gateway}, written by edgewave-agent install.\n"
                               f"# Every option: configs/agent.yaml in the source, docs/agent.md.\n"
                               + yaml.safe_dump(settings, sort_keys=False))
        os.chmod(config_path, 0o640)
        if owner is not None:
            os.chown(config_path, 0, owner[1])
        self.say(f"wrote {config_path}")
        layout.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(layout.data_dir, 0o750)
        if owner is not None:
            os.chown(layout.data_dir, *owner)
        self._local_broker(files)
        layout.unit.parent.mkdir(parents=True, exist_ok=True)
        layout.unit.write_text(render_unit(executable=executable, config=str(config_path),
                                           data_dir=str(layout.data_dir), user=self.user))
        os.chmod(layout.unit, 0o644)
        self.say(f"wrote {layout.unit}")
        self.commands += [["systemctl", "daemon-reload"], ["systemctl", "enable", SERVICE],
                          ["systemctl", "restart", SERVICE]]
        self._run_commands()
        return config_path

    def _ensure_user(self) -> None:
        try:
            pwd.getpwnam(self.user)
        except KeyError:
            subprocess.run(["useradd", "--system", "--home-dir", str(self.layout.data_dir), "--no-create-home",
                            "--shell", "/usr/sbin/nologin", self.user], check=True)
            self.say(f"created system user {self.user}")

    def _local_broker(self, files: dict[str, bytes]) -> None:
        """The gateway's local Mosquitto: its users and ACL, anonymous clients refused."""
        if "local-broker/edgewave.conf" not in files:
            return
        mosq = self.layout.mosquitto
        passwd, acl = mosq / "edgewave.passwd", mosq / "edgewave.acl"
        conf = files["local-broker/edgewave.conf"].decode()
        conf = conf.replace("/etc/mosquitto/edgewave.passwd", str(passwd)).replace(
            "/etc/mosquitto/edgewave.acl", str(acl))
        (mosq / "conf.d").mkdir(parents=True, exist_ok=True)
        try:
            broker_owner = None if self.layout.root else (pwd.getpwnam("mosquitto").pw_uid,
                                                          pwd.getpwnam("mosquitto").pw_gid)
        except KeyError:
            broker_owner = None
        self._secret(passwd, files["local-broker/passwd"], broker_owner)
        self._secret(acl, files["local-broker/acl"], broker_owner)
        (mosq / "conf.d/edgewave.conf").write_text(conf)
        if "local-broker/sensors.password" in files:
            self._secret(self.layout.etc / "sensors.password", files["local-broker/sensors.password"], None)
        self.say(f"wrote {mosq / 'conf.d/edgewave.conf'}, {passwd}, {acl} (local broker: users agent and sensors)")
        self.commands.append(["systemctl", "restart", "mosquitto"])

    def _run_commands(self) -> None:
        for command in self.commands:
            if self.layout.root is not None:
                self.say(f"would run: {shlex.join(command)}")
            else:
                self.say(f"running: {shlex.join(command)}")
                subprocess.run(command, check=True)


def agent_executable() -> str:
    """The edgewave-agent script of this installation, for the unit's ExecStart."""
    here = Path(sys.executable).parent / "edgewave-agent"
    if here.exists():
        return str(here)
    found = shutil.which("edgewave-agent")
    if found:
        return str(Path(found).resolve())
    raise InstallError("cannot find the edgewave-agent script next to this Python; install the package first")


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("install", help="install a provisioned gateway: user, config, keys, systemd unit")
    parser.add_argument("--bundle", type=Path, help="the gateway's bundle from `edgewave-cloud gateway add`")
    parser.add_argument("--root", type=Path, help="install into this directory tree; run no system command")
    parser.add_argument("--user", default=DEFAULT_USER, help=f"the service user (default {DEFAULT_USER})")
    flags = parser.add_argument_group("without a bundle")
    flags.add_argument("--gateway")
    flags.add_argument("--cloud", metavar="HOST:PORT", help="the cloud broker")
    flags.add_argument("--cloud-user")
    flags.add_argument("--cloud-password-file", type=Path)
    flags.add_argument("--key-file", type=Path, help="the config-signing key")
    flags.add_argument("--ca", type=Path, help="CA certificate of the cloud broker (turns TLS on)")


def run(args: argparse.Namespace) -> int:
    """`edgewave-agent install`; exit code 0 done, 2 nothing usable (the reason on stderr)."""
    try:
        gateway, files = read_bundle(args.bundle) if args.bundle else bundle_from_flags(args)
        installer = Installer(Layout(args.root), args.user)
        config = installer.install(gateway, files, agent_executable())
    except (InstallError, OSError, subprocess.CalledProcessError) as exc:
        print(f"edgewave-agent install: {exc}", file=sys.stderr)
        return 2
    print(f"installed {gateway}: {config}")
    return 0

