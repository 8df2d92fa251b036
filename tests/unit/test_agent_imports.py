"""The agent stays light: running it never imports pyspark or cloud code."""
from __future__ import annotations

import subprocess
import sys


def test_agent_runtime_does_not_import_spark_or_cloud():
    code = ("import sys, edgewave.agent.cli, edgewave.agent.runtime; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark' or m.startswith('edgewave.cloud')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
