"""Installing the agent extra into an empty virtualenv must not pull pyspark (gateways are small)."""
from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_agent_extra_installs_without_pyspark(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"{REPO}[agent]"], check=True,
                   capture_output=True, text=True, timeout=600)
    listing = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], check=True,
                             capture_output=True, text=True).stdout.lower()
    names = {line.split("==")[0] for line in listing.splitlines()}
    assert "edgewave" in names and "paho-mqtt" in names and "rdflib" in names
    assert "pyspark" not in names and "py4j" not in names, listing
    # The agent's entry points work in that light install.
    for script in ("edgewave-agent", "edgewave"):
        out = subprocess.run([str(env_dir / "bin" / script), "--help"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    check = subprocess.run([str(py), "-c", "import edgewave.agent.engine, edgewave.shared.events"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_console_scripts_answer_help():
    bindir = Path(sys.executable).parent
    for script in ("edgewave", "edgewave-agent", "edgewave-sim", "edgewave-cloud"):
        out = subprocess.run([str(bindir / script), "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{script}: {out.stderr}"
        assert "usage" in out.stdout.lower()
