"""The cloud tier's settings: configs/cloud.yaml with working defaults.

Every option is documented in configs/cloud.yaml and docs/cloud.md. Relative
paths are taken relative to the directory the command runs in. Unknown keys
and wrong types are a ``SettingsError`` naming the file and the key
(``edgewave.shared.settings``), so a typo does not silently fall back to a
default. ``broker`` has the shape every tier shares (``edgewave.shared.broker``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from edgewave.shared.broker import BrokerSettings, TlsSettings
from edgewave.shared.events import EventLimits
from edgewave.shared.settings import SettingsError, bind, load_yaml, setting

__all__ = ["BrokerSettings", "CloudSettings", "DashboardSettings", "FleetSettings", "GatewaySettings",
           "IngestSettings", "LiveFeedSettings", "NotificationRule", "NotificationSettings", "NotificationTarget",
           "PushSettings", "SettingsError", "SparkSettings", "TlsSettings", "load_settings"]


@dataclass
class IngestSettings:
    """How ingest takes events off the broker and into the landing zone."""

    client_id: str = "edgewave-cloud-ingest"
    workers: int = setting(1, minimum=1, maximum=64)   # ingest processes `run` starts; each takes a share of the events
    share_group: str = "edgewave-ingest"   # the MQTT 5 shared-subscription group the workers form
    retire_idle_s: float = 5.0         # a worker taken out of service ends its session after this long idle
    session_expiry_s: int = 7 * 24 * 3600
    receive_maximum: int = 1000
    commit_max_messages: int = 500
    commit_interval_ms: int = 50
    roll_bytes: int = setting(16 * 1024 * 1024, minimum=1024)
    roll_seconds: float = 2.0
    limits: EventLimits = field(default_factory=EventLimits)
    rejected_keep_bytes: int = setting(64 * 1024, minimum=0)


@dataclass
class SparkSettings:
    """The Structured Streaming job over the landing zone."""

    master: str = "local[*]"
    input: str | None = None
    app_name: str = "edgewave-cloud"
    trigger_seconds: float = 2.0
    checkpoint: str = "var/cloud/checkpoint"
    history: str = "var/cloud/history"
    dedup_horizon: str = "15 minutes"
    max_files_per_trigger: int = 1000
    shuffle_partitions: int = 4
    log_level: str = "WARN"
    ui: bool = False
    conf: dict[str, str] = field(default_factory=lambda: {"spark.driver.memory": "1g"})


@dataclass
class LiveFeedSettings:
    """The newest events, written by ingest as it lands them, for the dashboard's live view."""

    path: str | None = None        # default: live.db beside the database
    max_rows: int = setting(10_000, minimum=1)


@dataclass
class PushSettings:
    """How push-config waits for a gateway's answer."""

    ack_timeout_s: float = 30.0


@dataclass
class GatewaySettings:
    """One gateway's signing key: inline, from a file, or from an environment variable."""

    key: str | None = None
    key_file: str | None = None
    key_env: str | None = None


@dataclass
class FleetSettings:
    """Provisioning (`edgewave-cloud gateway add/remove/rotate-key`, `broker-init`): the cloud
    broker's dynamic-security file and plugin, its admin user, and what goes into a gateway's
    bundle."""

    secrets_dir: str = "var/cloud/secrets"           # 0700; per gateway: config.key, broker password (0600)
    bundles_dir: str = "var/cloud/bundles"           # <gateway>.tar.gz, mode 0600: carry it to the gateway
    dynsec_file: str = "var/cloud/broker/dynamic-security.json"   # the plugin's file (the broker rewrites it)
    dynsec_plugin: str = "auto"                      # path of mosquitto_dynamic_security.so; auto: look here
    admin_user: str = "edgewave-admin"               # changes users and roles on the running broker
    broker_group: str | None = None                  # group the broker runs as: the file 0660, its dir 0770
    broker_conf: str = "var/cloud/broker/mosquitto.conf"   # written by broker-init
    broker_pid_file: str | None = None               # the broker's pid_file (broker-init writes it in)
    cloud_user: str = "edgewave-cloud"               # the broker user of ingest, push-config, dashboard
    public_host: str | None = None                   # the cloud broker as gateways reach it (default broker.host)
    public_port: int = 8883                          # its TLS listener
    tls_ca: str | None = None                        # CA certificate gateways verify the broker with (bundled)
    tls_cert: str | None = None                      # the broker's certificate and key (broker-init)
    tls_key: str | None = None
    tls_ca_key: str | None = None                    # with it, `gateway add --client-cert` issues client certs
    require_client_certificate: bool = False         # mutual TLS on the gateways' listener
    plain_listener: str | None = "127.0.0.1:1883"    # host:port without TLS for the cloud's own services; null: none
    persistence_location: str | None = None          # the broker's persistence directory (broker-init)
    # Settings of the password-file setup that dynamic security replaced: accepted so that an
    # existing cloud.yaml loads; broker-init warns while they are set.
    password_file: str | None = None
    acl_file: str | None = None
    broker_reload_command: str | None = None
    key_overlap_s: float = 7 * 86400.0               # rotate-key: how long the old signing key still verifies

    def gateway_dir(self, gateway: str) -> Path:
        """The gateway's secrets: ``config.key`` (what the cloud signs with) and ``broker.password``."""
        return Path(self.secrets_dir) / "gateways" / gateway

    def key_path(self, gateway: str) -> Path:
        return self.gateway_dir(gateway) / "config.key"


DASHBOARD_ROLES = ("viewer", "operator")


@dataclass
class DashboardSettings:
    """The operator dashboard (cloud/dashboard/): where it listens, who may log in, when a gateway
    counts as offline. ``users`` maps a login name to ``{role, password_hash}`` (argon2; see
    ``edgewave-cloud add-user``)."""

    host: str = "127.0.0.1"
    port: int = 8090
    users: dict[str, Any] = field(default_factory=dict)
    secret_key_file: str = "var/cloud/dashboard-secret"
    offline_after_s: float = 90.0
    lagging_after_s: float = 300.0
    secure_cookies: bool = False
    session_max_age_s: int = 8 * 3600
    login_failures_per_user: int = 5
    login_failures_per_address: int = 20
    login_window_s: float = 900.0
    trusted_proxies: str | None = None
    query_timeout_s: float = 5.0
    state_db: str | None = None        # the dashboard's own SQLite (alarms); default: dashboard.db beside the database
    alarm_keys: dict[str, Any] = field(default_factory=dict)   # pattern -> the variables that tell its alarms apart
    metrics_token_file: str | None = None   # a bearer token for /metrics scrapers; None: a session is needed
    public_url: str | None = None      # how people reach the dashboard (links in notifications); default http://host:port

    def __post_init__(self) -> None:
        self.users = {str(name): entry for name, entry in (self.users or {}).items()}
        for name, entry in self.users.items():
            where = f"dashboard.users.{name}"
            if not isinstance(entry, dict):
                raise SettingsError(f"{where} must be a mapping with role and password_hash")
            unknown = sorted(set(entry) - {"role", "password_hash"})
            if unknown:
                raise SettingsError(f"unknown key(s) in {where}: {', '.join(unknown)} (known: password_hash, role)")
            if entry.get("role") not in DASHBOARD_ROLES:
                raise SettingsError(f"{where}.role must be one of {', '.join(DASHBOARD_ROLES)}, "
                                    f"got {entry.get('role')!r}")
            if not str(entry.get("password_hash") or "").startswith("$argon2"):
                raise SettingsError(f"{where}.password_hash must be an argon2 hash "
                                    f"(make one with: edgewave-cloud add-user {name} --role {entry['role']})")
        if not 0 < self.port < 65536:
            raise SettingsError(f"dashboard.port must be 1..65535, got {self.port}")
        if self.offline_after_s <= 0 or self.lagging_after_s <= 0 or self.login_window_s <= 0:
            raise SettingsError("dashboard.offline_after_s, lagging_after_s and login_window_s must be positive")
        if self.login_failures_per_user < 1 or self.login_failures_per_address < 1:
            raise SettingsError("dashboard.login_failures_per_user and login_failures_per_address must be at least 1")
        for pattern, variables in (self.alarm_keys or {}).items():
            if not isinstance(variables, list) or not all(isinstance(v, str) and v for v in variables):
                raise SettingsError(f"dashboard.alarm_keys.{pattern} must be a list of variable names "
                                    f"(without '?'), e.g. [room]; [] for one alarm per gateway and pattern")
        self.alarm_keys = {str(p): [v.lstrip("?$") for v in vs] for p, vs in (self.alarm_keys or {}).items()}
        if self.public_url is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", self.public_url):
            raise SettingsError(f"dashboard.public_url must be an http:// or https:// URL, got {self.public_url!r}")

    @property
    def base_url(self) -> str:
        """Where an alarm link in a notification points: ``public_url``, else the listen address."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


TARGET_KINDS = ("email", "webhook", "mqtt")
SMTP_TLS = ("starttls", "implicit", "none")


@dataclass
class NotificationTarget:
    """Where a notification goes: an inbox (SMTP), a URL (signed JSON POST) or a topic on the cloud broker.

    Secrets are named by file (``password_file``, ``secret_file``), read when the dashboard starts, so
    cloud.yaml can be shown and versioned without them."""

    kind: str = setting("email", choices=TARGET_KINDS)
    # email
    host: str | None = None
    port: int | None = None            # default 587 (starttls), 465 (implicit), 25 (none)
    tls: str = setting("starttls", choices=SMTP_TLS, why="plain SMTP only when said explicitly, for a local relay")
    ca_file: str | None = None         # CAs the SMTP or https server is verified with (default: the system's)
    user: str | None = None
    password_file: str | None = None
    sender: str | None = None          # the From: address
    to: list[str] = field(default_factory=list)
    # webhook
    url: str | None = None
    secret_file: str | None = None     # the HMAC-SHA256 key the body is signed with
    # mqtt: the cloud's broker user may publish under edgewave/alarms/ on a broker broker-init set up
    topic: str = "edgewave/alarms"
    qos: int = setting(1, choices=(0, 1, 2))
    # every kind
    timeout_s: float = setting(10.0, minimum=0.1, maximum=300)
    max_attempts: int = setting(5, minimum=1, maximum=100)
    retry_initial_s: float = setting(2.0, minimum=0.01)
    retry_max_s: float = setting(300.0, minimum=0.01)

    def check(self, name: str) -> None:
        where = f"notifications.targets.{name}"
        needed = {"email": ("host", "sender", "to"), "webhook": ("url", "secret_file"), "mqtt": ("topic",)}[self.kind]
        if self.kind == "mqtt" and self.topic.startswith("ew/"):
            raise SettingsError("topic must not be under ew/: those are the gateways' topics (ingest would read "
                                "a notification on ew/<name>/events as a gateway's event)", key=where)
        missing = [key for key in needed if not getattr(self, key)]
        if missing:
            raise SettingsError(f"a {self.kind} target needs {', '.join(missing)}", key=where)
        if self.kind == "email":
            if self.tls == "none" and (self.user or self.password_file):
                raise SettingsError("tls: none sends in plain text: no user or password over it (a local relay "
                                    "that needs no login only)", key=where)
            if bool(self.user) != bool(self.password_file):
                raise SettingsError("user and password_file go together", key=where)
        if self.kind == "webhook" and not re.fullmatch(r"https?://\S+", self.url or ""):
            raise SettingsError(f"url must be an http:// or https:// URL, got {self.url!r}", key=where)
        if self.kind == "mqtt" and any(c in self.topic for c in "+#"):
            raise SettingsError("topic must be a topic name, without wildcards", key=where)

    @property
    def smtp_port(self) -> int:
        return self.port or {"starttls": 587, "implicit": 465, "none": 25}[self.tls]


@dataclass
class NotificationRule:
    """Which alarms notify which targets. An empty list selects every gateway, pattern or severity."""

    name: str = "rule"
    gateways: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    severities: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    remind_after_s: float | None = setting(None, minimum=1)   # again, once, if still unacknowledged


@dataclass
class NotificationSettings:
    """Alarms sent to people who are not looking at the dashboard (cloud/dashboard/notify.py)."""

    targets: dict[str, NotificationTarget] = field(default_factory=dict)
    rules: list[NotificationRule] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)   # pattern -> severity; else its ew:severity, "alarm"
    max_per_key: int = setting(3, minimum=1)                 # messages per alarm key and target ...
    per_key_window_s: float = setting(3600.0, minimum=1)     # ... within this long; the rest is suppressed
    keep_days: float = setting(30.0, minimum=1)              # delivered and failed notifications kept this long

    def __post_init__(self) -> None:
        for name, target in self.targets.items():
            target.check(name)
        names = [rule.name for rule in self.rules]
        for i, rule in enumerate(self.rules):
            if names.count(rule.name) > 1:
                raise SettingsError(f"rule name {rule.name!r} is used twice", key=f"notifications.rules[{i}].name")
            if not rule.targets:
                raise SettingsError("a rule needs at least one target", key=f"notifications.rules[{i}].targets")
            unknown = [t for t in rule.targets if t not in self.targets]
            if unknown:
                raise SettingsError(f"no target {', '.join(map(repr, unknown))} in notifications.targets",
                                    key=f"notifications.rules[{i}].targets")

    def severity_of(self, pattern: str) -> str:
        return self.severity.get(pattern, "alarm")


@dataclass
class CloudSettings:
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    landing_zone: str = "var/cloud/landing"
    database: str = "var/cloud/cloud.db"
    ingest: IngestSettings = field(default_factory=IngestSettings)
    live_feed: LiveFeedSettings = field(default_factory=LiveFeedSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    push: PushSettings = field(default_factory=PushSettings)
    gateways: dict[str, GatewaySettings] = field(default_factory=dict)
    dashboard: DashboardSettings = field(default_factory=DashboardSettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)

    @property
    def live_feed_path(self) -> Path:
        """The live feed's SQLite file (beside the database unless ``live_feed.path`` says otherwise)."""
        return Path(self.live_feed.path) if self.live_feed.path else Path(self.database).parent / "live.db"

    @property
    def dashboard_state_path(self) -> Path:
        """The dashboard's own SQLite file (alarms), beside the database unless ``dashboard.state_db`` says otherwise."""
        d = self.dashboard
        return Path(d.state_db) if d.state_db else Path(self.database).parent / "dashboard.db"

    @property
    def events_dir(self) -> Path:
        """Closed event files, the Spark job's input."""
        return Path(self.landing_zone) / "events"

    @property
    def rejected_dir(self) -> Path:
        """Payloads ingest could not accept, kept for an operator to inspect."""
        return Path(self.landing_zone) / "rejected"

    def gateway_key(self, gateway: str) -> str:
        """The HMAC key config documents for ``gateway`` are signed with."""
        entry = self.gateways.get(gateway)
        if entry is None and self.fleet.key_path(gateway).is_file():
            entry = GatewaySettings(key_file=str(self.fleet.key_path(gateway)))   # provisioned: gateway add
        if entry is None:
            raise SettingsError(f"no key for gateway {gateway!r}: add gateways.{gateway}.key to cloud.yaml")
        if entry.key:
            return entry.key
        if entry.key_file:
            key = Path(entry.key_file).read_text().strip()
            if key:
                return key
            raise SettingsError(f"gateways.{gateway}.key_file {entry.key_file} is empty")
        if entry.key_env:
            key = os.environ.get(entry.key_env, "")
            if key:
                return key
            raise SettingsError(f"gateways.{gateway}.key_env: environment variable {entry.key_env} is not set")
        raise SettingsError(f"gateways.{gateway} has none of key, key_file, key_env")


def load_settings(path: str | Path | None, *, read_secrets: bool = True) -> CloudSettings:
    """Read cloud.yaml; ``None`` gives the defaults. ``read_secrets=False`` leaves
    ``broker.password_file`` unread (broker-init creates it)."""
    if path is None:
        return CloudSettings()
    return load_yaml(path, lambda data: _checked(bind(CloudSettings, data), read_secrets))


def _checked(settings: CloudSettings, read_secrets: bool) -> CloudSettings:
    """What one key alone cannot say: limits that depend on each other, secrets that must be readable."""
    if settings.broker.password_file and read_secrets:
        try:
            settings.broker.password = settings.broker.secret()
        except OSError as exc:
            raise SettingsError(f"cannot read {settings.broker.password_file}: {exc}", key="broker.password_file") \
                from exc
    if settings.spark.trigger_seconds <= 0:
        raise SettingsError("spark.trigger_seconds must be positive")
    limits = settings.ingest.limits
    if min(getattr(limits, f.name) for f in fields(limits)) < 1:
        raise SettingsError("ingest.limits: every limit must be at least 1")
    if limits.max_depth < 4:
        raise SettingsError("ingest.limits.max_depth must be at least 4: an event nests 4 deep (entailed axioms)")
    if settings.fleet.admin_user == settings.fleet.cloud_user:
        raise SettingsError("fleet.admin_user and fleet.cloud_user must be different users")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", settings.ingest.share_group):
        raise SettingsError("ingest.share_group: letters, digits, '_', '.', '-' only (no '/', '+', '#')")
    return settings
