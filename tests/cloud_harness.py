"""Running the real `edgewave-cloud` commands as subprocesses in tests and benchmarks."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import paho.mqtt.client as mqtt
import spark_cds
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from edgewave.cloud.landing import LandingZone
from edgewave.shared import topics


def write_config(tmp: Path, broker: Any = None, **overrides: Any) -> Path:
    """A cloud.yaml with everything under ``tmp``; nested overrides by section (spark={...})."""
    cfg: dict[str, Any] = {
        "landing_zone": str(tmp / "landing"),
        "database": str(tmp / "cloud.db"),
        "ingest": {"roll_seconds": 1, "commit_interval_ms": 20},
        "spark": {"master": "local[2]", "checkpoint": str(tmp / "checkpoint"), "history": str(tmp / "history"),
                  "shuffle_partitions": 2, "trigger_seconds": 2,
                  "conf": {"spark.driver.memory": "768m"}},
        "push": {"ack_timeout_s": 20},
        "gateways": {f"gw{i}": {"key": f"key-of-gw{i}"} for i in range(1, 6)},
    }
    if broker is not None:
        cfg["broker"] = {"host": broker.host, "port": broker.port}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    path = tmp / "cloud.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class CloudProcess:
    """One `edgewave-cloud <command>` subprocess in its own process group (so kill -9 takes its JVM too)."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None, *,
                 prefix: list[str] | None = None) -> None:
        """``prefix``: what the command runs under (``ip netns exec NS``: on another network host)."""
        if args[:1] in (["spark"], ["run"]):
            spark_cds.wait_for_archive()          # a Spark driver: with the class archive
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen([*(prefix or []), sys.executable, "-m", "edgewave.cloud.cli", *args],
                                     stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ, **(env or {})))

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill9(self) -> None:
        """SIGKILL the whole process group, as a crash would."""
        if self.running:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reap_group()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait (then SIGKILL); returns the exit code."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # Every edgewave process of the group writes its threads' stacks to the log
                # (faulthandler on SIGUSR1, see cloud/cli.py): the failure shows where it hung.
                os.killpg(self.proc.pid, signal.SIGUSR1)
                time.sleep(2)
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reap_group()
        return self.proc.returncode

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._reap_group()

    def _reap_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # leftovers (a JVM) of a process that is gone
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2,
             alive: CloudProcess | None = None) -> Any:
    """Poll until ``predicate()`` is truthy; fail naming ``what`` (and the process log) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if alive is not None and not alive.running:
            raise AssertionError(f"process exited ({alive.proc.returncode}) while waiting for {what}:\n"
                                 f"{alive.log()[-4000:]}")
        if time.monotonic() > deadline:
            extra = f"\nprocess log:\n{alive.log()[-4000:]}" if alive is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{extra}")
        time.sleep(interval)


def query(db_path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Read the cloud database (empty result if it or the table does not exist yet)."""
    if not Path(db_path).exists():
        return []
    conn = sqlite3.connect(str(db_path), timeout=60)
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    finally:
        conn.close()


def match_counts(db_path: Path) -> dict[tuple[str, str, int], int]:
    return {(g, p, m): c for g, p, m, c in
            query(db_path, "SELECT gateway, pattern, minute_ms, count FROM matches_per_minute")}


def total_events(db_path: Path) -> int:
    """Events counted so far (matches + significant)."""
    total = 0
    for table in ("matches_per_minute", "significant_per_minute"):
        rows = query(db_path, f"SELECT SUM(count) FROM {table}")
        total += (rows[0][0] or 0) if rows else 0
    return total


# The count tables the job keeps, each read as its key columns then its count.
COUNT_QUERIES = {
    "matches_per_minute": "SELECT gateway, pattern, minute_ms, count FROM matches_per_minute",
    "binding_values": "SELECT pattern, variable, value, count FROM binding_values",
    "significant_per_minute": "SELECT gateway, sensor, property, minute_ms, count FROM significant_per_minute",
    "delay_per_minute": "SELECT minute_ms, kind, count FROM delay_per_minute",
}


def aggregate_counts(db_path: Path) -> dict[str, dict]:
    """Every count the job keeps, by table, keyed as cloud_workload.Workload.expected_counts."""
    return {name: {tuple(row[:-1]): row[-1] for row in query(db_path, sql)} for name, sql in COUNT_QUERIES.items()}


def aggregates_snapshot(db_path: Path) -> dict[str, list[tuple]]:
    """Every aggregate table, sorted, for exact comparisons between runs."""
    tables = {
        **COUNT_QUERIES,
        "delay_histogram": "SELECT minute_ms, kind, bucket_ms, count FROM delay_histogram",
        "delay_per_minute": "SELECT minute_ms, kind, count, sum_ms, min_ms, max_ms, p50_ms, p95_ms FROM delay_per_minute",
    }
    return {name: sorted(query(db_path, sql)) for name, sql in tables.items()}



def rollup_mismatches(db_path: Path) -> list[str]:
    """The per-hour and per-day tables (cloud/rollups.py) that differ from their minute rows summed here,
    independently of the code that writes them; [] when every one agrees (and holds rows, if its minutes do)."""
    from edgewave.cloud import rollups

    wrong = []
    for rollup in rollups.ROLLUPS:
        keys = ", ".join(rollup.key_names)
        values = ", ".join(rollup.value_names)
        summed = ", ".join([*(f"SUM({c})" for c in rollup.sums), *(f"MIN({c})" for c in rollup.mins),
                            *(f"MAX({c})" for c in rollup.maxs)])
        for period, table, time_column in ((rollups.HOUR_MS, rollup.hour_table, "hour_ms"),
                                           (rollups.DAY_MS, rollup.day_table, "day_ms")):
            expected = sorted(query(db_path, f"SELECT minute_ms / {period} * {period} AS t, {keys}, {summed} "
                                             f"FROM {rollup.source} GROUP BY t, {keys}"))
            got = sorted(query(db_path, f"SELECT {time_column}, {keys}, {values} FROM {table}"))
            if got != expected:
                wrong.append(f"{table}: {len(got)} rows, {len(expected)} expected")
    return wrong


def landing_record(event: dict[str, Any], ingest_ms: int) -> dict[str, Any]:
    """What ingest writes for an event: the event without @context, plus ingestTime."""
    record = {k: v for k, v in event.items() if k != "@context"}
    record["ingestTime"] = ingest_ms
    return record


def consumed_files(checkpoint: Path) -> dict[str, int]:
    """Landing files the job's file source has taken, with the batch that took each."""
    out: dict[str, int] = {}
    source_log = Path(checkpoint) / "sources" / "0"
    if not source_log.is_dir():
        return out
    for entry in source_log.iterdir():
        if not entry.name.split(".")[0].isdigit():  # N and N.compact (the log compacts every 10 batches)
            continue
        for line in entry.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                item = json.loads(line)
                out[item["path"].removeprefix("file://")] = item["batchId"]
    return out


def committed(checkpoint: Path) -> set[int]:
    """Batch ids Spark has recorded as done."""
    commits = Path(checkpoint) / "commits"
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()} if commits.is_dir() else set()


def job_caught_up(landing: Path, checkpoint: Path) -> bool:
    """Every landing file is closed, taken by the job, and its batch is committed."""
    if list(Path(landing).rglob("*.inprogress")):
        return False
    files = {str(p) for p in Path(landing).rglob("*.jsonl")}
    taken = consumed_files(checkpoint)
    if not files <= set(taken):
        return False
    done = committed(checkpoint)
    return all(taken[f] in done for f in files)


def fill_landing_zone(root: Path, events: list[dict]) -> int:
    """The workload as ingest would have written it: many small closed files."""
    zone = LandingZone(root, roll_bytes=40_000, roll_seconds=3600)
    start = int(time.time() * 1000)
    for i, event in enumerate(events):
        zone.append(landing_record(event, start + i * 5), start + i * 5)
        zone.roll_if_due()
    zone.close()
    return zone.files_closed


def retained_config(broker: Any, gateway: str, wait_s: float = 1.5) -> bytes | None:
    """The retained message on a gateway's config topic, if any."""
    got: list[bytes] = []
    done = threading.Event()
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.on_message = lambda c, u, m: (got.append(m.payload), done.set())
    client.on_connect = lambda c, u, f, rc, p: c.subscribe(topics.config_topic(gateway), qos=1)
    client.connect(broker.host, broker.port)
    client.loop_start()
    done.wait(wait_s)
    client.disconnect()
    client.loop_stop()
    return got[0] if got else None
