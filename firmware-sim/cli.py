"""`edgewave-sim`: simulated sensor firmware, scenarios with ground truth, record and replay.

    edgewave-sim run    --config configs/sim.yaml [--scenario S.yaml] [--broker host:port]
                        [--speed 1|10|max] [--duration S] [--gateway gw1] [--gateways N] [--rate R]
                        [--format ntriples|senml|zigbee2mqtt|tasmota|esphome]
                        [--username U --password-file F] [--tls-ca CA --tls-cert C --tls-key K]
    edgewave-sim record --config configs/sim.yaml [--scenario S.yaml] --out run.tsv [--truth truth.jsonl]
                        [--instance-truth instances.jsonl] [--format ...]
    edgewave-sim replay run.tsv [--speed 1|10|max] [--broker host:port | --stdout] [credentials, TLS as run]
    edgewave-sim static --config configs/sim.yaml [--gateway gw1] [--out site.nt]
    edgewave-sim import uci-occupancy datatest.txt --out occupancy.tsv [--static occ.nt] [--limit N]

See docs/sim.md. Exit status: 0 done, 1 the run failed (broker lost at start, I/O), 2 bad
arguments or configuration.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Iterable

from edgewave.shared.log_format import setup_logging
from edgewave.shared.ntriples import serialize

from .clock import Pacer, parse_speed
from .config import SensorBrokerSettings, SettingsError, TlsSettings, load_config
from .datasets import DATASETS, ConversionStats, DatasetError, convert, static_triples
from .fleet import Message, build_sites
from .payload_formats import FORMATS
from .publisher import MqttSink, SinkError, StdoutSink
from .recording import read_messages, write_messages
from .scenario import ScenarioError, load_scenario
from .simulation import Simulation
from .truth import AmbiguousScenario

log = logging.getLogger("edgewave.firmware_sim")


class _Stop(Exception):
    pass


def _broker_arg(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected host:port, e.g. 127.0.0.1:1883")
    return host, int(port)


def _speed_arg(text: str) -> float | None:
    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgewave-sim", description="edgewave simulated sensor firmware")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR (logs go to stderr)")
    common = argparse.ArgumentParser(add_help=False)  # so --log-level also works after the command
    common.add_argument("--log-level", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)

    def fleet_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="sim config (YAML); default: built-in defaults")
        p.add_argument("--scenario", help="scenario file (configs/scenarios/*.yaml) to inject")
        p.add_argument("--gateway", action="append", help="only this gateway (repeatable); default all")
        p.add_argument("--gateways", type=int, help="load test: gw1..gwN built from the site template")
        p.add_argument("--rate", type=float, help="load test: every sensor reports this many messages/s")
        p.add_argument("--duration", type=float, help="seconds of sim time (default: scenario's, then config's)")
        p.add_argument("--seed", type=int, help="override the config's seed")
        p.add_argument("--format", choices=list(FORMATS), dest="payload_format",
                       help="payload format the sensors publish (default: the config's format, ntriples); "
                            "the readings and ground truth are the same in every format")

    run = sub.add_parser("run", parents=[common], help="publish simulated observations to MQTT (or stdout) in sim time")
    fleet_options(run)
    run.add_argument("--broker", type=_broker_arg, help="host:port for every gateway (default: config)")
    run.add_argument("--speed", type=_speed_arg, default=1.0, help="1 = real time, 10 = ten times faster, max")
    run.add_argument("--stdout", action="store_true", help="write the stream to stdout instead of MQTT")
    run.add_argument("--forever", action="store_true", help="ignore durations: run until stopped")
    run.add_argument("--truth", help="also write the ground truth (JSON lines) at the end")
    run.add_argument("--instance-truth", help="also write the per-instance queries' ground truth (JSON lines)")
    run.add_argument("--query-truth", help="also write the ground truth of the continuous queries kept beside "
                                           "the scenarios, configs/scenarios/*.rq (JSON lines)")

    record = sub.add_parser("record", parents=[common], help="write a run as a recorded stream, as fast as possible")
    fleet_options(record)
    record.add_argument("--out", required=True, help="recorded stream file (- for stdout)")
    record.add_argument("--truth", help="ground truth of the run (JSON lines)")
    record.add_argument("--instance-truth",
                        help="ground truth of the per-instance queries, one line per window instance (JSON lines)")
    record.add_argument("--query-truth", help="ground truth of the continuous queries kept beside the scenarios, "
                                              "configs/scenarios/*.rq (JSON lines)")

    replay = sub.add_parser("replay", parents=[common], help="replay a recorded stream to MQTT or stdout")
    replay.add_argument("file", help="recorded stream (with or without message headers)")
    replay.add_argument("--speed", type=_speed_arg, default=1.0, help="1 = original pace, 10, ..., max")
    replay.add_argument("--broker", type=_broker_arg, help="host:port; without it the stream goes to stdout")
    replay.add_argument("--qos", type=int, choices=(0, 1, 2), default=1,
                        help="MQTT QoS of the messages (1, as the simulator's sensors: the agent acknowledges a "
                             "message once what it caused is durable)")
    replay.add_argument("--topic", default="ew/in/replay/recorded",
                        help="topic for files without message headers")
    replay.add_argument("--loop", type=int, default=1, help="replay this many times (0 = forever)")
    for p in (run, replay):
        p.add_argument("--username", help="broker user (run: for every gateway; a gateway bundle's: sensors)")
        p.add_argument("--password-file", help="file holding that user's password (keeps it off the command line)")
        p.add_argument("--tls-ca", help="CA certificate (PEM) the broker's certificate is verified with; turns TLS on")
        p.add_argument("--tls-cert", help="client certificate (PEM), for brokers that require one")
        p.add_argument("--tls-key", help="the client certificate's private key (PEM)")
        p.add_argument("--realtime", action="store_true",
                       help="real-time scheduling (SCHED_FIFO) for ms-exact pacing on a busy machine; "
                            "needs root or CAP_SYS_NICE, ignored at --speed max")

    static = sub.add_parser("static", parents=[common], help="write the static triples of the sites")
    static.add_argument("--config")
    static.add_argument("--gateway", action="append")
    static.add_argument("--gateways", type=int)
    static.add_argument("--out", default="-", help="N-Triples file (default stdout)")

    imp = sub.add_parser("import", parents=[common], help="convert a real data set into a recorded stream")
    imp.add_argument("dataset", choices=sorted(DATASETS))
    imp.add_argument("file", help="the data set's CSV (e.g. the UCI occupancy data set's datatest.txt)")
    imp.add_argument("--out", required=True, help="recorded stream file (- for stdout)")
    imp.add_argument("--static", help="also write the sensors' static triples (N-Triples)")
    imp.add_argument("--limit", type=int, help="only the first N rows")
    return parser


def _open_out(path: str):
    return sys.stdout if path == "-" else open(path, "w", encoding="utf-8")


def _simulation(args: argparse.Namespace, keep_readings: bool) -> Simulation:
    """The run the flags describe: config, then the scenario's seed, then --seed, --duration."""
    scenario = load_scenario(args.scenario) if args.scenario else None
    seed = args.seed
    if seed is None and scenario is not None and scenario.seed is not None:
        seed = int(scenario.seed)
    config = load_config(args.config, gateways=args.gateways, rate=args.rate, seed=seed,
                         payload_format=args.payload_format)
    sim = Simulation(config, scenario, args.gateway, args.duration, keep_readings)
    if getattr(args, "forever", False):
        sim.duration_s = None
    return sim


def _pump(messages: Iterable[Message], sink, speed: float | None) -> tuple[int, float, float]:
    """Send messages through ``sink`` at ``speed``; returns (count, seconds, max lateness s)."""
    sink.open()
    pacer = Pacer(speed, sleep=sink.idle)
    count = 0
    began = time.monotonic()
    last_report = began
    for message in messages:
        pacer.wait(message.ms)
        sink.send(message)
        count += 1
        now = time.monotonic()
        if now - last_report >= 10.0:
            last_report = now
            log.info("progress messages=%d rate_per_s=%.0f dropped=%d", count, count / (now - began),
                     getattr(sink, "dropped", 0))
    return count, time.monotonic() - began, pacer.max_lateness_s


def _realtime(args: argparse.Namespace) -> None:
    """Ask for SCHED_FIFO: a busy machine otherwise wakes a sleeping pacer tens of ms late."""
    if not getattr(args, "realtime", False):
        return
    if args.speed is None:
        log.warning("realtime_ignored reason=speed_max (a real-time process that never sleeps starves the machine)")
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        log.info("realtime_scheduling policy=SCHED_FIFO priority=10")
    except (AttributeError, PermissionError, OSError) as exc:
        log.warning("realtime_unavailable reason=%r (pacing continues at normal priority)", str(exc))


def _install_sigterm() -> None:
    def handler(signum, frame):
        raise _Stop()

    signal.signal(signal.SIGTERM, handler)


def _broker_options(args: argparse.Namespace, broker: SensorBrokerSettings) -> SensorBrokerSettings:
    """``broker`` with what the command line says about it (address, credentials, TLS) instead."""
    changes: dict[str, object] = {}
    if args.broker:
        changes["host"], changes["port"] = args.broker
    if args.username:
        changes.update(username=args.username, password=None, password_file=args.password_file)
    if args.tls_ca or args.tls_cert or args.tls_key:
        tls = broker.tls
        changes["tls"] = TlsSettings(ca=args.tls_ca or tls.ca, cert=args.tls_cert or tls.cert,
                                     key=args.tls_key or tls.key, insecure=tls.insecure)
    return dataclasses.replace(broker, **changes)


def _warn_shared_device_topics(sim: Simulation, brokers: dict[str, SensorBrokerSettings]) -> None:
    """Device topics name no gateway (a real site has a broker per gateway), so gateways sharing
    one broker publish the same device on the same topic: say so rather than let it puzzle."""
    if sim.config.format == "ntriples":
        return
    by_broker: dict[tuple[str, int], list[str]] = {}
    for site in sim.sites:
        broker = brokers[site.gateway]
        by_broker.setdefault((broker.host, broker.port), []).append(site.gateway)
    for (host, port), gateways in by_broker.items():
        if len(gateways) > 1:
            log.warning("device_topics_shared format=%s broker=%s:%d gateways=%s (device topics name no gateway: "
                        "give each gateway its own broker, or run one --gateway)", sim.config.format, host, port,
                        ",".join(gateways))


def _write_truths(args: argparse.Namespace, sim: Simulation) -> None:
    if args.truth:
        with open(args.truth, "w", encoding="utf-8") as fh:
            rows = sim.write_truth(fh)
        log.info("truth_written file=%s matches=%d", args.truth, rows)
    if args.instance_truth:
        with open(args.instance_truth, "w", encoding="utf-8") as fh:
            rows = sim.write_instance_truth(fh)
        log.info("instance_truth_written file=%s instances=%d", args.instance_truth, rows)
    if args.query_truth:
        with open(args.query_truth, "w", encoding="utf-8") as fh:
            rows = sim.write_truth(fh, scenario_queries=True)
        log.info("query_truth_written file=%s matches=%d", args.query_truth, rows)


def cmd_run(args: argparse.Namespace) -> int:
    sim = _simulation(args, keep_readings=bool(args.truth or args.instance_truth or args.query_truth))
    if args.stdout:
        sink = StdoutSink()
    else:
        brokers = {gw.id: _broker_options(args, gw.broker) for gw in sim.config.gateways}
        sink = MqttSink(brokers, paced=args.speed is not None)
        _warn_shared_device_topics(sim, brokers)
    sensors = sum(len(site.sensors) for site in sim.sites)
    log.info("run_start gateways=%d sensors=%d duration_s=%s speed=%s format=%s scenario=%s", len(sim.sites),
             sensors, sim.duration_s, args.speed or "max", sim.config.format,
             sim.scenario.name if sim.scenario else None)
    _install_sigterm()
    _realtime(args)
    began = time.monotonic()
    late = 0.0
    try:
        _, _, late = _pump(sim.messages(), sink, args.speed)
    except (KeyboardInterrupt, _Stop):
        log.info("run_stopped messages=%d", sink.sent)
    finally:
        sink.close()
    log.info("run_done messages=%d lines=%d sent=%d dropped=%d seconds=%.2f max_lateness_ms=%.1f",
             sim.messages_out, sim.lines_out, sink.sent, sink.dropped, time.monotonic() - began, late * 1000)
    _write_truths(args, sim)
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    sim = _simulation(args, keep_readings=bool(args.truth or args.instance_truth or args.query_truth))
    if sim.duration_s is None:
        raise SettingsError("record needs a duration (--duration, the scenario's or the config's duration_s)")
    began = time.monotonic()
    out = _open_out(args.out)
    try:
        n_messages, n_lines = write_messages(out, sim.messages())
    finally:
        if out is not sys.stdout:
            out.close()
    elapsed = time.monotonic() - began
    log.info("record_done file=%s messages=%d lines=%d sim_seconds=%s seconds=%.2f", args.out, n_messages, n_lines,
             sim.duration_s, elapsed)
    _write_truths(args, sim)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    if not Path(args.file).is_file():
        log.error("replay_failed reason=no_such_file file=%s", args.file)
        return 2
    if args.broker:
        broker = _broker_options(args, SensorBrokerSettings(qos=args.qos, client_id_prefix="edgewave-replay"))
        sink = MqttSink({"*": broker}, paced=args.speed is not None)
    else:
        sink = StdoutSink()
    _install_sigterm()
    _realtime(args)
    errors: list[str] = []
    total = 0
    rounds = 0
    try:
        while args.loop == 0 or rounds < args.loop:
            count, elapsed, late = _pump(read_messages(args.file, default_topic=args.topic, errors=errors),
                                         sink, args.speed)
            rounds += 1
            total += count
            log.info("replay_round_done round=%d messages=%d seconds=%.2f max_lateness_ms=%.1f", rounds, count,
                     elapsed, late * 1000)
    except (KeyboardInterrupt, _Stop):
        log.info("replay_stopped messages=%d", total)
    finally:
        sink.close()
    for problem in errors[:10]:
        log.warning("replay_line_skipped %s", problem)
    log.info("replay_done messages=%d sent=%d dropped=%d skipped_lines=%d", total, sink.sent, sink.dropped,
             len(errors))
    return 0


def cmd_static(args: argparse.Namespace) -> int:
    config = load_config(args.config, gateways=args.gateways)
    sites = build_sites(config, args.gateway)
    out = _open_out(args.out)
    try:
        out.write(f"# static triples of {', '.join(s.gateway for s in sites)}: edgewave-sim static"
                  f" --config {args.config or '(defaults)'}\n")
        count = 0
        for site in sites:
            for triple in site.static_triples():
                out.write(serialize(triple) + "\n")
                count += 1
    finally:
        if out is not sys.stdout:
            out.close()
    log.info("static_written file=%s gateways=%d triples=%d", args.out, len(sites), count)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    if not Path(args.file).is_file():
        log.error("import_failed reason=no_such_file file=%s", args.file)
        return 2
    stats = ConversionStats()
    out = _open_out(args.out)
    try:
        n_messages, n_lines = write_messages(out, convert(args.dataset, args.file, limit=args.limit, stats=stats))
    finally:
        if out is not sys.stdout:
            out.close()
    if args.static:
        with open(args.static, "w", encoding="utf-8") as fh:
            for triple in static_triples(DATASETS[args.dataset]):
                fh.write(serialize(triple) + "\n")
    log.info("import_done dataset=%s rows=%d observations=%d missing_values=%d bad_rows=%d lines=%d",
             args.dataset, stats.rows, stats.observations, stats.missing, stats.bad_rows, n_lines)
    return 0


COMMANDS = {"run": cmd_run, "record": cmd_record, "replay": cmd_replay, "static": cmd_static, "import": cmd_import}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args.log_level)
    try:
        return COMMANDS[args.command](args)
    except (SettingsError, ScenarioError, AmbiguousScenario, DatasetError) as exc:
        log.error("%s_failed reason=%r", args.command, str(exc))
        print(f"edgewave-sim {args.command}: {exc}", file=sys.stderr)
        return 2
    except SinkError as exc:
        log.error("%s_failed reason=%r", args.command, str(exc))
        print(f"edgewave-sim {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
