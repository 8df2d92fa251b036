"""A real Mosquitto broker as a subprocess, for tests and benchmarks.

Every test that needs MQTT talks to one of these: its own config, a free loopback
port, a temporary persistence directory, optionally username/password. ``stop()``
and ``start()`` let fault-injection tests take the broker away and bring it back on
the same port with the same persisted sessions and retained messages.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def find_mosquitto() -> str:
    """The mosquitto binary (Debian installs it in /usr/sbin, often not on PATH)."""
    for candidate in (shutil.which("mosquitto"), "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("mosquitto not found: run `make setup` (scripts/install-system-packages.sh installs it)")


_PORTS = random.SystemRandom()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now, below the kernel's ephemeral
    range: a port from that range (what binding port 0 gives) can be handed to another
    process's outgoing connection before the broker that was to listen on it starts. Drawn
    from the system's randomness: pytest-randomly seeds ``random`` alike in every worker."""
    low, high = 10_000, _ephemeral_start() - 1
    for _ in range(50):
        port = _PORTS.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MosquittoBroker:
    """One mosquitto process with persistence in ``workdir``."""

    def __init__(self, workdir: Path, *, port: int | None = None,
                 username: str | None = None, password: str | None = None, autosave_interval_s: int = 1) -> None:
        """``autosave_interval_s``: how often mosquitto saves its state (what a SIGKILL does not lose);
        shared/mosquitto_files.py gives the cloud broker 5."""
        self.autosave_interval_s = autosave_interval_s
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.username = username
        self.password = password
        self.proc: subprocess.Popen | None = None
        self.config_path = self.workdir / "mosquitto.conf"
        self.log_path = self.workdir / "mosquitto.log"
        self._write_config()

    def _write_config(self) -> None:
        persistence = self.workdir / "data"
        persistence.mkdir(exist_ok=True)
        lines = [
            f"listener {self.port} {self.host}",
            "persistence true",
            f"persistence_location {persistence}/",
            f"autosave_interval {self.autosave_interval_s}",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "max_queued_messages 100000",
            "max_inflight_messages 0",
            "persistent_client_expiration 1h",
            # Without it Nagle's algorithm holds a message sent just after another for ~40 ms.
            "set_tcp_nodelay true",
        ]
        if os.geteuid() == 0:
            # As root, mosquitto would switch to the 'mosquitto' user, which cannot write here.
            lines.append("user root")
        if self.username:
            passwd = self.workdir / "passwd"
            passwd.write_text("")
            subprocess.run(["mosquitto_passwd", "-b", str(passwd), self.username, self.password or ""],
                           check=True, capture_output=True)
            os.chmod(passwd, 0o600)
            lines += ["allow_anonymous false", f"password_file {passwd}"]
        else:
            lines.append("allow_anonymous true")
        self.config_path.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> "MosquittoBroker":
        """Start (or restart) on the same port; returns once it accepts connections."""
        if self.running:
            return self
        self.proc = subprocess.Popen([find_mosquitto(), "-c", str(self.config_path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                log = self.log_path.read_text() if self.log_path.exists() else ""
                raise RuntimeError(f"mosquitto exited with {self.proc.returncode}: {err}{log}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"mosquitto did not accept connections on {self.url} within {timeout}s")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop: mosquitto writes its persistence file (sessions, queued, retained)."""
        if not self.running:
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close_pipes()

    def kill(self) -> None:
        """Abrupt stop (SIGKILL): whatever was not autosaved is lost, as in a crash."""
        if self.running:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> "MosquittoBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
