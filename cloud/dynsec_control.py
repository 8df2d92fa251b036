"""Changing the running cloud broker's users and roles through its dynamic-security control topic.

The plugin reads its file only when the broker starts and rewrites it after every change
made through ``$CONTROL/dynamic-security/v1``, so a change to a running broker goes through
that topic (as the fleet's admin user), never through the file. ``converge`` makes the
broker hold exactly the wanted edgewave users and roles with as few commands as it can:
changing a client or a role makes the broker disconnect the clients concerned, so what is
already right is left untouched (adding gw3 does not disconnect gw1).
"""
from __future__ import annotations

import json
import logging
import threading
import uuid
from dataclasses import replace
from typing import Any

import paho.mqtt.client as mqtt

from edgewave.shared.broker import BrokerSettings
from edgewave.shared.mqtt_client import new_client

from .broker_access import CONTROL_TOPIC, DEFAULT_ACCESS, GATEWAY_ROLE_PREFIX, BrokerAccess

log = logging.getLogger("edgewave.cloud.fleet")


class ControlError(Exception):
    """The broker did not carry out a change; the message says what and why."""


class BrokerUnreachable(ControlError):
    """No connection to the broker's address (refused, no such host, timed out): taken as the
    broker not running, so its file is what counts."""


class DynsecControl:
    """One admin connection to the broker's control topic; a context manager."""

    def __init__(self, broker: BrokerSettings, username: str, password: str, *, timeout_s: float = 15.0) -> None:
        self.timeout_s = timeout_s
        self._responses: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._connack = threading.Event()
        self._connect_rc: Any = None
        settings = replace(broker, username=username, password=password, password_file=None)
        self.client = new_client(settings, f"edgewave-fleet-{uuid.uuid4().hex[:12]}")
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.address = f"{broker.host}:{broker.port}"
        try:
            self.client.connect(broker.host, broker.port, keepalive=30)
        except OSError as exc:
            raise BrokerUnreachable(f"no connection to a broker at {self.address}: {exc}") from exc
        self.client.loop_start()
        if not self._connack.wait(timeout_s):
            self.close()
            raise ControlError(f"the broker at {self.address} did not answer the admin's CONNECT")
        if self._connect_rc.is_failure:
            self.close()
            raise ControlError(f"the broker at {self.address} refused the admin user {username}: "
                               f"{self._connect_rc} (does it run the configuration broker-init wrote?)")
        result, mid = self.client.subscribe(CONTROL_TOPIC + "/response", qos=1)
        if result != mqtt.MQTT_ERR_SUCCESS:
            self.close()
            raise ControlError(f"cannot subscribe to the control responses: {mqtt.error_string(result)}")

    def __enter__(self) -> "DynsecControl":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client, userdata, flags, rc, props) -> None:  # noqa: ANN001
        self._connect_rc = rc
        self._connack.set()

    def _on_message(self, client, userdata, msg) -> None:  # noqa: ANN001
        try:
            responses = json.loads(msg.payload)["responses"]
        except (ValueError, KeyError, TypeError):
            return
        with self._cond:
            for response in responses if isinstance(responses, list) else ():
                if isinstance(response, dict) and isinstance(response.get("correlationData"), str):
                    self._responses[response["correlationData"]] = response
            self._cond.notify_all()

    def run(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send ``commands`` in one message; their responses in the same order. A response with
        an error raises ControlError naming the command (the ones before it took effect)."""
        if not commands:
            return []
        tags = [uuid.uuid4().hex for _ in commands]
        payload = json.dumps({"commands": [dict(c, correlationData=t) for c, t in zip(commands, tags)]})
        self.client.publish(CONTROL_TOPIC, payload, qos=1)
        with self._cond:
            if not self._cond.wait_for(lambda: all(t in self._responses for t in tags), self.timeout_s):
                raise ControlError(f"the broker at {self.address} did not answer on {CONTROL_TOPIC}/response "
                                   f"(is its dynamic-security plugin loaded?)")
            responses = [self._responses.pop(t) for t in tags]
        for command, response in zip(commands, responses):
            if response.get("error"):
                what = command.get("username") or command.get("rolename") or ""
                raise ControlError(f"{command['command']} {what}: {response['error']}")
        return responses


def _acl_key(acl: dict[str, Any]) -> tuple[str, str, bool]:
    return acl["acltype"], acl["topic"], bool(acl.get("allow", False))


def converge(control: DynsecControl, access: BrokerAccess) -> list[str]:
    """Make the broker hold ``access``; returns what changed (e.g. ``created client gw2``)."""
    listed = control.run([{"command": "listClients", "verbose": True}, {"command": "listRoles", "verbose": True}])
    clients = {c["username"]: c for c in listed[0]["data"]["clients"]}
    roles = {r["rolename"]: r for r in listed[1]["data"]["roles"]}
    commands: list[dict[str, Any]] = [{"command": "setDefaultACLAccess", "acls": [
        {"acltype": acltype, "allow": allow} for acltype, allow in DEFAULT_ACCESS.items()]}]
    changes: list[str] = []

    def change(what: str, command: dict[str, Any]) -> None:
        commands.append(command)
        changes.append(what)

    for name, acls in access.roles.items():
        if name not in roles:
            change(f"created role {name}", {"command": "createRole", "rolename": name, "acls": acls})
            continue
        have = {_acl_key(a) for a in roles[name].get("acls", [])}
        want = {_acl_key(a): a for a in acls}
        for acltype, topic, _ in have - set(want):
            change(f"removed {acltype} {topic} from role {name}",
                   {"command": "removeRoleACL", "rolename": name, "acltype": acltype, "topic": topic})
        for key in set(want) - have:
            change(f"added {key[0]} {key[1]} to role {name}", dict(want[key], command="addRoleACL", rolename=name))
    for user in access.users:
        current = clients.get(user.username)
        if current is None:
            command = {"command": "createClient", "username": user.username, "password": user.password,
                       "roles": [{"rolename": user.role}]}
            if user.clientid:
                command["clientid"] = user.clientid
            change(f"created client {user.username}", command)
            continue
        if current.get("clientid") != user.clientid:
            change(f"bound client {user.username} to client id {user.clientid or 'any'}",
                   {"command": "modifyClient", "username": user.username, "clientid": user.clientid or ""})
        if [r.get("rolename") for r in current.get("roles", [])] != [user.role]:
            change(f"gave client {user.username} role {user.role}",
                   {"command": "modifyClient", "username": user.username, "roles": [{"rolename": user.role}]})
    for username, current in clients.items():
        rolenames = [r.get("rolename", "") for r in current.get("roles", [])]
        if username not in {u.username for u in access.users} and access.owns(username, rolenames):
            change(f"deleted client {username}", {"command": "deleteClient", "username": username})
    for name in roles:
        if name.startswith(GATEWAY_ROLE_PREFIX) and name not in access.roles:
            change(f"deleted role {name}", {"command": "deleteRole", "rolename": name})
    control.run(commands)
    for what in changes:
        log.info("fleet event=broker_changed change=%r", what)
    return changes
