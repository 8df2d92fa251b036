"""MQTT topic names (docs/ARCHITECTURE.md, "MQTT topics"), as functions, so no component spells a topic by hand."""
from __future__ import annotations

SENSOR_PREFIX = "ew/in"

# Subscriptions.
ALL_SENSOR_INPUT = "ew/in/#"
ALL_EVENTS = "ew/+/events"
ALL_STATUS = "ew/+/status"
ALL_CONFIG_ACKS = "ew/+/config/ack"


class TopicError(ValueError):
    """A topic that does not have the shape docs/ARCHITECTURE.md gives it."""


def _check_segment(kind: str, value: str) -> str:
    if not value or any(ch in value for ch in "/+#\x00"):
        raise TopicError(f"invalid {kind} {value!r}: must be non-empty without '/', '+', '#'")
    return value


def sensor_topic(stream: str, sensor: str) -> str:
    """Where a sensor publishes its observations on the gateway's local broker."""
    return f"{SENSOR_PREFIX}/{_check_segment('stream', stream)}/{_check_segment('sensor', sensor)}"


def events_topic(gateway: str) -> str:
    return f"ew/{_check_segment('gateway', gateway)}/events"


def status_topic(gateway: str) -> str:
    return f"ew/{_check_segment('gateway', gateway)}/status"


def landed_topic(gateway: str) -> str:
    """Where ingest tells a gateway which of its uplink messages are landed (shared/landed_acks.py).

    Cloud to gateway, QoS 1, not retained; only that gateway may read it (its ACL), only the
    cloud's users may write it. ``ew/+/events`` does not match it, so ingest never reads its own
    acknowledgements."""
    return f"ew/{_check_segment('gateway', gateway)}/events/landed"


def config_topic(gateway: str) -> str:
    return f"ew/{_check_segment('gateway', gateway)}/config"


def config_ack_topic(gateway: str) -> str:
    return f"ew/{_check_segment('gateway', gateway)}/config/ack"


def parse_sensor_topic(topic: str) -> tuple[str, str]:
    """(stream, sensor) of an ``ew/in/<stream>/<sensor>`` topic."""
    parts = topic.split("/")
    if len(parts) != 4 or parts[0] != "ew" or parts[1] != "in" or not parts[2] or not parts[3]:
        raise TopicError(f"not a sensor topic: {topic!r} (expected ew/in/<stream>/<sensor>)")
    return parts[2], parts[3]


def gateway_from_topic(topic: str) -> str:
    """The gateway id of any ``ew/<gateway>/...`` cloud topic."""
    parts = topic.split("/")
    if len(parts) < 3 or parts[0] != "ew" or parts[1] in ("", "in"):
        raise TopicError(f"not a gateway topic: {topic!r}")
    return parts[1]


def topic_kind(topic: str) -> str:
    """'events', 'events/landed', 'status', 'config' or 'config/ack' for a gateway topic."""
    gateway_from_topic(topic)
    kind = topic.split("/", 2)[2]
    if kind not in ("events", "events/landed", "status", "config", "config/ack"):
        raise TopicError(f"unknown gateway topic kind in {topic!r}")
    return kind
