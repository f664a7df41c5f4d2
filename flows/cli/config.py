"""``riskgate check-config``: validate a gate config and its policy, read no table."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_storage_flag, out, storage_options


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    c = sub.add_parser("check-config", parents=[common],
                       help="validate a gate config and its policy (no table is read)",
                       description="Load the config and the policy exactly as a gate run does "
                       "and report the first problem with its file and key; exit 0 when both "
                       "are valid, 3 otherwise.")
    c.add_argument("config", help="gate YAML: a path or any fsspec URL")
    add_storage_flag(c)
    c.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from riskcore.gate.config import load_gate

    gate = load_gate(args.config, storage_options=storage_options(args))
    cfg = gate.config
    out.print(f"{gate.source}: valid", markup=False)
    out.print(f"  release {cfg.release_id}: {len(cfg.tables())} table(s), "
              f"{len(gate.measures)} measure famil{'y' if len(gate.measures) == 1 else 'ies'} "
              f"({', '.join(gate.measures)}), {len(gate.policy.checks)} policy check(s)",
              markup=False)
    return 0
