"""docs/operations.md as written: its cloud.yaml and every provisioning and install command in
its ```sh blocks, in order, with system paths moved under a temporary directory.

What a test cannot do the way an operator does is changed, and only that: `sudo` is dropped
and a real install gets `--root` (no useradd, no systemctl), the broker's port is one where
no broker runs (no Mosquitto is started here: provisioning writes the plugin's file), and
/etc, /var/lib and /tmp paths move under tmp_path."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml
from broker_process import free_port

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs/operations.md"


def _blocks(lang: str) -> list[str]:
    found = re.findall(rf"^( *)```{lang}\n(.*?)^ *```", DOC.read_text(), re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(body) for _, body in found]


def _commands() -> list[str]:
    lines = [line.split("  #")[0].strip() for block in _blocks("sh") for line in block.splitlines()]
    return [line for line in lines if line]


def test_every_shown_command_is_a_provisioning_or_install_command():
    commands = _commands()
    assert commands, "no ```sh block in docs/operations.md"
    for command in commands:
        words = shlex.split(command)
        program = Path(words[1] if words[0] == "sudo" else words[0]).name
        assert program in ("edgewave-cloud", "edgewave-agent"), command


def test_the_documented_steps_run(tmp_path):
    def moved(text: str) -> str:
        return re.sub(r"(?<![\w/.-])/(etc|var/lib|tmp)/", lambda m: f"{tmp_path}/{m.group(1)}/", text)

    settings = yaml.safe_load(moved(_blocks("yaml")[0]))
    settings["broker"]["port"] = free_port()
    import grp
    try:
        grp.getgrnam(settings["fleet"]["broker_group"])
    except KeyError:
        settings["fleet"]["broker_group"] = None          # no mosquitto package here
    settings["database"] = str(tmp_path / "var/lib/edgewave-cloud/cloud.db")
    config = tmp_path / "etc/edgewave/cloud.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump(settings))
    bundles = Path(settings["fleet"]["bundles_dir"])
    bindir = Path(sys.executable).parent
    ran = []
    for command in _commands():
        words = shlex.split(moved(command))
        if words[0] == "sudo":
            words = words[1:]
        program = Path(words[0]).name
        words[0] = str(bindir / program)
        if program == "edgewave-agent" and words[1] == "install":
            if "--root" not in words:
                words += ["--root", str(tmp_path / "gateway")]
            words[words.index("--bundle") + 1] = str(bundles / words[words.index("--bundle") + 1])
        result = subprocess.run(words, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
        ran.append((command, result.stdout))
        if "gateway add gw7" in command:
            assert (bundles / "gw7.tar.gz").stat().st_mode & 0o777 == 0o600
        if "rotate-key" in command:
            assert "verifies until" in result.stdout
    assert (tmp_path / "gateway/etc/edgewave/config.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "gateway/etc/systemd/system/edgewave-agent.service").exists()
    assert (tmp_path / "tmp/gw7-try/etc/edgewave/agent.yaml").exists()
    users = json.loads(Path(settings["fleet"]["dynsec_file"]).read_text())["clients"]
    assert {u["username"] for u in users} == {"edgewave-admin", "edgewave-cloud"}     # gw7 removed last
    assert len(ran) == len(_commands())
