"""MQTT topic names (docs/ARCHITECTURE.md, "MQTT topics")."""
from __future__ import annotations

import pytest

from edgewave.shared import topics


def test_topic_names_match_design():
    assert topics.sensor_topic("fire", "smoke-1") == "ew/in/fire/smoke-1"
    assert topics.events_topic("gw1") == "ew/gw1/events"
    assert topics.status_topic("gw1") == "ew/gw1/status"
    assert topics.config_topic("gw1") == "ew/gw1/config"
    assert topics.config_ack_topic("gw1") == "ew/gw1/config/ack"


def test_parsing_topics_back():
    assert topics.parse_sensor_topic("ew/in/fire/smoke-1") == ("fire", "smoke-1")
    assert topics.gateway_from_topic("ew/gw7/config/ack") == "gw7"
    assert topics.topic_kind("ew/gw7/config/ack") == "config/ack"
    assert topics.topic_kind("ew/gw7/events") == "events"


@pytest.mark.parametrize("bad", ["ew/in/fire", "ew/in//s", "ew/out/fire/s", "x/in/a/b", "ew/in/a/b/c"])
def test_bad_sensor_topics(bad):
    with pytest.raises(topics.TopicError):
        topics.parse_sensor_topic(bad)


@pytest.mark.parametrize("segment", ["", "a/b", "+", "#"])
def test_segments_with_wildcards_are_refused(segment):
    with pytest.raises(topics.TopicError):
        topics.events_topic(segment)
