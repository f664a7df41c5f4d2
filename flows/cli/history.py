"""``riskgate history RELEASE_ID --config URL``: a release's past runs, from the output store
(issue 28, item 12): run id, time, verdict, what started it and the report, newest first."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from riskcore.errors import InputError, StorageError
from riskcore.gate.trigger import RELEASE_ID_PATTERN
from riskcore.redact import redact_text

from .common import add_storage_flag, out, storage_options


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    h = sub.add_parser("history", parents=[common],
                       help="list a release's past gate runs from the output store",
                       description="Every finished run of RELEASE_ID under the config's "
                       "output_url (<output_url>/<release_id>/<run_id>/decision.json), newest "
                       "first: run id, finish time, verdict, what started it, the report.")
    h.add_argument("release_id")
    h.add_argument("--config", required=True, help="the gate config (its output_url)")
    h.add_argument("--json", action="store_true", help="print the runs as JSON")
    add_storage_flag(h)
    h.set_defaults(handler=cmd_history)


def runs_of(release_id: str, output_url: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished runs of a release in the output store, newest first."""
    import re

    from riskcore.storage import filesystem, join_url, presign

    if not re.match(RELEASE_ID_PATTERN, release_id):
        raise InputError(f"release id '{release_id[:80]}' is not a valid release id")
    folder = join_url(output_url, release_id)
    fs, path = filesystem(folder, options)
    try:
        found = fs.glob(f"{path.rstrip('/')}/*/decision.json") if fs.exists(path) else []
    except Exception as exc:
        raise StorageError(f"cannot list '{redact_text(folder)}': "
                           f"{redact_text(str(exc))[:200]}") from None
    runs = []
    for key in found:
        try:
            with fs.open(key, "rb") as fh:
                doc = json.loads(fh.read(64 << 20))
        except (OSError, ValueError):
            continue  # a decision that cannot be read is not a run to list
        run_id = str(doc.get("flow_run_id") or key.rsplit("/", 2)[-2])
        report = join_url(folder, run_id, "report.html")
        trigger = doc.get("trigger") or {}
        runs.append({
            "run_id": run_id, "finished_at": doc.get("finished_at"),
            "verdict": doc.get("verdict"),
            "started_by": (f"event {trigger.get('event_id')}" if trigger.get("event_id")
                           else (doc.get("provenance") or {}).get("config", {}).get("source")
                           or "unknown"),
            "signed": bool(doc.get("signed")),
            "report": presign(report, options, 7 * 24 * 3600) or report})
    return sorted(runs, key=lambda r: str(r["finished_at"] or ""), reverse=True)


def cmd_history(args: argparse.Namespace) -> int:
    from riskcore.gate.config import load_config

    options = storage_options(args)
    cfg = load_config(args.config, None, options)
    runs = runs_of(args.release_id, cfg.output_url,
                   {**options, **cfg.storage.options})
    if args.json:
        # the decisions were redacted when written; a presigned report link is meant to be
        # opened (its signature is no credential, and it expires)
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        out.print(f"no finished run of {args.release_id} under "
                  f"{redact_text(cfg.output_url)}", markup=False)
        return 0
    table = Table(title=f"runs of {args.release_id}, newest first", header_style="bold")
    for col in ("run", "finished", "verdict", "started by", "report"):
        table.add_column(col)
    for r in runs:
        table.add_row(r["run_id"], str(r["finished_at"]), str(r["verdict"]), r["started_by"],
                      r["report"])
    out.print(table)
    return 0
