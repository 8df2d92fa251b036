"""`edgewave-cloud`: ingest, the Spark job, config push."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edgewave-cloud", description="edgewave cloud tier")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="ingest, Spark job, dashboard").add_argument("--config", required=True)
    push = sub.add_parser("push-config", help="push a signed config document to a gateway")
    push.add_argument("--gateway")
    push.add_argument("--all", action="store_true")
    push.add_argument("file")
    args = parser.parse_args(argv)
    print(f"edgewave-cloud {args.command}: not yet available", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
