"""The provisioning commands of `edgewave-cloud`: tls-init, broker-init, gateway add/remove/rotate-key.

    edgewave-cloud tls-init --dir /etc/edgewave/tls --name broker.example.org
    edgewave-cloud broker-init --config cloud.yaml
    edgewave-cloud gateway add gw7 --config cloud.yaml [--client-cert]
    edgewave-cloud gateway remove gw7 --config cloud.yaml
    edgewave-cloud gateway rotate-key gw7 --config cloud.yaml [--overlap-hours H]
    edgewave-cloud gateway bundle gw7 --config cloud.yaml
    edgewave-cloud gateway list --config cloud.yaml

Exit codes: 0 done; 2 the request or the configuration cannot work (the reason on stderr).
Secrets are never printed: commands name the files that hold them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgewave.shared.config_keys import format_time

from .settings import SettingsError, load_settings

COMMANDS = ("tls-init", "broker-init", "gateway")


def add_parsers(sub: argparse._SubParsersAction, default_config: str) -> None:
    """Register the provisioning commands on edgewave-cloud's parser."""
    tls = sub.add_parser("tls-init", help="make a fleet CA and the cloud broker's TLS certificate")
    tls.add_argument("--dir", type=Path, required=True, help="where ca.crt, ca.key, server.crt, server.key go")
    tls.add_argument("--name", action="append", required=True,
                     help="DNS name or IP address gateways reach the broker by (repeatable; the first is its CN)")

    broker = sub.add_parser("broker-init", help="the cloud's broker users and roles (dynamic security) and broker "
                                                        "config; run again to upgrade or re-sync")
    broker.add_argument("--config", default=default_config)

    gateway = sub.add_parser("gateway", help="provision, revoke or re-key a gateway")
    actions = gateway.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="broker user and role, signing key and bundle for a new gateway")
    add.add_argument("gateway")
    add.add_argument("--client-cert", action="store_true", help="also issue a client certificate (mutual TLS)")
    add.add_argument("--exist-ok", action="store_true",
                     help="a gateway already provisioned is not an error: its bundle is written again")
    remove = actions.add_parser("remove", help="revoke a gateway: its broker user, role and connection go")
    remove.add_argument("gateway")
    rotate = actions.add_parser("rotate-key", help="a new config-signing key, the old one valid for an overlap")
    rotate.add_argument("gateway")
    rotate.add_argument("--overlap-hours", type=float,
                        help="how long the old key still verifies (default: fleet.key_overlap_s)")
    bundle = actions.add_parser("bundle", help="write the gateway's bundle again")
    bundle.add_argument("gateway")
    actions.add_parser("list", help="provisioned gateways and their key ids")
    for parser in (add, remove, rotate, bundle, actions.choices["list"]):
        parser.add_argument("--config", default=default_config)


def run(args: argparse.Namespace) -> int:
    """Carry out one provisioning command."""
    from .fleet import FleetError, open_fleet

    def refuse(message: str) -> int:
        print(f"edgewave-cloud {args.command}: {message}", file=sys.stderr)
        return 2

    if args.command == "tls-init":
        from .pki import init_broker_tls

        files = init_broker_tls(args.dir, args.name)
        for name, path in files.items():
            print(f"{name}: {path}")
        return 0
    try:
        settings = load_settings(args.config, read_secrets=False)
        fleet = open_fleet(settings)
    except SettingsError as exc:
        return refuse(str(exc))
    try:
        if args.command == "broker-init":
            conf, how = fleet.init_broker()
            print(f"broker config: {conf}")
            print({"broker": "broker users and roles: brought up to date on the running broker",
                   "file": f"broker users and roles: {settings.fleet.dynsec_file} (read when the broker starts)",
                   "restart": f"broker users and roles: {settings.fleet.dynsec_file}; the running broker has an "
                              f"older configuration: restart it on {conf}"}[how])
            print(f"cloud broker user: {settings.fleet.cloud_user} (password in {fleet.cloud_password_path()}; "
                  f"set broker.username and broker.password_file to these)")
            return 0
        if args.action == "list":
            for r in fleet.records():
                rotation = (f" previous_key_id={r.previous_key_id} overlap_until={format_time(r.overlap_until_ms / 1000)}"
                            if r.overlap_until_ms else "")
                print(f"{r.gateway} key_id={r.key_id}{rotation} client_cert={'yes' if r.client_cert else 'no'} "
                      f"added={format_time(r.added_ms / 1000)}")
            return 0
        if args.action == "add" and args.exist_ok and fleet.record(args.gateway) is not None:
            print(f"{args.gateway}: already provisioned; bundle {fleet.bundle(args.gateway)}")
        elif args.action == "add":
            path = fleet.add(args.gateway, client_cert=args.client_cert)
            print(f"{args.gateway}: provisioned; bundle {path} (copy it to the gateway, then run "
                  f"`edgewave-agent install --bundle {path.name}` there)")
        elif args.action == "remove":
            fleet.remove(args.gateway)
            print(f"{args.gateway}: revoked; its broker user and role are gone")
        elif args.action == "rotate-key":
            overlap = None if args.overlap_hours is None else args.overlap_hours * 3600
            path = fleet.rotate_key(args.gateway, overlap)
            record = fleet.record(args.gateway)
            assert record is not None and record.overlap_until_ms is not None
            print(f"{args.gateway}: new signing key {record.key_id} (was {record.previous_key_id}); the old one "
                  f"verifies until {format_time(record.overlap_until_ms / 1000)}; bundle {path}")
        elif args.action == "bundle":
            print(f"{args.gateway}: bundle {fleet.bundle(args.gateway)}")
        return 0
    except (FleetError, SettingsError) as exc:
        return refuse(str(exc))
    finally:
        fleet.close()
