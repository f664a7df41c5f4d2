"""``riskgate diff``: a release read against its original (riskcore.anatomy).

Prints what kind of release it is and what was done to each column; ``--json`` writes the
same as JSON (kind, linked_share, rows, columns.<c>.transform / suppressed_share / type,
evidence), ``--links`` a Parquet file with one row per released row, in release order: the
original row it comes from (0-based, null when none) and the link's quality.
"""

from __future__ import annotations

import argparse
from typing import Any

from riskcore.errors import InputError
from riskcore.redact import redact_text

from .common import add_storage_flag, config_subset, out, read_frames, storage_options, write_json


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("diff", parents=[common],
                       help="read a release against its original: its kind, each column's "
                       "transform and reading, and the original row behind each released row",
                       description="Link every released row to the original row it comes "
                       "from (or none), judged against what chance gives (a held-out "
                       "--control, or the original against itself), and say what kind of "
                       "release it is (kept rows, a subsample, new rows, or new rows with some "
                       "of the original's records), what was done to each column (kept, "
                       "generalized, suppressed, perturbed, new, absent, added) and how each "
                       "column reads (a code or a quantity). Exit 0, 3 on bad input.")
    p.add_argument("--original", default=None, help="the original table (path or URL; "
                   "default: the config's)")
    p.add_argument("--released", default=None, help="the release (default: the config's)")
    p.add_argument("--control", default=None, help="a held-out sample of the same people "
                   "(default: the config's, if any)")
    p.add_argument("--config", default=None, help="a gate config: the tables, declared types "
                   "and missing-value markers")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT",
                   help="write the diff as JSON to OUT ('-' for stdout)")
    p.add_argument("--links", default=None, metavar="LINKS.parquet",
                   help="write one row per released row: original_row, quality")
    p.add_argument("--seed", type=int, default=None, help="the seed of chance's sample "
                   "(default: the config's, else 0)")
    add_storage_flag(p)
    p.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from riskcore.anatomy import diff
    from riskcore.roles import ColumnType

    options = storage_options(args)
    base = config_subset(args.config, options)
    urls = {"original": args.original or base.get("original"),
            "released": args.released or base.get("released"),
            "control": args.control or base.get("control")}
    for name in ("original", "released"):
        if not urls[name]:
            raise InputError(f"--{name} is missing: give the {name} table's path or URL (or a "
                             "--config that names it)")
    read = {k: v for k, v in (base.get("read") or {}).items()
            if k in ("format", "encoding", "sep", "na_values")}
    frames, _ = read_frames({k: v for k, v in urls.items() if v}, options, read)
    roles = base.get("roles") or {}
    try:
        types = {str(c): ColumnType(t) for c, t in (roles.get("types") or {}).items()}
    except ValueError as exc:
        raise InputError(f"config roles.types: {exc}") from None
    markers = [str(m) for m in base.get("missing_values") or []]
    seed = args.seed if args.seed is not None else int(base.get("seed") or 0)
    result = diff(frames["original"], frames["released"], frames.get("control"), types=types,
                  markers=markers, seed=seed)
    for line in result.summary():
        out.print(redact_text(line), markup=False, highlight=False, soft_wrap=True)
    for line in result.evidence:
        out.print(redact_text(f"  {line}"), markup=False, highlight=False, soft_wrap=True)
    if args.json_out:
        write_json(result.to_dict(), args.json_out)
    if args.links:
        from riskcore.gate.outputs import parquet_bytes
        from riskcore.storage import write_bytes

        write_bytes(args.links, parquet_bytes(result.links_frame()), options, overwrite=True)
        out.print(f"links written to {redact_text(args.links)}", markup=False)
    return 0
