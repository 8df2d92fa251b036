"""`edgewave match`: the engine alone over a recorded stream."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgewave", description="edgewave engine tools")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("match", help="run the engine over a recorded stream")
    m.add_argument("--query", action="append", required=True)
    m.add_argument("--stream", action="append", required=True)
    args = parser.parse_args(argv)
    print(f"edgewave {args.command}: not yet available", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
