"""What ships in configs/ and docker/: no anonymous broker, no placeholder secret, and Docker
files that fit the code (checked without a Docker engine, which our machines do not have)."""
from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for d in ("configs", "docker") for p in (REPO / d).rglob("*") if p.is_file())
PLACEHOLDER = re.compile(r"change-?me|changeme|replace-?me|demo-key|test-key|s3cret|secret123|password123|"
                         r"a-long-random-key|allow_anonymous\s+true", re.IGNORECASE)


def _secrets_inline(node: Any, path: str = "") -> list[str]:
    """YAML keys that hold a secret inline (``key``/``password`` with a value; tls.key is a path)."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{path}.{k}" if path else str(k)
            if k in ("key", "password") and v is not None and not path.endswith("tls"):
                found.append(here)
            found += _secrets_inline(v, here)
    return found


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_no_anonymous_broker_and_no_placeholder_secret(path):
    text = path.read_text(errors="replace")
    assert not PLACEHOLDER.search(text), f"{path}: {PLACEHOLDER.search(text).group(0)!r}"
    if path.suffix in (".yaml", ".yml"):
        assert _secrets_inline(yaml.safe_load(text)) == [], path


def _console_scripts() -> set[str]:
    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


def _dockerfiles() -> list[Path]:
    return sorted((REPO / "docker").glob("Dockerfile.*"))


@pytest.mark.parametrize("dockerfile", _dockerfiles(), ids=lambda p: p.name)
def test_dockerfile_copies_what_exists_and_runs_a_console_script(dockerfile):
    text = dockerfile.read_text()
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), f"{dockerfile.name}: COPY {source} does not exist"
    entry = re.search(r'^ENTRYPOINT \["([^"]+)"', text, re.MULTILINE)
    assert entry and entry.group(1) in _console_scripts()
    assert re.search(r"^USER (?!root)\S+", text, re.MULTILINE), "the image must not run as root"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker/compose.yaml").read_text())


def _commands(service: dict[str, Any]) -> list[list[str]]:
    """Every command line a service runs (a `sh -c` script split at &&)."""
    entry = service.get("entrypoint")
    command = service.get("command") or []
    if entry == ["sh", "-c"]:
        return [shlex.split(part) for part in command[0].split("&&")]
    if entry:
        return [list(entry) + list(command)]
    return [list(command)]


def _parses(argv: list[str]) -> None:
    """The real CLI's parser takes the command (argparse exits on an unknown option)."""
    if argv[0] == "edgewave-cloud":
        from edgewave.cloud.cli import build_parser
        build_parser().parse_args(argv[1:])
    elif argv[0] == "edgewave-sim":     # its parser is built inside main(): check the options
        source = (REPO / "firmware-sim/cli.py").read_text()
        for option in (a for a in argv if a.startswith("--")):
            assert f'"{option}"' in source, f"edgewave-sim has no {option}"

def test_compose_services_name_existing_files_and_real_commands():
    compose = _compose()
    scripts = _console_scripts()
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            assert (REPO / "docker" / build["context"] / build["dockerfile"]).is_file(), name
            assert build["dockerfile"].startswith("docker/Dockerfile.")
        else:
            assert service["image"].startswith("eclipse-mosquitto:2") and service.get("user") == "1883:1883", name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (REPO / "docker" / source).exists(), f"{name}: {source}"
        for argv in _commands(service):
            if argv and argv[0].startswith("edgewave"):
                assert argv[0] in scripts, f"{name}: {argv[0]} is not a console script"
                _parses(argv)


def test_compose_brokers_read_the_generated_configuration():
    compose = _compose()["services"]
    cloud_yaml = yaml.safe_load((REPO / "docker/cloud.yaml").read_text())
    cloud_broker = compose["cloud-broker"]["command"]
    assert cloud_broker[:2] == ["mosquitto", "-c"] and cloud_broker[2] == cloud_yaml["fleet"]["broker_conf"]
    provision = " ".join(" ".join(argv) for argv in _commands(compose["provision"]))
    assert "broker-init --config /etc/edgewave/cloud.yaml" in provision
    install = compose["agent-install"]["command"]
    root = install[install.index("--root") + 1]
    assert compose["local-broker"]["command"] == ["mosquitto", "-c", f"{root}/etc/mosquitto/conf.d/edgewave.conf"]
    agent_yaml = yaml.safe_load((REPO / "docker/agent.yaml").read_text())
    assert agent_yaml["config"]["key_file"] == f"{root}/etc/edgewave/config.key"
    assert agent_yaml["cloud"]["tls"]["ca"] == f"{root}/etc/edgewave/ca.crt"
    assert "cloud-broker" in provision.split("--name")[1]        # the certificate names the host agents dial


def test_compose_provisioning_writes_a_broker_config_without_anonymous_access(tmp_path):
    """docker/cloud.yaml's provisioning, run here with its paths moved under tmp_path."""
    from fleet_rig import cloud_cli

    text = (REPO / "docker/cloud.yaml").read_text().replace("/var/lib/edgewave-fleet", str(tmp_path / "fleet")) \
        .replace("/var/lib/edgewave-cloud", str(tmp_path / "cloud")).replace("/mosquitto/data", str(tmp_path / "data"))
    config = tmp_path / "cloud.yaml"
    config.write_text(text)
    cloud_cli("tls-init", "--dir", str(tmp_path / "fleet/tls"), "--name", "cloud-broker")
    cloud_cli("broker-init", "--config", str(config))
    cloud_cli("gateway", "add", "gw1", "--exist-ok", "--config", str(config))
    cloud_cli("gateway", "add", "gw1", "--exist-ok", "--config", str(config))       # run again: no error
    conf = (tmp_path / "fleet/broker/mosquitto.conf").read_text()
    assert "allow_anonymous false" in conf and "listener 8883" in conf and "require_certificate" in conf
    assert (tmp_path / "fleet/bundles/gw1.tar.gz").exists()


def test_the_package_builds_without_warnings_and_ships_the_dashboard_files(tmp_path):
    """What `make setup` builds (pip, setuptools in build isolation): no warning to read past
    before the demo starts, and every template and static file of the dashboard and every mapping
    preset in the wheel."""
    import subprocess
    import sys
    import zipfile

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "warning" not in (built.stdout + built.stderr).lower(), built.stderr[-3000:]
    (wheel,) = tmp_path.glob("edgewave-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    dashboard = REPO / "cloud/dashboard"
    wanted = {f"edgewave/cloud/dashboard/{p.relative_to(dashboard)}" for d in ("templates", "static")
              for p in (dashboard / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert wanted and wanted <= shipped, sorted(wanted - shipped)
    presets = {f"edgewave/agent/mapping/ttl/{p.name}" for p in (REPO / "agent/mapping/ttl").glob("*.ttl")}
    assert len(presets) >= 5 and presets <= shipped, sorted(presets - shipped)     # make-config --mapping NAME
