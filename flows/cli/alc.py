"""``riskgate alc``: the Anonymity Loss Coefficient (the ALC paper), without Prefect.

The same parameter model as the gate's ``measures.alc``, the same scenario construction and the
same attack loop; the command also takes several released tables for one original (the ALC
package's ``anon`` list). ``--config gate.yaml`` takes roles, types and reading options from a
gate config.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from riskcore.errors import ConfigError, InputError

from .common import (
    add_storage_flag,
    alignment_keys,
    common_columns,
    config_subset,
    csv_list,
    progress_bars,
    read_frames,
    result_console,
    storage_options,
    write_json,
)

ALC_SCHEMA = "riskgate.alc/1"
ALC_SET_SCHEMA = "riskgate.alc-set/1"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    c = sub.add_parser("alc", parents=[common],
                       help="Anonymity Loss Coefficient attacks (the ALC paper)",
                       description="Best-row-match attribute inference against a learned "
                       "baseline: precision, recall, PRC and ALC (< 0.5 safe, 0.5-0.75 at risk, "
                       ">= 0.75 serious).")
    c.add_argument("original", help="original table (path or fsspec URL)")
    c.add_argument("released", nargs="+", help="one or more released tables")
    c.add_argument("--config", help="gate YAML: roles, types and reading options")
    c.add_argument("--secret", type=csv_list, help="secret column(s), comma-separated")
    c.add_argument("--known", type=csv_list, help="known columns (default: all others)")
    c.add_argument("--all-secrets", action="store_true", dest="all_secrets",
                   help="every column as the secret, with --known (minus the secret)")
    c.add_argument("--auto-known", action="store_true", dest="auto_known",
                   help="automatic known sets that make most rows distinct (the ALC paper, "
                   "section 6)")
    c.add_argument("--per-secret", type=int, default=None, dest="per_secret",
                   help="--auto-known: known sets per secret (default 5)")
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--mode", choices=["random", "pretargeted"], default="random")
    c.add_argument("--target-query", dest="target_query",
                   help="pretargeted: 'top 1%% income' or \"sex == 'F' and age >= 70\"")
    c.add_argument("--recall", choices=["targeted", "population"], default=None,
                   help="pretargeted recall: eq. 5 (targeted) or eq. 4 (population)")
    c.add_argument("--baseline", choices=["model", "prior"], default=None,
                   help="prior: the prior approach (attack on a swapped non-member set)")
    c.add_argument("--halting", choices=["paper", "package"], default=None)
    c.add_argument("--max-attacks", type=int, default=None, dest="max_attacks")
    c.add_argument("--time-budget", type=float, default=None, dest="time_budget",
                   help="seconds per attack scenario")
    c.add_argument("--household", help="household id column of the original")
    c.add_argument("--alpha", type=float, default=None)
    c.add_argument("--r-min", type=float, default=None, dest="r_min")
    c.add_argument("--json", dest="json_out", help="write the result as JSON ('-' = stdout)")
    add_storage_flag(c)
    c.set_defaults(handler=run)


def _params(args: argparse.Namespace, base: dict[str, Any]) -> Any:
    from riskcore.measures import family

    if args.mode == "pretargeted" and not args.target_query:
        raise ConfigError("--mode pretargeted needs --target-query ('top 1% income' or a "
                          "predicate)")
    kind = "auto" if args.auto_known else "all_secrets" if args.all_secrets else "pairs"
    raw = {"secrets": args.secret, "known": args.known, "scenarios": kind,
           "per_secret": args.per_secret, "max_attacks": args.max_attacks,
           "time_budget": args.time_budget, "halting": args.halting, "alpha": args.alpha,
           "r_min": args.r_min, "recall": args.recall, "baseline": args.baseline,
           "target_query": args.target_query if args.mode == "pretargeted" else None}
    merged = {**((base.get("measures") or {}).get("alc") or {}),
              **{k: v for k, v in raw.items() if v is not None}}
    if kind != "pairs":
        merged["scenarios"] = kind
    return family("alc").parse(merged, "riskgate alc")


def run(args: argparse.Namespace) -> int:
    from riskcore import progress
    from riskcore.gate.cleanliness import validate_tables
    from riskcore.gate.config import tables_config
    from riskcore.gate.encoding import encode_aligned
    from riskcore.gate.outputs import versions
    from riskcore.measures.alc import from_encoded
    from riskcore.measures.alc.scenarios import build_scenarios, run_scenarios, summarize
    from riskcore.measures.alc.targets import select_targets
    from riskcore.results import to_jsonable

    options = storage_options(args)
    base = config_subset(args.config, options)
    names = ["original"] + (["released"] if len(args.released) == 1 else
                            [f"released_{i + 1}" for i in range(len(args.released))])
    urls = dict(zip(names, [args.original, *args.released]))
    frames, infos = read_frames(urls, options, base.get("read"))
    params = _params(args, base)
    if base.get("roles"):
        roles = dict(base["roles"])
        roles.pop("direct_identifiers", None)
    else:
        cols = common_columns([list(map(str, f.columns)) for f in frames.values()])
        secrets = list(params.secrets or [])
        missing = [s for s in secrets if s not in cols]
        if missing:
            raise ConfigError(f"alc: --secret {missing} is not a column of every table "
                              f"(shared columns: {cols})")
        roles = {"quasi_identifiers": [c for c in cols if c not in secrets
                                       and c != args.household],
                 "sensitive": secrets, "household": args.household}
    cfg = tables_config({"released": urls[names[1]], "original": args.original,
                                       "roles": roles, "read": base.get("read") or {},
                                       "limits": base.get("limits") or {},
                                       **alignment_keys(base, roles)},
                       "riskgate alc")
    role_spec = cfg.role_spec
    if params.scenarios == "pairs" and not (params.secrets or role_spec.sensitive):
        raise ConfigError("alc needs --secret COLUMN (or --all-secrets / --auto-known)")
    report = validate_tables(frames, role_spec)
    if not report.success:
        raise InputError("the data is not clean (the gate would reject it):\n  "
                         + "\n  ".join(report.summary_lines()[:20]))
    enc, alignment = encode_aligned(cfg, frames)
    columns = list(role_spec.quasi_identifiers) + list(role_spec.sensitive)
    data = from_encoded([enc[n] for n in names], columns, types=params.types,
                        household=role_spec.household)
    seed = args.seed if args.seed is not None else int(base.get("seed", 0))
    known = list(params.known or role_spec.quasi_identifiers)
    scenarios = build_scenarios(data, params.scenarios, params.secrets or role_spec.sensitive,
                                None if params.scenarios == "auto" and not params.known
                                else known, params.per_secret, seed)
    if not scenarios:
        raise ConfigError("alc: no attack scenario (no known-column set qualifies)")
    targets = select_targets(data, params.target_query) if params.target_query else None
    with progress_bars(), progress.scope("ALC attacks"):
        progress.tick("starting", 0, len(scenarios))
        results = run_scenarios(data, scenarios, params.config(seed),
                                progress=lambda done, total, status: progress.tick(
                                    status, done, total),
                                targets=targets, recall=params.recall,
                                baseline=params.baseline)
    summary = summarize(results)
    target = result_console(args.json_out)
    table = Table(title="Anonymity Loss Coefficient (< 0.5 safe, 0.5-0.75 at risk, "
                  ">= 0.75 serious)")
    for col in ("secret", "known", "ALC", "band", "attack P / R / PRC", "base P / R / PRC",
                "predictions", "halt"):
        table.add_column(col)
    for r in results:
        def pr(p: Any) -> str:
            return "-" if p is None else f"{p.precision:.3f} / {p.recall:.3f} / {p.prc:.3f}"
        table.add_row(r.secret, ",".join(r.known) if len(r.known) <= 4 else
                      f"{len(r.known)} columns", "-" if r.alc is None else f"{r.alc:.4f}",
                      r.band, pr(r.attack), pr(r.base), str(r.n_attacks), r.halt_reason,
                      style="red" if r.band in ("at_risk", "serious") else None)
    target.print(table)
    target.print(f"max ALC {summary.max_alc}; per band {summary.counts}")
    if args.json_out:
        roles_set = set(role_spec.all_columns)
        shown = [{**i.to_dict(), "columns": [c for c in i.columns if c in roles_set]}
                 for i in infos]
        body = results[0].to_dict() if len(results) == 1 else {
            "schema": ALC_SET_SCHEMA, "summary": summary.to_dict(),
            "attacks": [r.to_dict() for r in results]}
        write_json(to_jsonable({**body, "inputs": shown, "column_kinds": dict(data.kinds),
                                "versions": versions()}), args.json_out,
                   schema=str(body["schema"]))
    return 0
