"""``riskgate measure``: the equivalence-class families on one table, without Prefect.

Flags map onto the families' parameter models; ``--config gate.yaml`` takes roles, types,
reading options and measure parameters from a gate config (flags override it). The table goes
through the gate's own steps: read, cleanliness checks, one encoding pass.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from riskcore.errors import ConfigError

from .common import (
    add_storage_flag,
    config_subset,
    console,
    csv_list,
    prepared_inputs,
    print_results,
    progress_bars,
    result_console,
    storage_options,
    write_json,
)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    m = sub.add_parser("measure", parents=[common],
                       help="equivalence-class risk measures on one table",
                       description="k-anonymity, prosecutor/journalist/marketer risk, "
                       "individual/global/household risk (sdcMicro), and optionally "
                       "l-diversity, t-closeness, SUDA2 and population-uniqueness models of one "
                       "table (CSV, Parquet, JSON lines; any fsspec URL).")
    m.add_argument("table", help="path or fsspec URL of the released table")
    m.add_argument("--config", help="gate YAML: roles, types, reading options and measure "
                   "parameters (flags override it)")
    m.add_argument("--qi", type=csv_list, help="quasi-identifier columns, comma-separated")
    m.add_argument("--sensitive", type=csv_list, default=None,
                   help="sensitive columns (l-diversity, t-closeness)")
    m.add_argument("--weight", help="sample weight column (Fk = sum of weights)")
    m.add_argument("--household", help="household id column")
    m.add_argument("--population", help="identification (population) table: Fk from it")
    m.add_argument("--threshold", type=float, default=None,
                   help="risk threshold T for records at risk (default 0.1)")
    m.add_argument("--missing", choices=["own", "wildcard"], default=None,
                   help="missing key values: own value (default) or wildcard (sdcMicro/ARX)")
    m.add_argument("--alpha", type=float, default=None,
                   help="wildcard weight of NA-bearing keys (sdcMicro alpha, default 1)")
    m.add_argument("--ks", type=lambda s: [int(x) for x in csv_list(s)], default=None,
                   help="k levels for violation counts (default 2,3,5,10)")
    m.add_argument("--l-c", type=float, default=None, dest="l_c",
                   help="recursive (c,l)-diversity constant (default 2)")
    m.add_argument("--risk-method", choices=["approx", "exact"], default=None,
                   dest="risk_method", help="individual risk: sdcMicro's approximation "
                   "(default) or the exact series")
    m.add_argument("--max-global-risk", type=float, default=None, dest="max_global_risk",
                   help="target global risk for the threshold rule (default 0.01)")
    m.add_argument("--suda", action="store_true", default=None,
                   help="compute SUDA2 scores and DIS-SUDA over the quasi-identifiers")
    m.add_argument("--suda-max-size", type=int, default=None, dest="suda_max_size",
                   help="largest MSU size searched (default: all)")
    m.add_argument("--suda-ihsn", action="store_true", default=None, dest="suda_ihsn",
                   help="legacy IHSN score weights instead of Elliot's (M-k)!")
    m.add_argument("--dis-fraction", type=float, default=None, dest="dis_fraction",
                   help="DIS-SUDA sampling fraction (default 0.01)")
    m.add_argument("--population-size", default=None, dest="population_size",
                   help="population size N (or USA): Zayatz, Pitman, SNB and Dankar estimates")
    m.add_argument("--encoding", default=None, help="CSV encoding (default utf-8; 'auto')")
    m.add_argument("--json", dest="json_out", help="write all results as JSON to this file "
                   "('-' for standard output)")
    m.add_argument("--release-id", dest="release_id", help="release id recorded in the JSON "
                   "(default: the table's file name)")
    m.add_argument("--per-record", dest="per_record", help="write per-record values (Parquet)")
    add_storage_flag(m)
    m.set_defaults(handler=run)


def _roles(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    roles = dict(base.get("roles") or {})
    if "qi" in roles:
        roles["quasi_identifiers"] = roles.pop("qi")
    for key, flag in (("quasi_identifiers", args.qi), ("sensitive", args.sensitive),
                      ("weight", args.weight), ("household", args.household)):
        if flag is not None:
            roles[key] = flag
    roles.pop("direct_identifiers", None)  # a single released table: nothing to compare
    if not roles.get("quasi_identifiers"):
        raise ConfigError("name the quasi-identifiers with --qi A,B,C (or roles: in --config)")
    return roles


def plan(args: argparse.Namespace, base: dict[str, Any], roles: Any) -> dict[str, Any]:
    """Which families run, with what parameters (the families' own models)."""
    from riskcore.measures import family

    configured = dict(base.get("measures") or {})
    flags: dict[str, dict[str, Any]] = {
        "k_anonymity": {"ks": args.ks},
        "reid": {"threshold": args.threshold},
        "sdc": {"method": args.risk_method, "max_global_risk": args.max_global_risk},
        "l_diversity": {"c": args.l_c},
        "t_closeness": {},
        "suda": {"max_msu_size": args.suda_max_size,
                 "original_scores": False if args.suda_ihsn else None,
                 "dis_fraction": args.dis_fraction},
        "population": {"population_size": args.population_size},
    }
    wanted = ["k_anonymity", "reid", "sdc"]
    if roles.sensitive:
        wanted += ["l_diversity", "t_closeness"]
    if args.suda or "suda" in configured:
        wanted.append("suda")
    if args.population_size is not None or "population" in configured:
        wanted.append("population")
    out = {}
    role_spec = roles.to_roles()
    for name in wanted:
        raw = {**(configured.get(name) or {}),
               **{k: v for k, v in flags[name].items() if v is not None}}
        fam = family(name)
        params = fam.parse(raw, "riskgate measure")
        fam.validate_for(params, role_spec, "riskgate measure")
        out[name] = params
    return out


def run(args: argparse.Namespace) -> int:
    from riskcore.gate.config import tables_config
    from riskcore.gate.outputs import MEASURES_SCHEMA, per_record_parquet, versions
    from riskcore.measures import run_measure
    from riskcore.results import to_jsonable

    options = storage_options(args)
    base = config_subset(args.config, options)
    read = dict(base.get("read") or {})
    if args.encoding:
        read["encoding"] = args.encoding
    cfg = tables_config({
        "released": args.table, "identification": args.population,
        "roles": _roles(args, base), "read": read, "limits": base.get("limits") or {},
        "missing": args.missing or base.get("missing", "own"),
        "alpha": args.alpha if args.alpha is not None else base.get("alpha", 1.0),
        "seed": base.get("seed", 0)}, "riskgate measure")
    todo = plan(args, base, cfg.roles)
    timings: dict[str, float] = {}
    with console.status("reading and checking the table..."):
        t0 = time.perf_counter()
        inputs, infos = prepared_inputs(cfg, options)
        timings["load_validate_encode"] = time.perf_counter() - t0
    results = {}
    with progress_bars():
        for name, params in todo.items():
            t0 = time.perf_counter()
            results[name] = run_measure(name, inputs, params)
            timings[name] = time.perf_counter() - t0
    print_results(results, result_console(args.json_out))
    if args.json_out:
        write_json(to_jsonable({
            "schema": MEASURES_SCHEMA,
            "release_id": args.release_id or Path(args.table).stem,
            "flow_run_id": None, "inputs": [i.to_dict() for i in infos],
            "measures": [r.to_dict() for r in results.values()], "errors": {},
            "versions": versions()}), args.json_out, schema=MEASURES_SCHEMA)
    if args.per_record:
        Path(args.per_record).write_bytes(per_record_parquet(results, inputs.released.n))
        console.print(f"per-record values written to {args.per_record}")
    return 0
