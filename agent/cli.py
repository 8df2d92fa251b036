"""`edgewave-agent`: the gateway agent's command line."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgewave-agent", description="edgewave gateway agent")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the agent")
    run.add_argument("--config", required=True, help="agent YAML config")
    sub.add_parser("status", help="print the running agent's counters").add_argument("--config", required=True)
    sub.add_parser("rollback", help="return to the previously applied config").add_argument("--config", required=True)
    args = parser.parse_args(argv)
    print(f"edgewave-agent {args.command}: not yet available", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
