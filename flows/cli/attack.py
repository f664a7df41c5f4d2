"""``riskgate attack``: singling out, linkability or inference (anonymeter), without Prefect.

The command runs the same family, with the same parameter model, as the gate's
``measures.singling_out`` / ``linkability`` / ``inference``. ``--config gate.yaml`` takes the
roles, types and reading options from a gate config; without it every column the original and
released tables share is an attack column (the secret of an inference is a sensitive column).
"""

from __future__ import annotations

import argparse
from typing import Any

from riskcore.errors import ConfigError

from .common import (
    add_storage_flag,
    alignment_keys,
    common_columns,
    config_subset,
    csv_list,
    prepared_inputs,
    print_results,
    progress_bars,
    read_frames,
    result_console,
    storage_options,
    write_json,
)

ATTACK_SCHEMA = "riskgate.attack/1"
KINDS = {"singling-out": "singling_out", "linkability": "linkability", "inference": "inference"}


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    a = sub.add_parser("attack", parents=[common],
                       help="singling-out, linkability or inference attack (anonymeter)",
                       description="Attack the original through the released table, with a "
                       "random baseline and, given a control table, a control attack.")
    a.add_argument("kind", choices=list(KINDS))
    a.add_argument("original", help="original table (path or fsspec URL)")
    a.add_argument("released", help="released (anonymized or synthetic) table")
    a.add_argument("--control", help="control table: original records not used for the release")
    a.add_argument("--config", help="gate YAML: roles, types and reading options")
    a.add_argument("--n-attacks", type=int, default=None, dest="n_attacks")
    a.add_argument("--seed", type=int, default=None)
    a.add_argument("--columns", type=csv_list, help="singling out: columns (default all)")
    a.add_argument("--n-cols", type=int, default=None, dest="n_cols")
    a.add_argument("--mode", choices=["univariate", "multivariate"], default=None)
    a.add_argument("--aux", type=csv_list, help="linkability: first column set; inference: "
                   "auxiliary columns (default all but the secret)")
    a.add_argument("--aux2", type=csv_list, help="linkability: second column set")
    a.add_argument("--neighbors", type=int, default=None)
    a.add_argument("--secret", help="inference: the secret column")
    a.add_argument("--regression", action="store_true", default=None,
                   help="inference: numeric secret guessed within 5%% instead of exactly")
    a.add_argument("--json", dest="json_out", help="write the result as JSON ('-' = stdout)")
    add_storage_flag(a)
    a.set_defaults(handler=run)


def _params(args: argparse.Namespace, name: str) -> dict[str, Any]:
    if name == "singling_out":
        raw = {"columns": args.columns, "n_attacks": args.n_attacks, "n_cols": args.n_cols,
               "mode": args.mode}
    elif name == "linkability":
        if not args.aux or not args.aux2:
            raise ConfigError("linkability needs --aux A,B and --aux2 C,D (disjoint)")
        raw = {"aux_a": args.aux, "aux_b": args.aux2, "n_attacks": args.n_attacks,
               "n_neighbors": args.neighbors}
    else:
        if not args.secret:
            raise ConfigError("inference needs --secret COLUMN")
        raw = {"secrets": [args.secret], "aux": args.aux, "n_attacks": args.n_attacks,
               "regression": args.regression}
    return {k: v for k, v in raw.items() if v is not None}


def run(args: argparse.Namespace) -> int:
    from riskcore.gate.config import tables_config
    from riskcore.gate.outputs import versions
    from riskcore.measures import family, run_measure
    from riskcore.results import to_jsonable

    name = KINDS[args.kind]
    options = storage_options(args)
    base = config_subset(args.config, options)
    urls = {"original": args.original, "released": args.released}
    if args.control:
        urls["control"] = args.control
    frames = infos = None
    if base.get("roles"):
        roles = dict(base["roles"])
        roles.pop("direct_identifiers", None)
    else:
        frames, infos = read_frames(urls, options, base.get("read"))
        cols = common_columns([list(map(str, f.columns)) for f in frames.values()])
        secret = args.secret if name == "inference" else None
        roles = {"quasi_identifiers": [c for c in cols if c != secret],
                 "sensitive": [secret] if secret else []}
        if secret and secret not in cols:
            missing_in = [t for t, f in frames.items() if secret not in f.columns]
            raise ConfigError(f"inference: --secret '{secret}' is not a column of table(s) "
                              f"{missing_in}")
    cfg = tables_config({**urls, "roles": roles, "read": base.get("read") or {},
                                       "limits": base.get("limits") or {},
                                       **alignment_keys(base, roles),
                                       "seed": args.seed if args.seed is not None
                                       else base.get("seed", 0)}, "riskgate attack")
    fam = family(name)
    params = fam.parse({**((base.get("measures") or {}).get(name) or {}),
                        **_params(args, name)}, "riskgate attack")
    fam.validate_for(params, cfg.role_spec, "riskgate attack")
    inputs, infos = prepared_inputs(cfg, options, frames, infos)
    with progress_bars():
        res = run_measure(name, inputs, params)
    print_results({res.measure: res}, result_console(args.json_out))
    if args.json_out:
        f = res.figures
        write_json(to_jsonable({"schema": ATTACK_SCHEMA, "attack": args.kind,
                                "risk": f.get("risk"),
                                "risk_ci": [f.get("risk_ci_low"), f.get("risk_ci_high")],
                                "result": res.to_dict(), "inputs": [i.to_dict() for i in infos],
                                "versions": versions()}), args.json_out, schema=ATTACK_SCHEMA)
    return 0
