"""What the fuzz targets share: turning bytes into text, and known, reported crashes.

A target's ``TestOneInput(data)`` calls one decoder family and lets only the documented
error type pass; anything else propagates and is a crash. A crash that is found but not
fixed yet is listed in the target's ``KNOWN``; it still crashes the target unless
``EDGEWAVE_FUZZ_ALLOW_KNOWN=1`` (``run.py --allow-known``), so that a long run can look
past it for new ones. When the decoder is fixed, the entry goes and the input moves to
``regressions/``.
"""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import Callable


def text_of(data: bytes) -> str:
    """Bytes as the str a reader of a file would get: UTF-8, each invalid byte kept as a
    lone surrogate (``surrogateescape``, as ``edgewave match`` reads its files), so the
    str decoders also see lone surrogates."""
    return data.decode("utf-8", "surrogateescape")


def mode_and_payload(data: bytes, modes: str) -> tuple[str, bytes]:
    """The first byte picks one of ``modes`` (a letter of it, or any byte modulo their
    number), the rest is the payload: one target can reach several decoders."""
    if not data:
        return modes[0], b""
    first = chr(data[0])
    if first in modes:
        return first, data[1:]
    return modes[data[0] % len(modes)], data[1:]


@dataclass(frozen=True)
class Known:
    """A reported crash: its exception type, and a function of the innermost traceback
    frames (``filename:function``) and the message that recognises it."""

    what: str
    exc_type: type[BaseException]
    where: str            # a substring of some frame "path:function" in the traceback
    message: str = ""     # a substring of str(exc), or "" for any


def known_allowed() -> bool:
    """Whether this run tolerates the known, reported crashes (``run.py --allow-known``)."""
    return os.environ.get("EDGEWAVE_FUZZ_ALLOW_KNOWN") == "1"


def allow_known(exc: BaseException, known: tuple[Known, ...]) -> bool:
    """True when known crashes are tolerated for this run and ``exc`` is one of them."""
    if not known_allowed():
        return False
    frames = [f"{f.filename}:{f.name}" for f in traceback.extract_tb(exc.__traceback__)]
    for k in known:
        if isinstance(exc, k.exc_type) and k.message in str(exc) and any(k.where in f for f in frames):
            return True
    return False


def guarded(one: Callable[[bytes], None], known: tuple[Known, ...] = ()) -> Callable[[bytes], None]:
    """``TestOneInput`` for ``one``: documented errors are caught inside ``one``; the rest
    propagate unless they are known (see ``allow_known``)."""

    def test_one_input(data: bytes) -> None:
        try:
            one(data)
        except Exception as exc:  # a crash, unless known and tolerated
            if not allow_known(exc, known):
                raise

    return test_one_input
