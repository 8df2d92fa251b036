"""`edgewave-sim`: simulated sensor firmware."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgewave-sim", description="edgewave simulated sensors")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="publish simulated observations").add_argument("--config", required=True)
    args = parser.parse_args(argv)
    print(f"edgewave-sim {args.command}: not yet available", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
