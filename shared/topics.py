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


MAX_FILTER_LENGTH = 1024          # far beyond any real device's topic; MQTT allows 65,535 bytes


def check_topic_filter(text: str) -> str:
    """``text`` if it is an MQTT topic filter a gateway may subscribe to for sensor payloads.

    The MQTT 5 rules ('#' only as the whole last level, '+' only as a whole level, no NUL,
    not empty), and two of ours: no '$' topics (the broker's own), and nothing that could
    match a topic of ``ew/in/#`` (N-Triples input, which needs no mapping)."""
    if not isinstance(text, str) or not text or len(text.encode("utf-8", "surrogatepass")) > MAX_FILTER_LENGTH:
        raise TopicError(f"topic filter must be 1 to {MAX_FILTER_LENGTH} bytes, got {text!r:.80}")
    if "\x00" in text:
        raise TopicError(f"topic filter {text!r:.80} holds a NUL character")
    levels = text.split("/")
    for number, level in enumerate(levels, 1):
        if "#" in level and (level != "#" or number != len(levels)):
            raise TopicError(f"topic filter {text!r}: '#' must be a whole level, the last one")
        if "+" in level and level != "+":
            raise TopicError(f"topic filter {text!r}: '+' must be a whole level")
    if text.startswith("$"):
        raise TopicError(f"topic filter {text!r}: '$' topics are the broker's own")
    if filters_overlap(text, ALL_SENSOR_INPUT):
        raise TopicError(f"topic filter {text!r} can match {ALL_SENSOR_INPUT}, the N-Triples input, "
                         "which needs no mapping")
    return text


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Whether ``topic`` (no wildcards) is one the filter subscribes to."""
    return filters_overlap(topic_filter, topic)


def filters_overlap(first: str, second: str) -> bool:
    """Whether some topic matches both filters (a topic is a filter without wildcards).

    A message on such a topic would reach a client once per matching subscription, so a
    gateway's mappings must not overlap: each message has one mapping."""
    a, b = first.split("/"), second.split("/")
    for index in range(max(len(a), len(b))):
        x = a[index] if index < len(a) else None
        y = b[index] if index < len(b) else None
        if x == "#" or y == "#":
            # '#' also matches the parent level: "a/#" matches "a"
            return True
        if x is None or y is None:
            return False
        if x != y and x != "+" and y != "+":
            return False
    return True


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
