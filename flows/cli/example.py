"""``riskgate example``: the demo's deterministic example data."""

from __future__ import annotations

import argparse
from typing import Any

from .common import out


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    x = sub.add_parser("example", parents=[common],
                       help="write the demo's example data (deterministic)")
    x.add_argument("out_dir", help="folder for original.csv and released.csv")
    x.add_argument("--rows", type=int, default=6000)
    x.add_argument("--seed", type=int, default=2026)
    x.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from riskcore.examples import write_example

    for name, path in write_example(args.out_dir, n=args.rows, seed=args.seed).items():
        out.print(f"{name}: {path}")
    return 0
