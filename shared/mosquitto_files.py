"""Mosquitto's own files: password file, ACL file, broker configuration.

Both brokers of edgewave are Mosquitto 2. A gateway's bundle carries its local broker's
password and ACL files (Mosquitto re-reads them on SIGHUP). The cloud broker's users and
ACLs are held by Mosquitto's dynamic-security plugin instead (cloud/broker_access.py says
why); its configuration comes from here too.

Password hashes are Mosquitto 2's ``$7$`` format (what ``mosquitto_passwd`` writes):
``$7$<iterations>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512>``, 12-byte salt, 64-byte
hash. It is computed here so neither the cloud's container nor a gateway needs the
``mosquitto-clients`` tools. 101 iterations is ``mosquitto_passwd``'s default: the
passwords edgewave generates are 256 random bits, which no stretching makes harder to
guess, and the broker runs the hash on every connect.

The gateway's local broker, whose users are fixed, uses ``pattern`` lines with ``%u`` for
what every one of its users may do.
"""
from __future__ import annotations

import base64
import hashlib
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


def gateway_cloud_client_id(gateway: str) -> str:
    """The one client id a gateway's agent may connect to the cloud broker with."""
    return f"edgewave-{gateway}-cloud"


def password_digest(password: str, salt: bytes, iterations: int = HASH_ITERATIONS) -> bytes:
    """PBKDF2-HMAC-SHA512, 64 bytes: what Mosquitto's password file and its dynamic-security
    plugin both store (with a 12-byte salt)."""
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, dklen=64)


def hash_password(password: str, *, salt: bytes | None = None, iterations: int = HASH_ITERATIONS) -> str:
    """The ``$7$`` PBKDF2-SHA512 hash Mosquitto 2 checks ``password`` against."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = password_digest(password, salt, iterations)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def write_password_file(path: str | os.PathLike[str], users: dict[str, str]) -> Path:
    """Write user -> hash lines (mode 0600; the broker reads it before dropping privileges)."""
    for user in users:
        if not user or ":" in user or "\n" in user:
            raise ValueError(f"invalid MQTT user name {user!r}")
    return write_private(path, "".join(f"{user}:{encoded}\n" for user, encoded in sorted(users.items())))


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


def broker_conf_text(*, plain_listener: tuple[str | None, int] | None, password_file: str | None = None,
                     acl_file: str | None = None, dynsec: tuple[str, str] | None = None,
                     tls: TlsListener | None = None, persistence_location: str | None = None,
                     pid_file: str | None = None, log_dest: str | None = None, extra: list[str] = ()) -> str:
    """A Mosquitto 2 configuration that refuses anonymous clients and enforces an access policy:
    ``password_file`` and ``acl_file`` (the gateway's local broker, re-read on SIGHUP), or
    ``dynsec`` = (plugin path, its configuration file) (the cloud broker: cloud/broker_access.py).

    ``plain_listener`` (address or None for all, port) is meant for loopback or a
    gateway's sensor LAN; ``tls`` is the listener gateways reach over the internet."""
    if plain_listener is None and tls is None:
        raise ValueError("a broker needs at least one listener")
    if (dynsec is None) == (password_file is None or acl_file is None):
        raise ValueError("a broker needs password_file and acl_file, or dynsec")
    lines = ["# Written by edgewave; regenerate rather than edit.",
             "per_listener_settings false",
             "allow_anonymous false"]
    if dynsec is not None:
        lines += ["# Users, client ids and ACLs: the dynamic-security plugin (changed through its control topic).",
                  f"plugin {dynsec[0]}", f"plugin_opt_config_file {dynsec[1]}"]
    else:
        lines += ["# Password and ACL files are re-read on SIGHUP.", f"password_file {password_file}",
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
