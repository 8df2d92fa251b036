"""Fuzz target: the simulator's readers of files from outside.

The first byte picks what the rest is:

- ``R``: a recording (``read_messages``, header comments and recorded lines); its
  documented behaviour is to raise nothing: bad lines are skipped and described in
  ``errors``, and every message it yields holds only lines that parse, or (a device
  payload, ``# ew:payload`` line) a non-empty UTF-8 payload and no lines;
- ``O`` / ``A``: a CSV file for ``convert("uci-occupancy" | "uci-airquality", path)``,
  documented error ``DatasetError``.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from edgewave.firmware_sim.datasets import DatasetError, convert
from edgewave.firmware_sim.recording import read_messages
from edgewave.shared.ntriples import parse_line

from fuzzlib import guarded, mode_and_payload

_DIR = Path(tempfile.mkdtemp(prefix="edgewave-fuzz-sim-"))
atexit.register(shutil.rmtree, _DIR, True)


def _one(data: bytes) -> None:
    mode, payload = mode_and_payload(data, "ROA")
    path = _DIR / "input"
    path.write_bytes(payload)
    if mode == "R":
        errors: list[str] = []
        for message in read_messages(path, errors=errors):
            if message.body is not None:
                assert not message.lines and message.body, message
                message.body.decode("utf-8")  # publishable as recorded
                continue
            assert message.lines and all(parse_line(line) is not None for line in message.lines), message
            "\n".join(message.lines).encode("utf-8")  # publishable: text that is UTF-8
        return
    try:
        for message in convert("uci-occupancy" if mode == "O" else "uci-airquality", path):
            "\n".join(message.lines).encode("utf-8")
    except DatasetError:
        pass


TestOneInput = guarded(_one)
