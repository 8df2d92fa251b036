"""Health: the counters an operator and the cloud look at, and where they are published.

The same snapshot goes to the retained ``ew/<gateway>/status`` message (every
``status.interval_s``, and at once on connect and on config changes) and to a small
JSON state file in the data directory (every ``status.local_interval_s``), which
``edgewave-agent status`` prints. The Last Will is the same message with
``state: offline``, so a gateway that vanishes shows as offline.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

# Every counter, present (at 0) from the start so an operator sees what is counted. Each
# rejection kind has its own: sensor messages by intake reason (agent/intake.py REASONS),
# config documents as config_rejected (all) and config_rejected_<kind>
# (agent/reconfigure.py VERDICT_KINDS), and handler_error for a work item that raised
# past every check.
COUNTER_NAMES = (
    "messages_in", "bytes_in", "malformed", "oversized", "unknown_stream", "quoted_too_deep",
    "too_many_triples", "decoder_error", "handler_error", "queue_full",
    "triples", "matches", "significant", "below_deadband", "rate_limited",
    "config_applied", "config_rejected",
    "config_rejected_envelope_oversized", "config_rejected_envelope_malformed", "config_rejected_bad_signature",
    "config_rejected_wrong_gateway", "config_rejected_stale_version", "config_rejected_document_oversized",
    "config_rejected_document_too_deep", "config_rejected_parse_error", "config_rejected_invalid",
    "config_rejected_decoder_error", "config_rejected_no_key", "config_rejected_apply_failed",
    "outbox_write_failed", "outbox_unwritten_dropped",
)


class Counters:
    """Plain integer counters; each one is only ever incremented by one thread."""

    def __init__(self) -> None:
        self.values: dict[str, int] = dict.fromkeys(COUNTER_NAMES, 0)

    def add(self, name: str, n: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + n

    def __getitem__(self, name: str) -> int:
        return self.values.get(name, 0)

    def snapshot(self) -> dict[str, int]:
        return dict(self.values)


def status_document(gateway: str, state: str, *, config_version: int | None = None,
                    counters: dict[str, Any] | None = None, outbox: dict[str, Any] | None = None,
                    started_ms: int | None = None, pid: int | None = None) -> dict[str, Any]:
    """The status message body (JSON)."""
    doc: dict[str, Any] = {"gateway": gateway, "state": state, "configVersion": config_version,
                           "time": int(time.time() * 1000)}
    if started_ms is not None:
        doc["startedAt"] = started_ms
    if pid is not None:
        doc["pid"] = pid
    if counters is not None:
        doc["counters"] = counters
    if outbox is not None:
        doc["outbox"] = outbox
    return doc


def encode_status(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def write_state_file(path: Path, doc: dict[str, Any]) -> None:
    """Atomically replace the state file (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    os.replace(tmp, path)


def read_state_file(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def process_alive(pid: int | None) -> bool:
    """True if ``pid`` runs and (where /proc tells) is an edgewave agent, not a reused pid."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"edgewave" in cmdline.read_bytes()
    except OSError:
        return True   # no /proc (not Linux): trust the pid


def format_status(doc: dict[str, Any], now_ms: int | None = None) -> str:
    """Human-readable lines for ``edgewave-agent status``."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    alive = process_alive(doc.get("pid"))
    state = doc.get("state", "?")
    if state == "online" and not alive:
        state = "not running (last state file from a process that is gone)"
    age_s = (now_ms - doc.get("time", now_ms)) / 1000
    rows = [("gateway", doc.get("gateway")), ("state", state), ("pid", doc.get("pid")),
            ("config version", doc.get("configVersion")), ("updated", f"{age_s:.1f}s ago")]
    counters = doc.get("counters") or {}
    rows += [(name, counters[name]) for name in sorted(counters)]
    rows += [(f"outbox.{name}", value) for name, value in sorted((doc.get("outbox") or {}).items())]
    lines = [f"{name:<22}{value}" for name, value in rows]
    return "\n".join(lines)
