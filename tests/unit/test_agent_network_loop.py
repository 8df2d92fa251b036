"""The agent's network thread: calls run on it in order, and a slow connect never stalls it.

The link here is a stand-in with no socket (a real broker is in the integration tests,
which run every agent test through this loop); it lets the test hold a connect attempt
for as long as it likes, which a real broker cannot be made to do on loopback.
"""
from __future__ import annotations

import threading
import time

import pytest

from edgewave.agent.network_loop import NetworkLoop


class _NoSocket:
    def socket(self) -> None:
        return None


class SlowLink:
    """Connects once, and that attempt takes until ``release`` is set."""

    def __init__(self) -> None:
        self.name = "slow"
        self.client = _NoSocket()
        self.release = threading.Event()
        self.attempts = 0
        self.finished: list[BaseException | None] = []
        self._due: float | None = 0.0

    def due(self, now: float) -> float | None:
        return self._due

    def begin_connect(self):  # noqa: ANN201
        self._due = None
        self.attempts += 1

        def attempt() -> BaseException | None:
            self.release.wait(10)
            return ConnectionRefusedError("broker unreachable")
        return attempt

    def connect_finished(self, error: BaseException | None) -> None:
        self.finished.append(error)


def test_calls_run_on_the_loop_thread_in_order_and_return_or_raise():
    loop = NetworkLoop("test")
    link = SlowLink()
    link.release.set()
    loop.add(link)
    try:
        seen: list[tuple[int, str]] = []
        for i in range(5):
            loop.call_soon(lambda i=i: seen.append((i, threading.current_thread().name)))
        assert loop.call(lambda: "answer") == "answer"
        assert seen == [(i, "test") for i in range(5)]
        assert loop.call(loop.in_loop) is True and loop.in_loop() is False
        with pytest.raises(KeyError):
            loop.call(lambda: {}["missing"])
    finally:
        loop.remove(link)


def test_without_a_link_a_call_runs_at_once_on_the_caller():
    loop = NetworkLoop("idle")
    assert loop.call(lambda: threading.current_thread().name) == threading.current_thread().name


def test_a_connect_attempt_that_hangs_does_not_hold_up_the_loop():
    loop = NetworkLoop("test")
    link = SlowLink()
    loop.add(link)
    try:
        deadline = time.monotonic() + 5
        while link.attempts == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.attempts == 1                      # the attempt is running, and hangs
        started = time.monotonic()
        assert loop.call(lambda: 42, timeout=5) == 42  # the loop still answers at once
        assert time.monotonic() - started < 1.0
        assert link.finished == []
        link.release.set()
        deadline = time.monotonic() + 5
        while not link.finished and time.monotonic() < deadline:
            time.sleep(0.01)
        assert isinstance(link.finished[0], ConnectionRefusedError)   # reported back on the loop
    finally:
        link.release.set()
        loop.remove(link)


class _RaisingClient:
    """A connected client whose message callback raises (paho lets it out of loop_read)."""

    def __init__(self) -> None:
        self.sock, self.peer = __import__("socket").socketpair()
        self.reads = 0

    def socket(self):  # noqa: ANN201
        return self.sock

    def want_write(self) -> bool:
        return False

    def loop_read(self) -> None:
        self.reads += 1
        self.sock.recv(4096)
        raise RecursionError("a callback failed on a hostile message")

    def loop_write(self) -> None:
        pass

    def loop_misc(self) -> None:
        pass


class RaisingLink:
    def __init__(self) -> None:
        self.name = "raising"
        self.client = _RaisingClient()

    def due(self, now: float) -> float | None:
        return None

    def begin_connect(self):  # noqa: ANN201
        return None

    def connect_finished(self, error: BaseException | None) -> None:
        pass


def test_an_exception_escaping_a_callback_is_counted_and_the_loop_goes_on():
    loop = NetworkLoop("test")
    link = RaisingLink()
    loop.add(link)
    try:
        for _ in range(3):
            link.client.peer.send(b"x")
            deadline = time.monotonic() + 5
            before = loop.callback_errors
            while loop.callback_errors == before and time.monotonic() < deadline:
                time.sleep(0.01)
        assert loop.callback_errors == 3 and link.client.reads == 3
        assert loop.call(lambda: "still serving") == "still serving"
    finally:
        loop.remove(link)
