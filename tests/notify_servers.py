"""Real servers for the notification tests: an SMTP server (aiosmtpd) with a self-signed certificate,
and a webhook receiver (http.server) that answers with the statuses it is told to."""
from __future__ import annotations

import datetime as dt
import email
import email.policy
import ipaddress
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key: the test trusts exactly it (``ca_file``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test SMTP server")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "smtp.crt", tmp / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class Mailbox:
    """aiosmtpd's handler: keeps each message it is given, parsed."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.tls: list[bool] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        self.tls.append(session.ssl is not None)
        return "250 OK"


def tls_server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def start_smtp(port: int, mailbox: Any = None, **kwargs: Any) -> Any:
    """aiosmtpd's Controller on 127.0.0.1:``port`` (kwargs: tls_context, ssl_context, authenticator...)."""
    from aiosmtpd.controller import Controller

    controller = Controller(mailbox or Mailbox(), hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    return controller


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.got.append((time.monotonic(), dict(self.headers), body))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def start_hook(port: int = 0, statuses: list[int] | None = None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    server.got, server.statuses = [], list(statuses or [])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
