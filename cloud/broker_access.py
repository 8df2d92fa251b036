"""Who may do what on the cloud broker, as Mosquitto dynamic-security clients and roles.

Why the dynamic-security plugin and not a password file with an ACL file: Mosquitto 2.0's
ACL file does not check subscriptions at all (it checks only at delivery). A gateway could
subscribe to ingest's shared subscription, ``$share/<group>/ew/+/events``, be handed its
share of every gateway's events, have delivery refused by the ACL, and so drop them; and
nothing in the two files ties a user to a client id, so a gateway could take over ingest's
session or knock another gateway off by connecting with its client id. The plugin checks
every SUBSCRIBE against the client's roles (refused with reason code 0x87) and refuses a
CONNECT whose client id is not the one its user is bound to.

What each user gets (nothing else; the default is deny):

- a gateway ``<gw>``: connects only as client id ``edgewave-<gw>-cloud``
  (``gateway_cloud_client_id``); publishes ``ew/<gw>/events``, ``/status`` (also its Last
  Will) and ``/config/ack``; subscribes to and receives ``ew/<gw>/config`` and ingest's
  acknowledgements of its events, ``ew/<gw>/events/landed``. One role per gateway (the
  plugin has no ``%u`` substitution), named ``edgewave-gateway-<gw>``.
- the cloud's services (``fleet.cloud_user``: ingest, push-config, the dashboard): any
  client id; receive every gateway's events (also through a shared subscription), status
  and config acks; publish config documents and landed acknowledgements, and the dashboard's
  alarm notifications under ``edgewave/alarms/`` (outside ``ew/``, where a topic is a gateway's).
- the fleet's administrator (``fleet.admin_user``): the plugin's control topic only, which
  ``gateway add/remove`` and ``broker-init`` use to change the running broker.

Clients of other names (an operator's own monitoring user, say) are left alone.
"""
from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgewave.shared.mosquitto_files import HASH_ITERATIONS, SALT_BYTES, gateway_cloud_client_id, password_digest


CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
ADMIN_ROLE = "edgewave-admin"
CLOUD_ROLE = "edgewave-cloud"
GATEWAY_ROLE_PREFIX = "edgewave-gateway-"

# Where Debian (any architecture) and the eclipse-mosquitto image put the plugin.
PLUGIN_PATHS = ("/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so",
                "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
                "/usr/lib/arm-linux-gnueabihf/mosquitto_dynamic_security.so",
                "/usr/lib/mosquitto_dynamic_security.so")

# Nothing is allowed unless a role says so; unsubscribing from what one may not hold is harmless.
DEFAULT_ACCESS = {"publishClientSend": False, "publishClientReceive": False, "subscribe": False,
                  "unsubscribe": True}


def _acl(acltype: str, topic: str) -> dict[str, Any]:
    return {"acltype": acltype, "topic": topic, "priority": 0, "allow": True}


def gateway_role(gateway: str) -> str:
    return GATEWAY_ROLE_PREFIX + gateway


def gateway_acls(gateway: str) -> list[dict[str, Any]]:
    """A gateway's own topics, and nothing more."""
    sends = [f"ew/{gateway}/events", f"ew/{gateway}/status", f"ew/{gateway}/config/ack"]
    reads = [f"ew/{gateway}/config", f"ew/{gateway}/events/landed"]
    return ([_acl("publishClientSend", t) for t in sends] + [_acl("subscribeLiteral", t) for t in reads]
            + [_acl("publishClientReceive", t) for t in reads])


CLOUD_ACLS = ([_acl("subscribePattern", t) for t in ("ew/+/events", "ew/+/status", "ew/+/config/ack",
                                                      "$share/+/ew/+/events")]
              + [_acl("publishClientReceive", t) for t in ("ew/+/events", "ew/+/status", "ew/+/config/ack")]
              + [_acl("publishClientSend", t) for t in ("ew/+/config", "ew/+/events/landed", "edgewave/alarms/#")])

ADMIN_ACLS = [_acl("publishClientSend", CONTROL_TOPIC), _acl("subscribeLiteral", CONTROL_TOPIC + "/response"),
              _acl("publishClientReceive", CONTROL_TOPIC + "/response")]


@dataclass(frozen=True)
class BrokerUser:
    """One dynamic-security client: a user name, its password, its roles, and the client id
    it is bound to (None: any)."""

    username: str
    password: str = field(repr=False)
    role: str
    clientid: str | None = None


@dataclass(frozen=True)
class BrokerAccess:
    """The whole wanted state: users and roles edgewave owns on the cloud broker."""

    users: tuple[BrokerUser, ...]
    roles: dict[str, list[dict[str, Any]]]

    def owns(self, username: str, rolenames: list[str]) -> bool:
        """Whether a client on the broker is edgewave's to change or delete: one of its user
        names, or a client holding a gateway role (a gateway since removed)."""
        return (any(u.username == username for u in self.users)
                or any(r.startswith(GATEWAY_ROLE_PREFIX) or r in (ADMIN_ROLE, CLOUD_ROLE) for r in rolenames))


def broker_access(*, admin: tuple[str, str], cloud: tuple[str, str] | None,
                  gateways: dict[str, str]) -> BrokerAccess:
    """The users and roles for the admin, the cloud's services and each gateway (name -> password)."""
    users = [BrokerUser(admin[0], admin[1], ADMIN_ROLE)]
    roles = {ADMIN_ROLE: ADMIN_ACLS, CLOUD_ROLE: CLOUD_ACLS}
    if cloud is not None:
        users.append(BrokerUser(cloud[0], cloud[1], CLOUD_ROLE))
    for gateway, password in sorted(gateways.items()):
        users.append(BrokerUser(gateway, password, gateway_role(gateway), gateway_cloud_client_id(gateway)))
        roles[gateway_role(gateway)] = gateway_acls(gateway)
    return BrokerAccess(tuple(users), roles)


def password_fields(password: str, *, salt: bytes | None = None, iterations: int = HASH_ITERATIONS) -> dict[str, Any]:
    """The plugin's stored form of a password: PBKDF2-HMAC-SHA512, 12-byte salt, base64."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = password_digest(password, salt, iterations)
    return {"password": base64.b64encode(digest).decode(), "salt": base64.b64encode(salt).decode(),
            "iterations": iterations}


def access_document(access: BrokerAccess) -> dict[str, Any]:
    """The plugin's configuration file (``plugin_opt_config_file``), which it reads when the
    broker starts and rewrites itself on every change made through its control topic."""
    clients = []
    for user in access.users:
        entry: dict[str, Any] = {"username": user.username, "roles": [{"rolename": user.role}],
                                 **password_fields(user.password)}
        if user.clientid:
            entry["clientid"] = user.clientid
        clients.append(entry)
    return {"defaultACLAccess": dict(DEFAULT_ACCESS), "clients": clients, "groups": [],
            "roles": [{"rolename": name, "acls": acls} for name, acls in sorted(access.roles.items())]}


def find_plugin(configured: str) -> str:
    """The plugin's path: ``configured`` itself, or for ``auto`` the first of ``PLUGIN_PATHS``
    present here (where broker-init runs in another container than the broker, set it)."""
    if configured != "auto":
        return configured
    for path in PLUGIN_PATHS:
        if Path(path).is_file():
            return path
    raise FileNotFoundError("Mosquitto's dynamic-security plugin is not in any of " + ", ".join(PLUGIN_PATHS)
                            + ": install mosquitto 2 or set fleet.dynsec_plugin to its path")
