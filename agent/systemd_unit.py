"""The agent's systemd unit, rendered for where it is installed.

configs/edgewave-agent.service is this template rendered with the defaults (a test
keeps them equal), so the shipped file and what `edgewave-agent install` writes cannot
drift apart.
"""
from __future__ import annotations

DEFAULT_EXECUTABLE = "/opt/edgewave/venv/bin/edgewave-agent"
DEFAULT_CONFIG = "/etc/edgewave/agent.yaml"
DEFAULT_DATA_DIR = "/var/lib/edgewave-agent"
DEFAULT_USER = "edgewave"

TEMPLATE = """\
# systemd unit for the edgewave gateway agent. `edgewave-agent install` writes it; see docs/operations.md.
[Unit]
Description=edgewave gateway agent (semantic sensor middleware)
Documentation=file:///opt/edgewave/docs/operations.md
After=network-online.target mosquitto.service
Wants=network-online.target
# Restart for ever: a gateway with no operator at hand must come back by itself.
StartLimitIntervalSec=0

[Service]
Type=simple
User={user}
Group={user}
# {data_dir}: outbox, applied configs, state file (data_dir in agent.yaml)
StateDirectory=edgewave-agent
StateDirectoryMode=0750
WorkingDirectory={data_dir}
ExecStart={executable} run --config {config}
# SIGHUP re-reads the applied config from the store (what `edgewave-agent rollback` sends).
ExecReload=/bin/kill -HUP $MAINPID
# SIGTERM: stop intake, drain the engine queue, wait for PUBACKs (shutdown_grace_s), go offline.
KillSignal=SIGTERM
TimeoutStopSec=30
Restart=on-failure
RestartSec=5
# Exit code 2 is a configuration error (bad YAML, broken bootstrap document): restarting cannot fix it.
RestartPreventExitStatus=2
# The agent is small; a cap protects the gateway's other services.
MemoryMax=200M
# Hardening: the agent needs its state directory and the network, nothing else.
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
ReadWritePaths={data_dir}

[Install]
WantedBy=multi-user.target
"""


def render_unit(*, executable: str = DEFAULT_EXECUTABLE, config: str = DEFAULT_CONFIG,
                data_dir: str = DEFAULT_DATA_DIR, user: str = DEFAULT_USER) -> str:
    """The unit file's text; every path must be absolute (systemd refuses relative ones)."""
    for name, value in (("executable", executable), ("config", config), ("data_dir", data_dir)):
        if not value.startswith("/") or any(c.isspace() for c in value):
            raise ValueError(f"{name} must be an absolute path without spaces, got {value!r}")
    return TEMPLATE.format(executable=executable, config=config, data_dir=data_dir, user=user)
