"""Mosquitto's own files: password file, ACL file, broker configuration.

Both brokers of edgewave are Mosquitto 2. The cloud writes the cloud broker's files
when it provisions or revokes a gateway, and a gateway's bundle carries its local
broker's. Mosquitto re-reads the password and ACL files on SIGHUP, so neither needs a
restart.

Password hashes are Mosquitto 2's ``$7$`` format (what ``mosquitto_passwd`` writes):
``$7$<iterations>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512>``, 12-byte salt, 64-byte
hash. It is computed here so neither the cloud's container nor a gateway needs the
``mosquitto-clients`` tools. 101 iterations is ``mosquitto_passwd``'s default: the
passwords edgewave generates are 256 random bits, which no stretching makes harder to
guess, and the broker runs the hash on every connect.

ACLs: a gateway's user may publish only ``ew/<itself>/events``, ``/status`` (also its
Last Will) and ``/config/ack``, and read only ``ew/<itself>/config`` and ingest's
acknowledgements of its events, ``ew/<itself>/events/landed``. Each gateway gets
explicit ``user`` lines rather than ``pattern ... %u`` lines, because Mosquitto applies
pattern lines to every user, the cloud's own included, and because revoking a gateway
should remove everything that names it. The gateway's local broker, whose users are
fixed, uses ``pattern`` lines with ``%u`` for what every one of its users may do.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .bounded_json import DEFAULT_MAX_BYTES
from .secret_files import write_private

HASH_ITERATIONS = 101
SALT_BYTES = 12

# Gateway ids become MQTT user names and topic segments: no wildcards, no separators,
# nothing a shell or YAML would read differently.
GATEWAY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")   # \Z: "$" would accept a final newline


def hash_password(password: str, *, salt: bytes | None = None, iterations: int = HASH_ITERATIONS) -> str:
    """The ``$7$`` PBKDF2-SHA512 hash Mosquitto 2 checks ``password`` against."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, dklen=64)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def check_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches a ``$7$`` hash (tests and audits; the broker checks its own)."""
    parts = encoded.split("$")
    if len(parts) != 5 or parts[1] != "7":
        return False
    salt = base64.b64decode(parts[3])
    return hmac.compare_digest(hash_password(password, salt=salt, iterations=int(parts[2])), encoded)


def read_password_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """user -> hash; a missing file is empty."""
    path = Path(path)
    if not path.exists():
        return {}
    users: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            user, _, encoded = line.partition(":")
            users[user] = encoded
    return users


def write_password_file(path: str | os.PathLike[str], users: dict[str, str]) -> Path:
    """Write user -> hash lines (mode 0600; the broker reads it before dropping privileges)."""
    for user in users:
        if not user or ":" in user or "\n" in user:
            raise ValueError(f"invalid MQTT user name {user!r}")
    return write_private(path, "".join(f"{user}:{encoded}\n" for user, encoded in sorted(users.items())))


@dataclass(frozen=True)
class AclRule:
    access: str        # read | write | readwrite
    topic: str


def gateway_rules(gateway: str) -> list[AclRule]:
    """What a gateway's user may do on the cloud broker, and nothing more."""
    return [AclRule("write", f"ew/{gateway}/events"), AclRule("write", f"ew/{gateway}/status"),
            AclRule("write", f"ew/{gateway}/config/ack"), AclRule("read", f"ew/{gateway}/config"),
            AclRule("read", f"ew/{gateway}/events/landed")]


# The cloud's services (ingest, push-config, the dashboard) read what gateways send,
# acknowledge the events ingest landed, and publish their config documents (retained).
CLOUD_RULES = [AclRule("read", "ew/+/events"), AclRule("read", "ew/+/status"),
               AclRule("read", "ew/+/config/ack"), AclRule("write", "ew/+/config"),
               AclRule("write", "ew/+/events/landed")]


def cloud_acl_text(cloud_users: list[str], gateways: list[str]) -> str:
    """The cloud broker's ACL file: the cloud's users, then one block per gateway."""
    lines = ["# Written by edgewave-cloud (gateway add/remove, broker-init); edits are overwritten.",
             "# A client gets only what its user's lines grant; anonymous clients are refused",
             "# by the broker configuration (allow_anonymous false).", ""]
    for user in cloud_users:
        lines.append(f"user {user}")
        lines += [f"topic {rule.access} {rule.topic}" for rule in CLOUD_RULES]
        lines.append("")
    for gateway in sorted(gateways):
        if not GATEWAY_ID.match(gateway):
            raise ValueError(f"invalid gateway id {gateway!r}")
        lines.append(f"user {gateway}")
        lines += [f"topic {rule.access} {rule.topic}" for rule in gateway_rules(gateway)]
        lines.append("")
    return "\n".join(lines)


LOCAL_AGENT_USER = "agent"
LOCAL_SENSOR_USER = "sensors"


def local_acl_text() -> str:
    """The gateway's local broker: sensors publish under ``ew/in/``, the agent reads it.

    The ``pattern`` line lets a sensor also publish under its own user name
    (``ew/in/+/%u``) should sensors be given users of their own."""
    return "\n".join([
        "# Written by edgewave (gateway bundle); the gateway's local broker.",
        f"user {LOCAL_SENSOR_USER}",
        "topic write ew/in/#",
        "",
        f"user {LOCAL_AGENT_USER}",
        "topic read ew/in/#",
        "",
        "# any other sensor user: only its own topic in every stream",
        "pattern write ew/in/+/%u",
        "",
    ])


@dataclass
class TlsListener:
    """A TLS listener's files (PEM paths as the broker sees them)."""

    port: int
    cafile: str
    certfile: str
    keyfile: str
    require_certificate: bool = False
    bind: str | None = None


# Every payload edgewave sends is bounded at 1 MiB (shared/bounded_json.py: events, batches,
# config envelopes), a sensor message at 16 kB by default (the agent's input.max_message_bytes).
# Mosquitto's own limit is the protocol's, 256 MB: one client could make the broker, and the
# agent or ingest subscribed to it, hold a packet of any size before a check of ours runs.
# Past this the broker disconnects the client that sent it (the topic and properties fit in
# the margin).
MAX_PACKET_BYTES = DEFAULT_MAX_BYTES + 64 * 1024


def broker_conf_text(*, password_file: str, acl_file: str, plain_listener: tuple[str | None, int] | None,
                     tls: TlsListener | None = None, persistence_location: str | None = None,
                     pid_file: str | None = None, log_dest: str | None = None, extra: list[str] = ()) -> str:
    """A Mosquitto 2 configuration that refuses anonymous clients and enforces ``acl_file``.

    ``plain_listener`` (address or None for all, port) is meant for loopback or a
    gateway's sensor LAN; ``tls`` is the listener gateways reach over the internet."""
    if plain_listener is None and tls is None:
        raise ValueError("a broker needs at least one listener")
    lines = ["# Written by edgewave; regenerate rather than edit.",
             "# Password and ACL files are re-read on SIGHUP.",
             "per_listener_settings false",
             "allow_anonymous false",
             f"password_file {password_file}",
             f"acl_file {acl_file}"]
    if persistence_location:
        lines += ["persistence true", f"persistence_location {persistence_location.rstrip('/')}/",
                  "autosave_interval 5"]
    if pid_file:
        lines.append(f"pid_file {pid_file}")
    if log_dest:
        lines.append(f"log_dest {log_dest}")
    lines += ["max_queued_messages 100000", "persistent_client_expiration 7d", "set_tcp_nodelay true",
              f"max_packet_size {MAX_PACKET_BYTES}"]
    if plain_listener is not None:
        host, port = plain_listener
        lines += ["", f"listener {port}{' ' + host if host else ''}"]
    if tls is not None:
        lines += ["", f"listener {tls.port}{' ' + tls.bind if tls.bind else ''}",
                  f"cafile {tls.cafile}", f"certfile {tls.certfile}", f"keyfile {tls.keyfile}",
                  "tls_version tlsv1.2",
                  f"require_certificate {'true' if tls.require_certificate else 'false'}"]
    lines += list(extra)
    return "\n".join(lines) + "\n"
