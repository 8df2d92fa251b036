"""`edgewave-cloud`: ingest, the Spark job, config push.

    edgewave-cloud run --config configs/cloud.yaml          ingest + Spark job, supervised
    edgewave-cloud ingest --config configs/cloud.yaml       ingest alone
    edgewave-cloud spark --config configs/cloud.yaml        the Spark job alone
    edgewave-cloud push-config --config configs/cloud.yaml --gateway gw1 FILE
    edgewave-cloud gateway add|remove|rotate-key|bundle|list GW    provisioning (fleet_cli.py)
    edgewave-cloud dashboard --config configs/cloud.yaml    the operator dashboard alone
    edgewave-cloud add-user NAME --role operator            a dashboard user, written into cloud.yaml

Exit codes: 0 success; 1 failure at run time (push: the gateway rejected);
2 usage or configuration error (push: invalid document, nothing published);
3 push: no ack within the timeout.
"""
from __future__ import annotations

import argparse
import faulthandler
import logging
import re
import signal
import sys
from pathlib import Path

from edgewave.shared.alert_text import AlertText
from edgewave.shared.log_format import setup_logging

from .settings import CloudSettings, SettingsError, load_settings

log = logging.getLogger("edgewave.cloud")

DEFAULT_CONFIG = "configs/cloud.yaml"


def _setup_logging(level: str) -> None:
    setup_logging(level)
    # py4j logs every callback-server round trip at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # `kill -USR1 <pid>` writes every thread's Python stack to stderr: where a process
    # that does not stop on SIGTERM is stuck (the test harness asks before it kills).
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def _spark_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", help="Spark master URL (default: spark.master in cloud.yaml, local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark configuration, repeatable; overrides cloud.yaml's spark.conf")


def _parse_conf(items: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgewave-cloud", description="edgewave cloud tier")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="ingest, the Spark job and the dashboard, supervised")
    run.add_argument("--config", default=DEFAULT_CONFIG)
    run.add_argument("--ingest-workers", type=int, metavar="N",
                     help="ingest processes sharing the gateways' events (default: ingest.workers, 1)")
    _spark_options(run)

    ingest = sub.add_parser("ingest", help="take events, status and acks off the broker (alone)")
    ingest.add_argument("--config", default=DEFAULT_CONFIG)
    ingest.add_argument("--worker", type=int, default=0, metavar="N",
                        help="which worker of the group this is (0, the default, also records status and acks)")
    ingest.add_argument("--retire", action="store_true",
                        help="take no new events: land what this worker's session holds, end the session, exit")

    spark = sub.add_parser("spark", help="the Spark aggregation job (alone)")
    spark.add_argument("--config", default=DEFAULT_CONFIG)
    _spark_options(spark)
    spark.add_argument("--available-now", action="store_true",
                       help="process what is in the landing zone now, then stop (backfills, tests)")

    push = sub.add_parser("push-config", help="push a signed config document to gateways",
                          epilog="exit status, the worst over the gateways: 0 applied, 1 rejected by a gateway, "
                                 "2 refused (nothing published), 3 no ack in time (stays retained), 4 not pushed "
                                 "to a gateway (recorded with its reason; the others were pushed)")
    push.add_argument("--config", default=DEFAULT_CONFIG)
    target = push.add_mutually_exclusive_group(required=True)
    target.add_argument("--gateway", action="append", help="gateway id (repeatable)")
    target.add_argument("--all", action="store_true", help="every gateway known in the cloud database")
    push.add_argument("--format", choices=("trig", "turtle"), help="default: from the file extension")
    push.add_argument("--timeout", type=float, help="seconds to wait for acks (default: push.ack_timeout_s)")
    push.add_argument("file", type=Path)

    dashboard = sub.add_parser("dashboard", help="the operator dashboard (alone)")
    dashboard.add_argument("--config", default=DEFAULT_CONFIG)

    add_user = sub.add_parser("add-user", help="add a dashboard user (argon2 password hash) to cloud.yaml")
    add_user.add_argument("name", help="the login name")
    add_user.add_argument("--config", default=DEFAULT_CONFIG, help="the cloud.yaml to add the user to")
    add_user.add_argument("--role", required=True, choices=("viewer", "operator"),
                          help="viewer sees everything; operator may also push, acknowledge and roll back")
    add_user.add_argument("--password-stdin", action="store_true",
                          help="read the password from the first line of standard input instead of prompting")
    add_user.add_argument("--replace", action="store_true",
                          help="the user exists: give them this role and password (their sessions end)")
    add_user.add_argument("--print", action="store_true",
                          help="print the entry instead of writing it into cloud.yaml")

    from .fleet_cli import add_parsers as add_fleet_parsers

    add_fleet_parsers(sub, DEFAULT_CONFIG)

    make = sub.add_parser("make-config", help="assemble a config document (TriG) from patterns, schema, static data")
    make.add_argument("--schema", type=Path, action="append", default=[],
                      help="schema file (Turtle, N-Triples, RDF/XML, N3 or JSON-LD, by extension), repeatable")
    make.add_argument("--static", type=Path, action="append", default=[], help="static triples (same formats), repeatable")
    make.add_argument("--query", type=Path, action="append", default=[], help="RSP-QL pattern (.rq), repeatable")
    make.add_argument("--significance", type=Path, action="append", default=[],
                      help="significance rules (ew:SignificanceRule nodes, Turtle or TriG), repeatable")
    make.add_argument("--alerts", type=Path, help="alert text of patterns (YAML: pattern name -> title, severity, "
                      "message; the message a template over the pattern's variables)")
    make.add_argument("--mapping", action="append", default=[], metavar="PRESET|FILE",
                      help="a device payload mapping (RML, docs/mappings.md): a shipped preset by name (senml, "
                           "senml-cbor, zigbee2mqtt, tasmota, esphome) or a Turtle file of your own; repeatable")
    make.add_argument("--mapping-stream", metavar="IRI",
                      help="the stream the presets' observations enter (e.g. http://example.org/stream/building)")
    make.add_argument("--mapping-base", metavar="IRI",
                      help="the base IRI the presets name sensors and observations under "
                           "(e.g. http://example.org/gw1/ gives http://example.org/gw1/sensor/<device>)")
    make.add_argument("--out", type=Path, help="output file (default stdout)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    if args.command in ("tls-init", "broker-init", "gateway"):
        from .fleet_cli import run as run_fleet_command

        return run_fleet_command(args)
    if args.command == "make-config":
        return _make_config(args)
    if args.command == "add-user":
        return _add_user(args)
    try:
        settings = load_settings(args.config)
        if args.command == "run":
            from .service import run_service

            spark_args = (["--master", args.master] if args.master else []) + [
                a for item in args.conf for a in ("--conf", item)]
            _parse_conf(args.conf)
            workers = settings.ingest.workers if args.ingest_workers is None else args.ingest_workers
            if not 1 <= workers <= 64:
                raise SettingsError("--ingest-workers must be between 1 and 64")
            from .ingest_workers import WorkerRoster

            roster = WorkerRoster(settings.landing_zone)
            retire = roster.start(workers)
            return run_service(args.config, spark_args, args.log_level, dashboard=bool(settings.dashboard.users),
                               ingest_workers=workers, retire_workers=retire,
                               on_retired=lambda: roster.retired(workers))
        if args.command == "ingest":
            from .ingest import run_ingest

            if args.worker < 0:
                raise SettingsError("--worker must not be negative")
            return run_ingest(settings, args.worker, retiring=args.retire)
        if args.command == "spark":
            from .job import CheckpointMismatch, run_job
            from .spark_runtime import JavaMissing

            try:
                return run_job(settings, master=args.master, extra_conf=_parse_conf(args.conf),
                               available_now=args.available_now)
            except (JavaMissing, CheckpointMismatch) as exc:
                print(f"edgewave-cloud spark: {exc}", file=sys.stderr)
                return 2
        if args.command == "push-config":
            return _push(settings, args)
        if args.command == "dashboard":
            from .dashboard.server import run_dashboard

            return run_dashboard(settings)
    except SettingsError as exc:
        print(f"edgewave-cloud: {exc}", file=sys.stderr)
        return 2
    return 2


def _make_config(args: argparse.Namespace) -> int:
    """Write a config document that push-config will accept and a gateway will compile.

    A file that cannot be read, a pattern that does not parse, or a malformed line in the
    schema or static data stops it with the file and the reason (exit status 2): a document
    with part of its input missing must not reach a gateway. The assembled document then
    goes through the check the agent runs before it applies one (two patterns registering
    one name, a pattern the engine cannot compile, the document limits), refused with the
    agent's own reason."""
    from edgewave.agent.engine.config_check import check_config_document
    from edgewave.agent.engine.per_instance import parse_for_evaluation
    from edgewave.agent.engine.query import QuerySyntaxError
    from edgewave.shared import configdoc
    from edgewave.shared.ntriples import NTriplesError
    from edgewave.shared.rdf_files import RdfFileError, read_text, read_triples

    def refuse(reason: str) -> int:
        print(f"edgewave-cloud make-config: {reason}", file=sys.stderr)
        return 2

    def triples(paths: list[Path]) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        for path in paths:
            errors: list[NTriplesError] = []
            out += read_triples(path, errors)
            if errors:
                more = f" (and {len(errors) - 1} more malformed lines)" if len(errors) > 1 else ""
                raise RdfFileError(f"{path}: {errors[0]}{more}")
        return out

    patterns: list[tuple[str, str]] = []     # (name, text) as given: a name twice is the check's to refuse
    try:
        for path in args.query:
            text = read_text(path)
            try:
                name = parse_for_evaluation(text).name     # a continuous pattern or a per-instance query
            except QuerySyntaxError as exc:
                return refuse(f"{path}: {exc}")
            patterns.append((name, text))
        schema = sorted(set(triples(args.schema)))
        static = triples(args.static)
        rules: list[configdoc.SignificanceRule] = []
        for path in args.significance:
            try:
                rules += configdoc.load_config_document(read_text(path), "trig" if path.suffix == ".trig" else
                                                        "turtle").significance
            except configdoc.ConfigRejected as exc:
                return refuse(f"{path}: {exc}")
    except RdfFileError as exc:
        return refuse(str(exc))
    try:
        alerts = _alert_texts(args.alerts, [name for name, _ in patterns]) if args.alerts else {}
    except (OSError, ValueError) as exc:
        return refuse(f"{args.alerts}: {exc}")
    try:
        mappings = configdoc.canonical_triples(_mapping_triples(args), "m") if args.mapping else []
    except (RdfFileError, ValueError) as exc:
        return refuse(str(exc))
    document = configdoc.build_config_document(patterns, schema, static, rules, alerts, mappings)
    try:
        check_config_document(document, "trig")
    except configdoc.ConfigRejected as exc:
        return refuse(exc.reason)
    if args.out:
        args.out.write_text(document, encoding="utf-8")
    else:
        sys.stdout.write(document)
    return 0


def _mapping_triples(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """make-config's ``--mapping`` arguments as the triples of the document's mappings graph: a preset
    with ``--mapping-stream`` and ``--mapping-base`` filled in, a file as it is written (its sources
    name their own ``ew:stream`` and ``ew:baseIRI``); ValueError says what is missing."""
    from edgewave.agent.mapping import PRESETS, MappingError, preset_triples
    from edgewave.shared.ntriples import NTriplesError
    from edgewave.shared.rdf_files import RdfFileError, read_triples

    out: list[tuple[str, str, str]] = []
    for given in args.mapping:
        if given in PRESETS:
            if not (args.mapping_stream and args.mapping_base):
                raise ValueError(f"the preset {given} needs --mapping-stream and --mapping-base (the stream its "
                                 "observations enter, the base IRI of its sensors)")
            try:
                out += preset_triples(given, stream=args.mapping_stream, base_iri=args.mapping_base)
            except MappingError as exc:
                raise ValueError(f"preset {given}: {exc}") from exc
            continue
        path = Path(given)
        if not path.exists():
            raise ValueError(f"--mapping {given}: neither a preset ({', '.join(PRESETS)}) nor a file")
        errors: list[NTriplesError] = []
        out += read_triples(path, errors)
        if errors:
            raise RdfFileError(f"{path}: {errors[0]}")
    return out


def _alert_texts(path: Path, names: list[str]) -> dict[str, AlertText]:
    """make-config's ``--alerts`` file: {pattern name: {title, severity, message}}; the texts
    themselves are checked with the document (``check_config_document``)."""
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
    if not isinstance(raw, dict):
        raise ValueError("expected a mapping of pattern name to title, severity and message")
    out: dict[str, AlertText] = {}
    for name, fields in raw.items():
        if name not in names:
            raise ValueError(f"alert text for {name!r}, which no --query pattern registers "
                             f"(the patterns: {', '.join(names) or 'none'})")
        if not isinstance(fields, dict) or set(fields) - {"title", "severity", "message"} \
                or not all(isinstance(v, str) for v in fields.values()):
            raise ValueError(f"{name}: expected title, severity and message, each a string")
        out[name] = AlertText(fields.get("title"), fields.get("severity"), fields.get("message"))
    return out


def _add_user(args: argparse.Namespace) -> int:
    """Add a dashboard user to cloud.yaml (or print the entry); the password never touches disk or the command line."""
    import getpass

    import yaml

    from .dashboard.auth import hash_password
    from .dashboard.user_entries import UserEntryError, check_name_free, write_user

    def refuse(reason: str) -> int:
        print(f"edgewave-cloud add-user: {reason}", file=sys.stderr)
        return 2

    if not re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", args.name):
        return refuse("a name is 1-64 letters, digits, '_', '.', '@' or '-'")
    replacing = False
    if not args.print:
        try:
            replacing = check_name_free(args.config, args.name, args.replace)
        except UserEntryError as exc:
            return refuse(f"{args.config}: {exc}")
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            return refuse("the passwords differ")
    if len(password) < 10:
        return refuse("the password must have at least 10 characters")
    entry = {"role": args.role, "password_hash": hash_password(password)}
    if args.print:
        print(f"# add {args.name} under dashboard.users in cloud.yaml, then restart the dashboard:", file=sys.stderr)
        sys.stdout.write(yaml.safe_dump({"dashboard": {"users": {args.name: entry}}}, default_flow_style=False,
                                        sort_keys=False))
        return 0
    try:
        write_user(args.config, args.name, entry)
    except (UserEntryError, OSError) as exc:
        return refuse(f"{args.config}: {exc}")
    print(f"{'replaced' if replacing else 'added'} {args.name} ({args.role}) in {args.config}; restart the "
          f"dashboard to let them log in", file=sys.stderr)
    return 0


def _push(settings: CloudSettings, args: argparse.Namespace) -> int:
    from .database import open_database
    from .publisher import EXIT_INVALID, exit_code, push_config
    from .registry import known_gateways

    if args.all:
        gateways = known_gateways(open_database(settings.database))
        if not gateways:
            print("edgewave-cloud push-config: no gateways known in the cloud database yet", file=sys.stderr)
            return EXIT_INVALID
    else:
        gateways = list(dict.fromkeys(args.gateway))
    try:
        outcomes = push_config(settings, gateways, args.file, fmt=args.format, timeout=args.timeout)
    except (OSError, ConnectionError) as exc:
        broker = settings.broker
        print(f"edgewave-cloud push-config: cannot reach the broker at {broker.host}:{broker.port}: {exc}",
              file=sys.stderr)
        return 1
    invalid = [o for o in outcomes if o.status == "invalid"]
    if invalid:
        print(f"edgewave-cloud push-config: refused, nothing published: {invalid[0].reason}", file=sys.stderr)
    return exit_code(outcomes)


if __name__ == "__main__":
    sys.exit(main())
