"""Agent YAML settings: defaults, validation with the key named, stream mapping rules."""
from __future__ import annotations

from pathlib import Path

import pytest

from edgewave.agent.config import SettingsError, load_settings, settings_from_dict

REPO = Path(__file__).resolve().parents[2]


def test_shipped_example_config_loads():
    settings = load_settings(REPO / "configs" / "agent.yaml")
    assert settings.gateway
    assert settings.outbox.policy in ("drop_oldest", "refuse_newest")
    assert settings.stream_iri("building") == "http://example.org/stream/building"


def test_defaults_work_without_any_settings():
    settings = settings_from_dict({})
    assert settings.local.port == 1883 and settings.cloud.port == 1883
    assert settings.outbox.max_inflight > 0 and settings.input.max_message_bytes > 0


def test_unknown_key_is_named():
    with pytest.raises(SettingsError, match="outbox.polcy"):
        settings_from_dict({"outbox": {"polcy": "drop_oldest"}})


def test_wrong_type_is_named():
    with pytest.raises(SettingsError, match="cloud.port"):
        settings_from_dict({"cloud": {"port": "eighteen"}})
    with pytest.raises(SettingsError, match="outbox.policy"):
        settings_from_dict({"outbox": {"policy": "keep_everything"}})


def test_stream_mapping_explicit_default_and_unknown():
    settings = settings_from_dict({"input": {"streams": {"fire": "http://ex.org/s/fire"},
                                             "default_stream": "urn:stream:{stream}"}})
    assert settings.stream_iri("fire") == "http://ex.org/s/fire"
    assert settings.stream_iri("air") == "urn:stream:air"
    assert settings.knows_stream("<http://ex.org/s/fire>")
    assert settings.knows_stream("<urn:stream:water>")
    assert not settings.knows_stream("<http://other.org/stream>")
    strict = settings_from_dict({"input": {"streams": {"fire": "http://ex.org/s/fire"}, "default_stream": None}})
    assert strict.stream_iri("air") is None
    assert not strict.knows_stream("<urn:stream:air>")


def test_key_from_file(tmp_path):
    key = tmp_path / "gw.key"
    key.write_text("sekrit\n")
    settings = settings_from_dict({"config": {"key_file": str(key)}})
    assert settings.config_key() == b"sekrit"
    with pytest.raises(SettingsError, match="key"):
        settings_from_dict({}).config_key()


def test_session_expiry_defaults_differ_per_broker_and_survive_partial_sections():
    settings = settings_from_dict({"local": {"port": 1884}, "cloud": {"port": 1885}})
    assert settings.local.port == 1884 and settings.local.session_expiry_s == 60
    assert settings.cloud.port == 1885 and settings.cloud.session_expiry_s == 86400
    assert settings_from_dict({"local": {"session_expiry_s": 0}}).local.session_expiry_s == 0
    with pytest.raises(SettingsError, match="cloud.session_expiry_s"):
        settings_from_dict({"cloud": {"session_expiry_s": 0}})
    with pytest.raises(SettingsError, match="local.session_expiry_s"):
        settings_from_dict({"local": {"session_expiry_s": -1}})


def test_unwritten_bound_defaults_and_validation():
    assert settings_from_dict({}).outbox.unwritten_max_bytes == 8 * 1024 * 1024
    assert settings_from_dict({"outbox": {"unwritten_max_bytes": 0}}).outbox.unwritten_max_bytes == 0
    with pytest.raises(SettingsError, match="outbox.unwritten_max_bytes"):
        settings_from_dict({"outbox": {"unwritten_max_bytes": -1}})
