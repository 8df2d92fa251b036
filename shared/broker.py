"""How to reach one MQTT broker: address, credentials and TLS, alike in every tier's YAML.

The agent (its local and cloud brokers), the cloud (its broker) and the simulator (each
gateway's local broker) describe a broker with the same keys, so an operator writes TLS
and credentials once, one way, and ``edgewave.shared.mqtt_client`` applies them alike:

    host, port, keepalive_s, username, password, password_file,
    tls: {ca, cert, key, insecure}

A tier adds what only it needs (the agent's persistent sessions: ``SessionBrokerSettings``;
the simulator's QoS and client id prefix).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from edgewave.shared.settings import setting


@dataclass
class TlsSettings:
    """TLS towards one broker; all paths PEM. Enabled as soon as ``ca`` or ``cert`` is set."""

    ca: str | None = None          # CA bundle that signed the broker's certificate
    cert: str | None = None        # client certificate (mutual TLS)
    key: str | None = None         # client private key
    insecure: bool = False         # skip hostname verification (test rigs only)

    @property
    def enabled(self) -> bool:
        """Whether the connection uses TLS (a CA or a client certificate is configured)."""
        return bool(self.ca or self.cert)


@dataclass
class BrokerSettings:
    """One MQTT broker connection: address, credentials, TLS."""

    # Older spellings still read (cloud.yaml's flat TLS keys).
    SETTINGS_ALIASES: ClassVar[dict[str, str]] = {"tls_ca": "tls.ca", "tls_cert": "tls.cert", "tls_key": "tls.key"}

    host: str = "127.0.0.1"
    port: int = setting(1883, minimum=1, maximum=65535)
    keepalive_s: int = setting(30, minimum=0, maximum=65535)
    username: str | None = None
    password: str | None = None
    password_file: str | None = None   # or read the password from this file (mode 0600; wins over password)
    tls: TlsSettings = field(default_factory=TlsSettings)

    @property
    def address(self) -> tuple[str, int]:
        """(host, port), for messages and connect calls."""
        return (self.host, self.port)

    def secret(self) -> str | None:
        """The password to log in with: ``password_file``'s content (read now) wins over ``password``.
        Raises OSError when the file cannot be read."""
        if self.password_file:
            return Path(self.password_file).read_text().strip()
        return self.password


@dataclass
class SessionBrokerSettings(BrokerSettings):
    """A broker on which a client keeps a persistent MQTT 5 session (the agent's two links)."""

    client_id: str | None = None       # must be stable for the session; None: the tier's default
    # How long the broker keeps the session while the client is away (MQTT 5 session expiry).
    session_expiry_s: int = setting(86400, minimum=0)


@dataclass
class ReconnectSettings:
    """Delays between reconnect attempts: from ``min_delay_s``, growing up to ``max_delay_s``."""

    min_delay_s: float = 0.5
    max_delay_s: float = 30.0
