"""A TCP proxy that delays what it forwards: a slow uplink where the kernel has no netem.

The network-fault rig (tests/netns_rig.py) puts it between the gateway's agent and the cloud
broker. Each chunk read from one side is written to the other ``delay ± jitter`` later, and
never before the chunk read before it in the same direction: the jitter varies the delay,
not TCP's order. An end of stream is passed on in its place in that order; a reset closes
both sides at once.

Signals switch the delay while connections stay up: SIGUSR1 forwards without delay from
then on (the link is good again; what is already held still leaves in order), SIGUSR2
delays again. ``--passthrough`` starts without delay.

    python tests/link_proxy.py --listen 10.231.1.2:1884 --upstream 10.231.1.2:1883 \\
        --delay-ms 500 --jitter-ms 100

It prints ``listening HOST:PORT`` on stdout once it accepts connections, and a line per
connection on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import socket
import sys

CHUNK_BYTES = 64 * 1024
HELD_CHUNKS = 256        # per direction; beyond, reading waits (what a slow link does to a sender)


class Delay:
    """The delay each chunk gets now (switched by signals)."""

    def __init__(self, delay_s: float, jitter_s: float, *, on: bool, seed: int | None) -> None:
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.on = on
        self._rng = random.Random(seed)

    def hold_s(self) -> float:
        if not self.on:
            return 0.0
        return max(0.0, self.delay_s + self._rng.uniform(-self.jitter_s, self.jitter_s))


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay) -> None:
    """One direction: read chunks, write each once its time has come, in the order read."""
    loop = asyncio.get_running_loop()
    held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=HELD_CHUNKS)

    async def deliver() -> None:
        while True:
            due, data = await held.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:                       # the sender's end of stream, in its place
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    last_due = 0.0
    try:
        while True:
            data = await reader.read(CHUNK_BYTES)
            last_due = max(loop.time() + delay.hold_s(), last_due)    # never overtakes the chunk before
            await held.put((last_due, data))
            if not data:
                break
        await sender
    finally:
        if not sender.done():
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender


async def _serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, upstream: tuple[str, int],
                 delay: Delay) -> None:
    peer = client_w.get_extra_info("peername")
    try:
        server_r, server_w = await asyncio.open_connection(*upstream)
    except OSError as exc:
        print(f"connection from {peer}: upstream {upstream} refused: {exc}", file=sys.stderr, flush=True)
        client_w.transport.abort()
        return
    _no_delay(client_w)
    _no_delay(server_w)
    print(f"connection from {peer} opened", file=sys.stderr, flush=True)
    pumps = [asyncio.create_task(_pump(client_r, server_w, delay)),
             asyncio.create_task(_pump(server_r, client_w, delay))]
    try:
        done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
        failed = [task.exception() for task in done if task.exception() is not None]
        if failed:                             # a reset on one side: reset the other too
            print(f"connection from {peer} reset: {failed[0]!r}", file=sys.stderr, flush=True)
            for task in pumps:
                task.cancel()
            client_w.transport.abort()
            server_w.transport.abort()
            return
        print(f"connection from {peer} closed", file=sys.stderr, flush=True)
    finally:
        for writer in (client_w, server_w):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _main(args: argparse.Namespace) -> None:
    delay = Delay(args.delay_ms / 1000, args.jitter_ms / 1000, on=not args.passthrough, seed=args.seed)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: setattr(delay, "on", False))
    loop.add_signal_handler(signal.SIGUSR2, lambda: setattr(delay, "on", True))
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    upstream = _address(args.upstream)
    host, port = _address(args.listen)
    server = await asyncio.start_server(lambda r, w: _serve(r, w, upstream, delay), host, port)
    print(f"listening {host}:{port}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--upstream", required=True, metavar="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, default=500.0)
    parser.add_argument("--jitter-ms", type=float, default=100.0, help="uniform, either way")
    parser.add_argument("--passthrough", action="store_true", help="start without delay (SIGUSR2 turns it on)")
    parser.add_argument("--seed", type=int, help="for the jitter")
    asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
