"""Gateways' config documents as push-config recorded them: the applied one, the push history, diffs.

Read-only over ``config_pushes`` (push-config's table: each push's document,
version, status and the agent's reason). A push's status always ends: pending
until the gateway's ack, then applied or rejected (with the agent's reason); a
push still pending after ``push.ack_timeout_s`` shows as timed out (the
document stays retained on the broker and a late ack still resolves it).
Diffs are Python's difflib, rendered on the server. A document as its parts (the
configuration editor) is config_parts.py.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from edgewave.cloud.registry import PUSH_PENDING, PUSH_TIMEOUT

from .queries import Query

TIMED_OUT = "timed out"
SHOWN_STATUS = {PUSH_TIMEOUT: TIMED_OUT}


@dataclass
class Push:
    gateway: str
    version: int
    format: str
    sha256: str
    pushed_ms: int | None
    status: str
    reason: str
    resolved_ms: int | None

    def shown_status(self, now_ms: int, ack_timeout_s: float) -> str:
        """pending, applied, rejected, or timed out (recorded so, or pending for longer than the ack timeout)."""
        if self.status == PUSH_PENDING and self.pushed_ms is not None \
                and now_ms - self.pushed_ms > ack_timeout_s * 1000:
            return TIMED_OUT
        return SHOWN_STATUS.get(self.status, self.status)


_PUSH_COLUMNS = "gateway, version, format, sha256, pushed_ms, status, reason, resolved_ms"


def _push(row: tuple) -> Push:
    gw, version, fmt, sha, pushed, status, reason, resolved = row
    return Push(gw, int(version), fmt or "trig", sha or "", pushed, status, reason or "", resolved)


def pushes(q: Query, gateway: str, limit: int = 100) -> list[Push]:
    """A gateway's pushes, newest version first."""
    return [_push(r) for r in q.rows(f"SELECT {_PUSH_COLUMNS} FROM config_pushes WHERE gateway = ? "
                                     f"ORDER BY version DESC LIMIT ?", (gateway, limit))]


def latest_pushes(q: Query) -> dict[str, Push]:
    """Each gateway's newest push."""
    rows = q.rows(f"""SELECT {_PUSH_COLUMNS} FROM config_pushes p WHERE version =
                      (SELECT MAX(version) FROM config_pushes WHERE gateway = p.gateway)""")
    return {r[0]: _push(r) for r in rows}


def document(q: Query, gateway: str, version: int) -> tuple[str, str] | None:
    """(text, format) of the document pushed to ``gateway`` as ``version``."""
    rows = q.rows("SELECT document, format FROM config_pushes WHERE gateway = ? AND version = ?", (gateway, version))
    return (rows[0][0] or "", rows[0][1] or "trig") if rows else None


def applied_version(q: Query, gateway: str) -> int | None:
    """The version the gateway last reported applying (its status, or an applied ack)."""
    rows = q.rows("SELECT config_version FROM gateways WHERE gateway = ?", (gateway,))
    if rows and type(rows[0][0]) is int:        # a row stored before status checks may hold anything
        return rows[0][0]
    rows = q.rows("SELECT MAX(version) FROM config_pushes WHERE gateway = ? AND status = 'applied'", (gateway,))
    return rows[0][0] if rows and type(rows[0][0]) is int else None


@dataclass
class DiffLine:
    kind: str        # "add", "del", "ctx", "hunk", "file"
    text: str
    old_no: int | None = None
    new_no: int | None = None


def diff_lines(old: str, new: str, old_name: str, new_name: str, context: int = 3) -> list[DiffLine]:
    """A unified diff of two documents as lines with their kind and line numbers, for the diff page."""
    out: list[DiffLine] = []
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(context))
    if not groups:
        return out
    out.append(DiffLine("file", f"--- {old_name}"))
    out.append(DiffLine("file", f"+++ {new_name}"))
    for group in groups:
        first, last = group[0], group[-1]
        out.append(DiffLine("hunk", f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(DiffLine("ctx", old_lines[i], i + 1, j1 + k + 1) for k, i in enumerate(range(i1, i2)))
                continue
            if tag in ("replace", "delete"):
                out.extend(DiffLine("del", old_lines[i], i + 1, None) for i in range(i1, i2))
            if tag in ("replace", "insert"):
                out.extend(DiffLine("add", new_lines[j], None, j + 1) for j in range(j1, j2))
    return out
