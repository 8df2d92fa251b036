"""`edgewave-agent`: run the gateway agent, print its status, roll its config back, install it."""
from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from edgewave.agent.config import AgentSettings, SettingsError, load_settings
from edgewave.shared.log_format import setup_logging
from edgewave.shared.shutdown import stop_on_signals


# Full collections every this many young (generation 1) ones; CPython's default is 10.
FULL_COLLECTION_EVERY = 1000
# ... and at least this often, so a slow gateway does not keep old cycles for days.
FULL_COLLECTION_INTERVAL_S = 600.0


def tune_garbage_collector() -> None:
    """Keep the cyclic garbage collector's pauses off the latency path.

    A full collection walks every tracked object with the GIL held, so it stalls the
    network thread: measured on the benchmark VM at 1,000 msg/s, 25-40 ms with what
    start-up leaves (modules, rdflib's parse of the config, the compiled network) and
    10-15 ms for the windows' own state (20,000 alpha-memory buckets). Start-up objects
    live as long as the process, so they are frozen out of every collection. Young
    collections (0.15 ms at the median, about 1 ms for the middle generation) still
    reclaim the only cyclic garbage the message path makes (paho's topic matcher leaves
    a closure cycle per message), so full ones can be rare: at 1,000 msg/s about one in
    10 minutes instead of one every 4-5 s (``cmd_run`` adds one every
    ``FULL_COLLECTION_INTERVAL_S`` whatever the rate). Called once the agent has
    started; a process embedding the Agent decides for itself.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


# How long `edgewave-agent status` waits for the running agent to rewrite its state file.
STATUS_WAIT_S = 3.0


# Entries per N-Triples token cache in the agent (the shared default is 65,536). A
# gateway's messages repeat their vocabulary (predicates, sensors, properties, types: a
# few hundred terms, learnt again within a message or two after a cache is emptied) but
# not their observations' IRIs and values, which only fill a cache until it is emptied.
# The memory a full cache held stays with the process: at the demo's pace 4,096 entries
# took half an hour to fill and about 2 MB (docs/benchmarks.md, soak).
TERM_CACHE_LIMIT = 1024


def cmd_run(settings: AgentSettings) -> int:
    from edgewave.agent.runtime import Agent
    from edgewave.shared import ntriples
    from edgewave.shared.configdoc import ConfigRejected

    setup_logging(settings.log_level)
    # The network thread carries each message from socket to socket; the engine, uplink
    # and status threads wake now and then. With CPython's default 5 ms switch interval
    # the network thread could wait that long for the GIL behind one of them.
    sys.setswitchinterval(0.0005)
    ntriples.set_term_cache_limit(TERM_CACHE_LIMIT)
    agent = Agent(settings)
    stop = threading.Event()
    stop_on_signals(logging.getLogger("edgewave.agent"), "agent", stop.set)
    signal.signal(signal.SIGHUP, lambda *_: agent.request_reload())
    signal.signal(signal.SIGUSR1, lambda *_: agent.request_state_file())   # `edgewave-agent status`
    try:
        if not agent.wait_for_storage(stop):
            agent.stop()
            return 0
        agent.start()
    except (ConfigRejected, OSError) as exc:
        # A broken bootstrap document or an unusable data_dir: an operator error, not a crash.
        logging.getLogger("edgewave.agent").error("agent event=cannot_start reason=%r", str(exc))
        agent.stop()
        return 2
    tune_garbage_collector()
    next_full_collection = time.monotonic() + FULL_COLLECTION_INTERVAL_S
    while not stop.wait(1.0):
        if time.monotonic() >= next_full_collection:
            gc.collect()
            next_full_collection = time.monotonic() + FULL_COLLECTION_INTERVAL_S
    agent.stop()
    return 0


def cmd_status(settings: AgentSettings) -> int:
    from edgewave.agent.status import format_status, process_alive, read_state_file

    path = settings.data_path(settings.status.state_file)
    if not path.exists():
        print(f"no state file at {path}: the agent has not run with this config", file=sys.stderr)
        return 1
    doc = read_state_file(path)
    if doc.get("state") == "online" and process_alive(doc.get("pid")):
        doc = fresh_state(path, doc)
    print(format_status(doc))
    return 0 if doc.get("state") == "online" and process_alive(doc.get("pid")) else 3


def fresh_state(path: Path, doc: dict, timeout_s: float = STATUS_WAIT_S) -> dict:
    """The running agent's state file, rewritten on request: the agent writes it only when
    something changed, at most every ``status.state_file_interval_s``, so it may be that old.
    SIGUSR1 asks for a current one; without the right to signal the agent (another user), or
    if it does not answer in time, the file as it is (its age is printed)."""
    from edgewave.agent.status import read_state_file

    try:
        os.kill(int(doc["pid"]), signal.SIGUSR1)
    except (OSError, ValueError):
        return doc
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            newer = read_state_file(path)
        except (OSError, ValueError):
            continue
        if newer.get("time", 0) > doc.get("time", 0):
            return newer
    return doc


def cmd_rollback(settings: AgentSettings) -> int:
    from edgewave.agent.config_store import ConfigStore
    from edgewave.agent.status import process_alive, read_state_file

    store = ConfigStore(settings.data_path(settings.config.store), keep=settings.config.keep)
    try:
        before = store.current()
        current = store.rollback()
    except LookupError as exc:
        print(f"rollback: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(f"rolled back from version {before.version if before else None} to version {current.version}")
    state = settings.data_path(settings.status.state_file)
    pid = None
    if state.exists():
        try:
            doc = read_state_file(state)
            pid = doc.get("pid") if doc.get("state") == "online" else None
        except ValueError:
            pid = None
    if pid and process_alive(pid):
        os.kill(pid, signal.SIGHUP)
        print(f"told the running agent (pid {pid}) to apply it")
    else:
        print("no running agent found: it will start with this version")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgewave-agent", description="edgewave gateway agent")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the agent").add_argument("--config", required=True, help="agent YAML config")
    sub.add_parser("status", help="print the running agent's counters").add_argument("--config", required=True)
    sub.add_parser("rollback", help="return to the previously applied config").add_argument("--config", required=True)
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["install"]:
        # Only then: its imports (tarfile, shutil's compressors, pwd) stay out of a running agent.
        from edgewave.agent import install

        install.add_parser(sub)
    else:
        sub.add_parser("install", help="install a provisioned gateway: user, config, keys, systemd unit")
    args = parser.parse_args(argv)
    if args.command == "install":
        from edgewave.agent import install

        return install.run(args)
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        print(f"edgewave-agent: {exc}", file=sys.stderr)
        return 2
    if args.command == "run":
        return cmd_run(settings)
    if args.command == "status":
        return cmd_status(settings)
    return cmd_rollback(settings)


if __name__ == "__main__":
    sys.exit(main())
