"""cloud.yaml: the shipped file loads, defaults work, mistakes are named."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgewave.cloud.settings import CloudSettings, SettingsError, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_shipped_config_loads_with_its_documented_defaults():
    shipped = load_settings(REPO / "configs" / "cloud.yaml")
    defaults = CloudSettings()
    assert shipped.spark.trigger_seconds == defaults.spark.trigger_seconds == 2
    assert shipped.ingest == defaults.ingest and shipped.broker == defaults.broker
    assert shipped.fleet == defaults.fleet
    assert all(entry.key is None for entry in shipped.gateways.values())    # no key inline


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("spark:\n  triger_seconds: 5\n")
    with pytest.raises(SettingsError, match="triger_seconds"):
        load_settings(path)


def test_wrong_type_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("ingest:\n  roll_bytes: lots\n")
    with pytest.raises(SettingsError, match="ingest.roll_bytes"):
        load_settings(path)


@pytest.mark.parametrize("limit, value, reason", [
    ("max_entailed", 0, "every limit must be at least 1"),
    ("max_axioms", 0, "every limit must be at least 1"),
    ("max_depth", 3, "an event nests 4 deep"),
])
def test_event_limits_too_small_for_an_event_with_evidence_are_refused(tmp_path, limit, value, reason):
    path = tmp_path / "c.yaml"
    path.write_text(f"ingest:\n  limits:\n    {limit}: {value}\n")
    with pytest.raises(SettingsError, match=reason):
        load_settings(path)


def test_gateway_keys_from_file_and_environment(tmp_path, monkeypatch):
    (tmp_path / "k").write_text("from-file\n")
    path = tmp_path / "c.yaml"
    path.write_text(f"gateways:\n  a: {{key_file: {tmp_path / 'k'}}}\n  b: {{key_env: EW_TEST_KEY_B}}\n")
    settings = load_settings(path)
    assert settings.gateway_key("a") == "from-file"
    with pytest.raises(SettingsError, match="EW_TEST_KEY_B"):
        settings.gateway_key("b")
    monkeypatch.setenv("EW_TEST_KEY_B", "from-env")
    assert settings.gateway_key("b") == "from-env"
    with pytest.raises(SettingsError, match="no key for gateway 'c'"):
        settings.gateway_key("c")


def run_cli(args, env):
    return subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_spark_without_java_says_what_to_install(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java anywhere
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"landing_zone: {tmp_path / 'lz'}\ndatabase: {tmp_path / 'db'}\n"
                   f"spark: {{checkpoint: {tmp_path / 'ck'}}}\n")
    result = run_cli(["spark", "--config", str(cfg)], env)
    assert result.returncode == 2
    assert "java not found" in result.stderr and "Java 17" in result.stderr


def test_spark_with_old_java_says_so(tmp_path):
    # A JAVA_HOME whose java reports version 11 (as `java -version` does, on stderr).
    bin_dir = tmp_path / "jdk11" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.21" 2023-10-17\' >&2\n')
    (bin_dir / "java").chmod(0o755)
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "jdk11"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"landing_zone: {tmp_path / 'lz'}\ndatabase: {tmp_path / 'db'}\n"
                   f"spark: {{checkpoint: {tmp_path / 'ck'}}}\n")
    result = run_cli(["spark", "--config", str(cfg)], env)
    assert result.returncode == 2
    assert "is Java 11" in result.stderr and "Java 17 or newer" in result.stderr
