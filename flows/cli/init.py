"""``riskgate init``: a first gate config and policy from the tables (riskcore.gate.init)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from riskcore.errors import InputError
from riskcore.redact import redact_text

from .common import add_storage_flag, out, read_frames, storage_options


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("init", parents=[common],
                       help="write a first gate config and policy from the tables",
                       description="Read the original and the release (and a held-out "
                       "control), decide the kind of release (rows kept from the original, "
                       "a subsample, or new rows), propose roles, types, missing-value "
                       "markers, the families that fit and a policy with the reason for each "
                       "threshold, and write OUT/gate.yaml and OUT/policy.yaml (never over "
                       "existing files). It runs no gate: it prints the command that does.")
    p.add_argument("--original", required=True, help="the original table: a path or URL")
    p.add_argument("--released", required=True, help="the release: a path or URL")
    p.add_argument("--control", default=None, help="a held-out sample of the population "
                   "(never used to train or anonymize): the yardstick of chance")
    p.add_argument("--identification", default=None, help="a population table (journalist "
                   "risk)")
    p.add_argument("--out", default=".", help="folder for gate.yaml and policy.yaml "
                   "(default: here)")
    add_storage_flag(p)
    p.set_defaults(handler=cmd_init)


def _location(url: str) -> str:
    """A table's location as the config records it: local paths made absolute."""
    return url if "://" in url else os.path.abspath(url)


def cmd_init(args: argparse.Namespace) -> int:
    # imported here: the release's anatomy brings pandas, which every other command would load
    from riskcore.anatomy import KIND_WORDS
    from riskcore.gate.init import (
        config_text,
        hierarchy_files,
        policy_text,
        profile,
        propose,
    )

    folder = Path(args.out)
    targets = [folder / "gate.yaml", folder / "policy.yaml"]
    existing = [str(t) for t in targets if t.exists() or t.is_symlink()]
    if existing:
        raise InputError(f"{', '.join(existing)} exist already; riskgate init never writes "
                         "over a config: choose another --out folder or move them away")
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out '{folder}' is a file; give a folder")
    urls = {"original": args.original, "released": args.released, "control": args.control,
            "identification": args.identification}
    options = storage_options(args)
    frames, _ = read_frames({k: v for k, v in urls.items()
                             if v and k in ("original", "released", "control")}, options)
    prof = profile(frames["original"], frames["released"], frames.get("control"))
    prop = propose(prof)
    located = {k: _location(v) if v else None for k, v in urls.items()}
    config = config_text(prof, prop, located)
    policy = policy_text(prof, prop, bool(args.control))
    extra = {folder / name: text for name, text in hierarchy_files(prop).items()}
    taken = [str(t) for t in extra if t.exists() or t.is_symlink()]
    if taken:
        raise InputError(f"{', '.join(taken)} exist already; riskgate init never writes over "
                         "a file: choose another --out folder or move them away")
    folder.mkdir(parents=True, exist_ok=True)
    for target, text in [*zip(targets, (config, policy)), *extra.items()]:
        with open(target, "x", encoding="utf-8") as fh:  # never over a file made meanwhile
            fh.write(text)
    out.print(f"the release holds {KIND_WORDS[prof.kind]}:", markup=False, soft_wrap=True)
    for line in prof.evidence:
        out.print(f"  {redact_text(line)}", markup=False, soft_wrap=True)
    out.print(f"quasi-identifiers: {', '.join(prop.quasi_identifiers) or '(none)'}",
              markup=False, soft_wrap=True)
    out.print(f"sensitive: {', '.join(prop.sensitive) or '(none)'}", markup=False,
              soft_wrap=True)
    if prop.direct_identifiers:
        out.print(f"direct identifiers: {', '.join(prop.direct_identifiers)}", markup=False,
                  soft_wrap=True)
    markers = list(prof.markers) + [f"{c}: {', '.join(m)}"
                                    for c, m in prof.per_column_markers.items()]
    if markers:
        out.print(f"missing-value markers: {'; '.join(markers)}", markup=False, soft_wrap=True)
    for warning in prop.warnings:
        out.print(f"warning: {warning}", markup=False, soft_wrap=True)
    wrote = ", ".join(str(t) for t in [*targets, *extra])
    out.print(f"wrote {wrote}; every choice is a line to edit", markup=False, soft_wrap=True)
    out.print(f"next: riskgate gate --config {targets[0]}", markup=False, soft_wrap=True)
    return 0
