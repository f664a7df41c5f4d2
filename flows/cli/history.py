"""``riskgate history RELEASE_ID --config URL``: a release's past runs, from the output store:
run id, time, verdict, what started it and the report, newest first."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table
from rich.text import Text

from riskcore.gate.history import runs_of
from riskcore.redact import redact_text, visible

from .common import add_storage_flag, out, storage_options
from .trust import public_key


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    h = sub.add_parser("history", parents=[common],
                       help="list a release's past gate runs from the output store",
                       description="Every finished run of RELEASE_ID under the config's "
                       "output_url (<output_url>/<release_id>/<run_id>/decision.json), newest "
                       "first: run id, finish time, verdict, what started it, the report.")
    h.add_argument("release_id")
    h.add_argument("--config", required=True, help="the gate config (its output_url)")
    h.add_argument("--json", action="store_true", help="print the runs as JSON")
    h.add_argument("--public-key", dest="public_key", default=None,
                   help="riskgate-signing.pub: verify each run's signature (else each is "
                   "marked signed (not checked) or unsigned)")
    add_storage_flag(h)
    h.set_defaults(handler=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from riskcore.gate.config import load_config

    options = storage_options(args)
    cfg = load_config(args.config, None, options)
    pem = public_key(args.public_key, options) if args.public_key else None
    runs = runs_of(args.release_id, cfg.output_url,
                   {**options, **cfg.storage.options}, pem)
    # what a decision says is data: shown neutralized (no terminal escape reaches the screen)
    for r in runs:
        for key, value in r.items():
            if not key.startswith("_") and not isinstance(value, bool) and value is not None:
                r[key] = visible(redact_text(str(value)))
    if args.json:
        # the decisions were redacted when written; a presigned report link is meant to be
        # opened (its signature is no credential, and it expires)
        print(json.dumps([{k: v for k, v in r.items() if not k.startswith("_")}
                          for r in runs], indent=2))
        return 0
    if not runs:
        out.print(f"no finished run of {args.release_id} under "
                  f"{redact_text(cfg.output_url)}", markup=False)
        return 0
    if not out.is_terminal:  # a pipe (CI, cron, grep): one full line per run, links whole
        print(f"runs of {args.release_id}, newest first")
        for r in runs:
            print("\t".join((r["run_id"], str(r["finished_at"]), str(r["verdict"]),
                             r["signature"], r["started_by"], r["report"])))
        return 0
    table = Table(title=f"runs of {args.release_id}, newest first", header_style="bold")
    for col in ("run", "finished", "verdict", "signature", "started by", "report"):
        table.add_column(col)
    for r in runs:
        table.add_row(*(Text(str(r[k])) for k in ("run_id", "finished_at", "verdict",
                                                  "signature", "started_by", "report")))
    out.print(table)
    return 0
