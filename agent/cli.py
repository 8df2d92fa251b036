"""`edgewave-agent`: run the gateway agent, print its status, roll its config back."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from edgewave.agent.config import AgentSettings, SettingsError, load_settings


class KeyValueFormatter(logging.Formatter):
    """``ts=... level=... logger=... <message>``: messages are already key=value."""

    def format(self, record: logging.LogRecord) -> str:
        line = (f"ts={self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}Z "
                f"level={record.levelname} logger={record.name} {record.getMessage()}")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(level: str) -> None:
    import time
    handler = logging.StreamHandler(sys.stderr)
    formatter = KeyValueFormatter()
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def cmd_run(settings: AgentSettings) -> int:
    from edgewave.agent.runtime import Agent
    from edgewave.shared.configdoc import ConfigRejected

    setup_logging(settings.log_level)
    # Four threads hand each message along (paho in, engine, uplink, paho out); with
    # CPython's default 5 ms GIL switch interval a hand-over can wait that long.
    sys.setswitchinterval(0.0005)
    agent = Agent(settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: agent.request_reload())
    try:
        agent.start()
    except (ConfigRejected, OSError) as exc:
        # A broken bootstrap document or an unusable data_dir: an operator error, not a crash.
        logging.getLogger("edgewave.agent").error("agent event=cannot_start reason=%r", str(exc))
        agent.stop()
        return 2
    while not stop.wait(1.0):
        pass
    agent.stop()
    return 0


def cmd_status(settings: AgentSettings) -> int:
    from edgewave.agent.status import format_status, process_alive, read_state_file

    path = settings.data_path(settings.status.state_file)
    if not path.exists():
        print(f"no state file at {path}: the agent has not run with this config", file=sys.stderr)
        return 1
    doc = read_state_file(path)
    print(format_status(doc))
    return 0 if doc.get("state") == "online" and process_alive(doc.get("pid")) else 3


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
    args = parser.parse_args(argv)
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
