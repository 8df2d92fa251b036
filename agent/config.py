"""The agent's YAML settings: every option, its default, and why it exists.

One dataclass per YAML section. ``load_settings(path)`` reads the file, fills in the
defaults documented here (and in ``configs/agent.yaml``), and rejects unknown keys and
wrong types with a ``SettingsError`` naming the file and the offending key
(``edgewave.shared.settings``), so a typo in a gateway's config fails at start-up rather
than silently falling back to a default. The two broker sections have the shape every
tier shares (``edgewave.shared.broker``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgewave.shared.broker import BrokerSettings, ReconnectSettings, SessionBrokerSettings, TlsSettings
from edgewave.shared.events import MATCH_CONTENT, MATCH_FULL, EventLimits
from edgewave.shared.ntriples import MAX_QUOTED_DEPTH
from edgewave.shared.settings import NOT_A_KEY, SettingsError, bind, load_yaml, setting

__all__ = ["AgentSettings", "BrokerSettings", "ConfigSettings", "EngineSettings", "InputSettings",
           "OutboxSettings", "ReconnectSettings", "SessionBrokerSettings", "SettingsError", "SignificanceSettings",
           "StateSettings", "StatusSettings", "TlsSettings", "UplinkBatchSettings", "UplinkSettings", "load_settings",
           "settings_from_dict"]

DEFAULT_STREAM_TEMPLATE = "http://example.org/stream/{stream}"
_SEGMENT = re.compile(r"^[A-Za-z0-9_.\-]+\Z")


@dataclass
class InputSettings:
    """Sensor input on the local broker (``ew/in/<stream>/<sensor>``)."""

    qos: int = setting(1, choices=(0, 1, 2))
    max_message_bytes: int = 16384   # larger messages are counted as oversized and dropped
    # Quoted triples (<< s p o >>) nested in one statement; deeper: quoted_too_deep. An annotated
    # observation nests 1 or 2; the N-Triples parser never goes beyond 64 (MAX_QUOTED_DEPTH).
    max_quoted_depth: int = setting(8, minimum=0, maximum=MAX_QUOTED_DEPTH, why="the parser's own limit")
    # Statements in one message; more: too_many_triples. An observation is 5-10; 16 kB of
    # realistic statements (about 120 bytes each) holds some 140.
    max_triples_per_message: int = 256
    queue_max: int = 20000           # messages queued behind other work; beyond: QoS 0 ones dropped, counted
    # Stream segment of the topic -> stream IRI the patterns name (without angle brackets).
    streams: dict[str, str] = field(default_factory=dict)
    # Rule for segments not in ``streams``; ``{stream}`` is the segment. null: such
    # messages are "unknown stream" and dropped.
    default_stream: str | None = DEFAULT_STREAM_TEMPLATE


@dataclass
class SignificanceSettings:
    """Defaults of the significance filter; config documents override them per property."""

    enabled: bool = True
    deadband_absolute: float | None = None  # forward when |value - last forwarded| >= this
    deadband_relative: float | None = None  # ... or when |change| / |last forwarded| >= this
    max_silence_s: float | None = 300.0     # forward at least this often while values arrive
    max_rate_per_s: float | None = 1.0      # at most this many significant events per sensor


@dataclass
class OutboxSettings:
    """Store-and-forward of uplink events (SQLite, WAL)."""

    path: str = "outbox.db"          # relative to data_dir
    max_bytes: int = 64 * 1024 * 1024
    max_age_s: float = 7 * 86400     # older events are dropped (counted)
    policy: str = setting("drop_oldest", choices=("drop_oldest", "refuse_newest"))   # when max_bytes is reached
    max_inflight: int = 100          # messages published, not yet acknowledged by the broker (PUBACK)
    max_rate_per_s: float = 1000.0   # publish pacing; replay after an outage obeys it
    resend_after_s: float = 10.0     # unacknowledged after a reconnect: publish again
    synchronous: str = "NORMAL"      # SQLite synchronous; FULL survives power loss too
    # Events the disk refused, kept in memory meanwhile; 0: dropped at once.
    unwritten_max_bytes: int = setting(8 * 1024 * 1024, minimum=0)
    # A sensor message that made no match waits this long, unacknowledged, for others to share
    # its commit (its journal row, its significant observations); a match never waits. Every
    # commit appends its pages to the WAL whole: fewer commits, fewer bytes on the card. At
    # most 16 messages wait (below Mosquitto's 20 in flight). 0: every such message commits alone.
    group_commit_s: float = setting(5.0, minimum=0.0, maximum=10.0,
                                    why="the messages waiting stay unacknowledged with the local broker")
    # The WAL is copied into the outbox file at most this often (or every 1,000 commits): a
    # copy rewrites the pages that changed since, about the same pages after 300 s as after
    # 900 s (the journal's, bounded by the longest window), so a rarer copy writes less. The
    # WAL holds what was committed since, and a restart after a crash reads it: nothing is
    # lost either way.
    checkpoint_interval_s: float = setting(900.0, minimum=1.0, maximum=3600.0)


_CLOUD_LIMITS = EventLimits()   # what the cloud's ingest takes by default (cloud.yaml ingest.limits)


@dataclass
class UplinkBatchSettings:
    """Several outbox events in one MQTT message (shared/uplink_batch.py): compressed, their
    repeated IRIs written once. Each event keeps its own outbox row, deleted once the
    message that carried it is landed."""

    enabled: bool = True              # false: one JSON event per message
    # At most this many events a message; the cloud refuses more than its max_batch_events.
    max_events: int = setting(100, minimum=1, maximum=_CLOUD_LIMITS.max_batch_events,
                              why="the cloud's default ingest.limits.max_batch_events")
    # The events' JSON bytes in one message, before compression (one larger event goes alone).
    # Half the cloud's max_batch_bytes: compressed, a batch is a fraction of this.
    max_bytes: int = setting(262144, minimum=1024, maximum=_CLOUD_LIMITS.max_batch_bytes // 2,
                             why="half the cloud's default ingest.limits.max_batch_bytes")
    # How long a significant observation may wait for others to share its message. A match
    # never waits: it goes at once and takes the waiting observations with it.
    linger_ms: float = setting(2000.0, minimum=0)


LANDED_AUTO, LANDED_REQUIRED, LANDED_OFF = "auto", "required", "off"


@dataclass
class UplinkLandedSettings:
    """End-to-end acknowledgement (shared/landed_acks.py): an event leaves the outbox once
    ingest says it landed it, not when the cloud broker's PUBACK came."""

    # auto: end to end, unless the cloud has never acknowledged and older_cloud_after_s passed
    # (a cloud from before landed acknowledgements): then deleted on PUBACK, with a warning in
    # the status, until the first acknowledgement arrives. required: never on PUBACK alone.
    # off: on PUBACK (a cloud broker restart or crash can lose what it had not saved).
    mode: str = setting(LANDED_AUTO, choices=(LANDED_AUTO, LANDED_REQUIRED, LANDED_OFF))
    # Sent (PUBACK in) and not landed this long: sent again, from the oldest such event on;
    # the wait doubles while nothing lands, up to max_resend_after_s. After every reconnect to
    # the cloud broker they are sent again at once.
    resend_after_s: float = setting(15.0, minimum=0.1)
    max_resend_after_s: float = setting(300.0, minimum=0.1)
    # Events sent and not yet landed, at most; beyond, publishing waits for acknowledgements
    # (the rest stays in the outbox, not in the broker's queues).
    max_unlanded: int = setting(5000, minimum=1)
    # auto: how long events may wait for a first acknowledgement from a cloud that has never
    # sent one before the agent takes it for an older cloud.
    older_cloud_after_s: float = setting(300.0, minimum=1.0)


@dataclass
class UplinkSettings:
    """What goes up to the cloud and in what form."""

    batch: UplinkBatchSettings = field(default_factory=UplinkBatchSettings)
    landed: UplinkLandedSettings = field(default_factory=UplinkLandedSettings)
    # A match's contributing triples and entailment evidence: full (the dashboard's evidence
    # view shows them) or none (bindings and window only).
    match_content: str = setting(MATCH_FULL, choices=MATCH_CONTENT)
    # A significant observation carries sensor, property, result and time; this adds its
    # N-Triples statements (the dashboard reads none of them).
    significant_triples: bool = False


@dataclass
class StatusSettings:
    """Health reporting: retained status on the cloud broker, local state file."""

    interval_s: float = 30.0          # status message with counters every N seconds
    # The outbox's age limit, the retries of events the disk refused (and of the agent's files at
    # start-up), every N seconds.
    local_interval_s: float = setting(2.0, minimum=0.05)
    state_file: str = "status.json"   # relative to data_dir
    # The state file (what `edgewave-agent status` prints) is rewritten only when something in it
    # changed, and then at most this often; at once on a config change, at start and at a stop,
    # and when `edgewave-agent status` asks the running agent for it (SIGUSR1). On an SD card
    # every rewrite is a new 4 kB block and a journal commit: every 2 s it was 7 MB an hour, most
    # of what an idle gateway wrote. 0: every local_interval_s when something changed.
    state_file_interval_s: float = setting(60.0, minimum=0.0, maximum=86400.0)


@dataclass
class ConfigSettings:
    """Reconfiguration by signed documents pushed on ``ew/<gateway>/config``."""

    key: str | None = None            # HMAC key shared with the cloud for this gateway
    key_file: str | None = None       # ... or a file holding it (preferred: keeps it out of YAML)
    # Key rotation (edgewave-cloud gateway rotate-key): the cloud's next key. Until the agent
    # first applies a document signed with it, or until key_overlap_until (ISO 8601 UTC)
    # passes, documents signed with either key verify; after that only this one (keyring.py).
    next_key_file: str | None = None
    key_overlap_until: str | None = None
    store: str = "configs.db"         # applied documents, relative to data_dir
    keep: int = 5                     # applied documents kept for rollback
    bootstrap: str | None = None      # local TriG document used until the cloud sends one
    # Limits on what the cloud pushes, checked before any parser runs (json.loads, rdflib).
    # rdflib holds about 3 kB per triple while parsing and makes at most two triples per
    # term, so the terms bound its memory; nesting bounds its recursion (~7 frames a level).
    max_envelope_bytes: int = 1024 * 1024   # the whole MQTT payload: JSON escapes can double a document
    max_document_bytes: int = 256 * 1024    # the TriG/Turtle document (the demo's is 50 kB)
    max_document_nesting: int = 32          # [ ( << { open at once outside strings (the demo's: 2)
    max_document_terms: int = 20000         # names, literals, IRIs, [ ( << (the demo's: 1,500)


@dataclass
class StateSettings:
    """Durable windows (window_journal.py): what entered the engine survives a crash."""

    # Journal each sensor message the engine takes, with the events it made, in the outbox's
    # file, and replay it at start. false: windows start empty after every restart.
    durable_windows: bool = True
    # The journal holds the longest window's worth of messages; beyond this many payload
    # bytes the oldest go first (counted as state_truncated).
    max_bytes: int = setting(32 * 1024 * 1024, minimum=0)


@dataclass
class EngineSettings:
    entailment: bool = True           # RDFS entailment through the epsilon-network


@dataclass
class AgentSettings:
    """All of the agent's settings (configs/agent.yaml)."""

    gateway: str = "gw1"
    data_dir: str = "var/edgewave-agent"
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0     # on SIGTERM: how long to wait for PUBACKs
    # Session expiry. Cloud: a config pushed meanwhile is delivered on reconnect; must be > 0.
    # Local: QoS 1 sensor messages delivered but not yet handled, or published while the agent
    # is down, are delivered (again) when it comes back; 0 there means a clean session. A
    # minute covers a crash and systemd's restart, and bounds how stale the messages the
    # broker kept may be (they are timestamped when they arrive). Default client ids:
    # edgewave-<gateway>-local / -cloud.
    local: SessionBrokerSettings = field(default_factory=lambda: SessionBrokerSettings(session_expiry_s=60))
    cloud: SessionBrokerSettings = field(default_factory=SessionBrokerSettings)
    reconnect: ReconnectSettings = field(default_factory=ReconnectSettings)
    input: InputSettings = field(default_factory=InputSettings)
    significance: SignificanceSettings = field(default_factory=SignificanceSettings)
    outbox: OutboxSettings = field(default_factory=OutboxSettings)
    uplink: UplinkSettings = field(default_factory=UplinkSettings)
    status: StatusSettings = field(default_factory=StatusSettings)
    config: ConfigSettings = field(default_factory=ConfigSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    state: StateSettings = field(default_factory=StateSettings)
    source: str | None = field(default=None, metadata=NOT_A_KEY)   # the YAML file these came from

    def data_path(self, name: str) -> Path:
        """A file inside data_dir (absolute names are kept as they are)."""
        path = Path(name)
        return path if path.is_absolute() else Path(self.data_dir) / path

    def config_key(self) -> bytes:
        """The gateway's config-signing key; an error when none is configured."""
        if self.config.key_file:
            return Path(self.config.key_file).read_text().strip().encode()
        if self.config.key:
            return self.config.key.encode()
        raise SettingsError("config.key or config.key_file is required to verify config documents")

    def stream_iri(self, segment: str) -> str | None:
        """The stream IRI (bare, no brackets) of a topic's stream segment, None if unknown."""
        if segment in self.input.streams:
            return self.input.streams[segment]
        if self.input.default_stream and _SEGMENT.match(segment):
            return self.input.default_stream.format(stream=segment)
        return None

    def knows_stream(self, iri: str) -> bool:
        """True when sensor input can reach stream ``iri`` (explicit map or default rule)."""
        iri = iri[1:-1] if iri.startswith("<") else iri
        if iri in self.input.streams.values():
            return True
        template = self.input.default_stream
        if not template or "{stream}" not in template:
            return False
        head, tail = template.split("{stream}", 1)
        if not (iri.startswith(head) and iri.endswith(tail)):
            return False
        segment = iri[len(head):len(iri) - len(tail)] if tail else iri[len(head):]
        return bool(_SEGMENT.match(segment))


def settings_from_dict(data: dict[str, Any] | None) -> AgentSettings:
    """Settings from an already-parsed YAML mapping, validated."""
    settings = bind(AgentSettings, data)
    for segment in settings.input.streams:
        if not _SEGMENT.match(segment):
            raise SettingsError(f"input.streams: invalid stream segment {segment!r}")
    if settings.input.default_stream and "{stream}" not in settings.input.default_stream:
        raise SettingsError("input.default_stream must contain {stream}")
    if settings.outbox.max_inflight < 1 or settings.outbox.max_rate_per_s <= 0:
        raise SettingsError("outbox.max_inflight and outbox.max_rate_per_s must be positive")
    if settings.cloud.session_expiry_s <= 0:
        raise SettingsError("cloud.session_expiry_s must be positive: the cloud session must outlive an outage")
    if settings.input.max_message_bytes < 1 or settings.input.max_triples_per_message < 1:
        raise SettingsError("input.max_message_bytes and input.max_triples_per_message must be positive")
    c = settings.config
    if min(c.max_envelope_bytes, c.max_document_bytes, c.max_document_nesting, c.max_document_terms) < 1:
        raise SettingsError("config.max_envelope_bytes, max_document_bytes, max_document_nesting and "
                            "max_document_terms must be positive")
    if c.max_envelope_bytes < c.max_document_bytes:
        raise SettingsError(f"config.max_envelope_bytes ({c.max_envelope_bytes}) must be at least "
                            f"config.max_document_bytes ({c.max_document_bytes}): the envelope carries the document")
    if settings.reconnect.min_delay_s <= 0 or settings.reconnect.max_delay_s < settings.reconnect.min_delay_s:
        raise SettingsError("reconnect: need 0 < min_delay_s <= max_delay_s")
    return settings


def load_settings(path: str | os.PathLike[str]) -> AgentSettings:
    """Read and validate the agent's YAML file. Relative paths are relative to the working directory."""
    settings = load_yaml(path, lambda data: settings_from_dict(data or {}))
    settings.source = str(path)
    return settings
