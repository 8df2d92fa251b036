"""One thread for the sockets of every MQTT link of the agent.

Why not paho's own thread per connection (``loop_start``): there, a publish made on any
other thread is queued and that connection's thread is woken through a socket pair. On
the latency path of a gateway (a sensor message read on the local connection, matched,
and its event published on the cloud connection) that was a thread hand-over and three
extra system calls per event, and the wake-ups took a fifth of the agent's CPU at 1,000
events/s (py-spy). Here one thread selects on both brokers' sockets: it reads a sensor
message, and the handler it runs writes the resulting event to the cloud socket at once
(paho writes immediately when no network thread of its own runs).

Rules for the rest of the agent:

- paho clients are touched only on this thread. Other threads go through ``call`` (runs
  the function here and returns its result) or ``call_soon`` (runs it here later).
- A thread that holds a lock this thread may wait for (the engine lock) must use
  ``call_soon``, never ``call``: ``call`` would wait for a thread that waits for it.
- Connecting is the one blocking step (TCP connect, TLS handshake, bounded by the
  broker's connect timeout). It runs on a short-lived thread of its own, so an
  unreachable cloud broker never stalls the local side; the loop takes the socket over
  once the attempt returns.
"""
from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections import deque
from typing import Any, Callable, Protocol

from edgewave.shared.log_limit import LogLimiter

log = logging.getLogger("edgewave.agent.mqtt")

MISC_EVERY_S = 0.5     # keepalive pings and timeouts (paho's loop_misc)
IDLE_WAIT_S = 1.0      # longest select() when nothing is due


class LoopLink(Protocol):
    """What the loop needs of a connection (``MqttLink`` implements it)."""

    name: str
    client: Any

    def due(self, now: float) -> float | None: ...
    def begin_connect(self) -> Callable[[], BaseException | None] | None: ...
    def connect_finished(self, error: BaseException | None) -> None: ...


class NetworkLoop:
    """Runs the registered links' sockets on one thread (see the module docstring)."""

    def __init__(self, name: str = "network") -> None:
        self.name = name
        self._links: list[LoopLink] = []
        self._calls: deque[Callable[[], None]] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._live = False         # the thread runs and takes calls (changed under _lock)
        self._stopping = False
        self._connecting: set[int] = set()   # id() of links whose connect attempt runs
        self.callback_errors = 0
        self._error_log = LogLimiter(period_s=60.0)

    # -- other threads -----------------------------------------------------------------
    def in_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the loop thread, after what is already queued; never waits.
        Without a running loop (before the first link, after the last) it runs at once."""
        with self._lock:
            live = self._live
            if live:
                self._calls.append(fn)
                wake = not self._woken
                self._woken = True
        if not live:
            fn()
            return
        if wake:
            try:
                self._wake_w.send(b"x")
            except (BlockingIOError, OSError):
                pass

    def call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn`` on the loop thread and return its result (or raise its exception)."""
        if self.in_loop() or not self._live:
            return fn()
        done = threading.Event()
        box: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:   # handed to the caller, which re-raises it
                box.append((False, exc))
            finally:
                done.set()

        self.call_soon(run)
        if not done.wait(timeout):
            raise TimeoutError(f"network loop {self.name}: no answer in {timeout:.0f} s")
        ok, value = box[0]
        if ok:
            return value
        raise value

    def add(self, link: LoopLink) -> None:
        """Start serving ``link`` (starts the thread on first use)."""
        with self._lock:
            if not self._live:
                if self._thread is not None:
                    self._thread.join(timeout=5)
                self._live = True
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self.call_soon(lambda: self._links.append(link) if link not in self._links else None)

    def remove(self, link: LoopLink) -> None:
        """Stop serving ``link``; the thread ends with the last one."""
        def drop() -> None:
            if link in self._links:
                self._links.remove(link)
            if not self._links:
                self._stopping = True
        self.call(drop)
        thread = self._thread
        if self._stopping and thread is not None and not self.in_loop():
            thread.join(timeout=5)

    # -- the loop thread ---------------------------------------------------------------
    def _run_calls(self) -> None:
        with self._lock:
            calls = list(self._calls)
            self._calls.clear()
            self._woken = False
        for fn in calls:
            try:
                fn()
            except Exception:   # one failed call must not end the loop every link depends on
                log.exception("mqtt loop=%s event=call_failed", self.name)

    def _run(self) -> None:
        next_misc = 0.0
        while True:
            self._run_calls()
            if self._stopping:
                with self._lock:
                    if not self._calls:
                        self._live = False
                        self._links.clear()
                        return
                continue
            now = time.monotonic()
            reads: list[Any] = [self._wake_r]
            writes: list[Any] = []
            wait = IDLE_WAIT_S
            owners: dict[Any, LoopLink] = {}
            for link in self._links:
                if id(link) in self._connecting:
                    continue
                sock = link.client.socket()
                if sock is None:
                    due = link.due(now)
                    if due is not None and due <= now:
                        self._start_connect(link)
                    elif due is not None:
                        wait = min(wait, due - now)
                    continue
                owners[sock] = link
                reads.append(sock)
                if link.client.want_write():
                    writes.append(sock)
                if getattr(sock, "pending", None) and sock.pending():
                    wait = 0.0          # TLS has decrypted bytes select() cannot see
            wait = max(0.0, min(wait, next_misc - now)) if owners else wait
            try:
                readable, writable, _ = select.select(reads, writes, [], wait)
            except (OSError, ValueError):
                readable, writable = [], []   # a socket closed under us: look again
            if self._wake_r in readable:
                try:
                    self._wake_r.recv(4096)
                except (BlockingIOError, OSError):
                    pass
            for sock, link in owners.items():
                client = link.client
                try:
                    if sock in readable or (getattr(sock, "pending", None) and sock.pending()):
                        client.loop_read()
                    if sock in writable and client.socket() is sock:
                        client.loop_write()
                except Exception:   # a callback's failure must not end the loop both links depend on
                    self._callback_failed(link)
            now = time.monotonic()
            if now >= next_misc:
                next_misc = now + MISC_EVERY_S
                for link in self._links:
                    if id(link) not in self._connecting and link.client.socket() is not None:
                        link.client.loop_misc()

    def _callback_failed(self, link: LoopLink) -> None:
        """Count and log (once a minute) an exception that escaped paho: the loop goes on."""
        self.callback_errors += 1
        if self._error_log.allow(link.name):
            log.exception("mqtt loop=%s link=%s event=callback_failed errors_total=%d suppressed_since_last=%d",
                          self.name, link.name, self.callback_errors, self._error_log.take_suppressed(link.name))

    def _start_connect(self, link: LoopLink) -> None:
        attempt = link.begin_connect()
        if attempt is None:
            return
        self._connecting.add(id(link))

        def run() -> None:
            error = attempt()

            def finish() -> None:
                self._connecting.discard(id(link))
                link.connect_finished(error)
            self.call_soon(finish)

        threading.Thread(target=run, name=f"connect-{link.name}", daemon=True).start()
