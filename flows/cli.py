"""The ``riskgate`` command line.

    riskgate measure TABLE --qi A,B,C [--sensitive S] [--weight W] [--household H]
                     [--population TABLE] [--suda] [--population-size N] ...
    riskgate attack singling-out|linkability|inference ORIGINAL RELEASED [--control C] ...
    riskgate alc ORIGINAL RELEASED [RELEASED2 ...] --secret S [--known A,B] [--all-secrets]
                 [--auto-known] [--mode pretargeted --target-query EXPR] [--json OUT]
    riskgate gate --config gate.yaml [--dask-address tcp://host:8786 | --dask-local N]
    riskgate report RUN_DIR [--report-detail full] [--json]
    riskgate screenshot REPORT|RUN_DIR [--out report.png]
    riskgate serve [--cron "0 2 * * *"]
    riskgate emit-anonymized --release ID --config URL [--original URL] [--released URL]
    riskgate example OUT_DIR

Exit codes of ``gate``: 0 approved, 1 rejected, 2 needs review, 3 error (also for bad input).
Prefect is imported only by the commands that orchestrate (gate, serve, emit-anonymized).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from riskcore.errors import RiskgateError

console = Console(stderr=True)
out = Console()

EXIT_ERROR = 3


def _write_json(doc: Any, target: str) -> None:
    """Write a JSON document to a file, or to stdout for '-'."""
    text = json.dumps(doc, indent=2, sort_keys=True)
    if target == "-":
        print(text)
    else:
        Path(target).write_text(text, encoding="utf-8")


def _csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@contextmanager
def progress_bars() -> Iterator[None]:
    """Rich progress bars (count, elapsed, ETA) for every label riskcore ticks under.

    Drawn on stderr and only on a terminal; pipelines see nothing of them.
    """
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from riskcore import progress

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        ids: dict[str, Any] = {}

        def on_tick(label: str, step: str, done: int, total: int | None) -> None:
            if label not in ids:
                ids[label] = bar.add_task(label, total=total)
            bar.update(ids[label], completed=done, total=total, description=f"{label}: {step}")

        with progress.listen(on_tick):
            yield


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="riskgate",
        description="Measure re-identification risk of released tables and gate their release.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    m = sub.add_parser("measure", help="equivalence-class risk measures on one table",
                       description="k-anonymity, prosecutor/journalist/marketer risk, "
                       "individual/global/household risk (sdcMicro), and optionally l-diversity, "
                       "t-closeness, SUDA2 and population-uniqueness models of one table (CSV, "
                       "Parquet, JSON lines; any fsspec URL).")
    m.add_argument("table", help="path or fsspec URL of the released table")
    m.add_argument("--config", help="YAML file with the same settings (flags override it)")
    m.add_argument("--qi", type=_csv_list, help="quasi-identifier columns, comma-separated")
    m.add_argument("--sensitive", type=_csv_list, default=None,
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
    m.add_argument("--ks", type=lambda s: [int(x) for x in _csv_list(s)], default=None,
                   help="k levels for violation counts (default 2,3,5,10)")
    m.add_argument("--l-c", type=float, default=None, dest="l_c",
                   help="recursive (c,l)-diversity constant (default 2)")
    m.add_argument("--risk-method", choices=["approx", "exact"], default=None, dest="risk_method",
                   help="individual risk: sdcMicro's approximation (default) or the exact series")
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

    a = sub.add_parser("attack", help="singling-out, linkability or inference attack (seed 002)",
                       description="Attack the original through the released table, with a "
                       "random baseline and, given a control table, a control attack.")
    a.add_argument("kind", choices=["singling-out", "linkability", "inference"])
    a.add_argument("original", help="original table (path or fsspec URL)")
    a.add_argument("released", help="released (anonymized or synthetic) table")
    a.add_argument("--control", help="control table: original records not used for the release")
    a.add_argument("--n-attacks", type=int, default=500, dest="n_attacks")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--columns", type=_csv_list, help="singling out: columns (default all)")
    a.add_argument("--n-cols", type=int, default=3, dest="n_cols")
    a.add_argument("--mode", choices=["univariate", "multivariate"], default="multivariate")
    a.add_argument("--aux", type=_csv_list, help="linkability: first column set; inference: "
                   "auxiliary columns (default all but the secret)")
    a.add_argument("--aux2", type=_csv_list, help="linkability: second column set")
    a.add_argument("--neighbors", type=int, default=1)
    a.add_argument("--secret", help="inference: the secret column")
    a.add_argument("--regression", action="store_true",
                   help="inference: numeric secret guessed within 5%% instead of exactly")
    a.add_argument("--json", dest="json_out", help="write the result as JSON ('-' = stdout)")

    c = sub.add_parser("alc", help="Anonymity Loss Coefficient attacks (seed 004)",
                       description="Best-row-match attribute inference against a learned "
                       "baseline: precision, recall, PRC and ALC (< 0.5 safe, 0.5-0.75 at risk, "
                       ">= 0.75 serious).")
    c.add_argument("original", help="original table (path or fsspec URL)")
    c.add_argument("released", nargs="+", help="one or more released tables")
    c.add_argument("--secret", type=_csv_list, help="secret column(s), comma-separated")
    c.add_argument("--known", type=_csv_list, help="known columns (default: all others)")
    c.add_argument("--all-secrets", action="store_true", dest="all_secrets",
                   help="every column as the secret, with --known (minus the secret)")
    c.add_argument("--auto-known", action="store_true", dest="auto_known",
                   help="automatic known sets that make most rows distinct (seed 004 §6)")
    c.add_argument("--per-secret", type=int, default=5, dest="per_secret",
                   help="--auto-known: known sets per secret (default 5)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--mode", choices=["random", "pretargeted"], default="random")
    c.add_argument("--target-query", dest="target_query",
                   help="pretargeted: 'top 1%% income' or \"sex == 'F' and age >= 70\"")
    c.add_argument("--recall", choices=["targeted", "population"], default="targeted",
                   help="pretargeted recall: eq. 5 (targeted) or eq. 4 (population)")
    c.add_argument("--baseline", choices=["model", "prior"], default="model",
                   help="prior: the prior approach (attack on a swapped non-member set)")
    c.add_argument("--halting", choices=["paper", "package"], default="paper")
    c.add_argument("--max-attacks", type=int, default=5000, dest="max_attacks")
    c.add_argument("--time-budget", type=float, default=None, dest="time_budget",
                   help="seconds per attack scenario")
    c.add_argument("--household", help="household id column of the original")
    c.add_argument("--alpha", type=float, default=3.0)
    c.add_argument("--r-min", type=float, default=1e-4, dest="r_min")
    c.add_argument("--json", dest="json_out", help="write the result as JSON ('-' = stdout)")

    g = sub.add_parser("gate", help="run the release gate (Prefect flow) on a gate config",
                       description="Run the release gate locally: Prefect's ephemeral API, no "
                       "server needed. Exit code 0 approved, 1 rejected, 2 needs review, "
                       "3 error.")
    g.add_argument("--config", required=True, help="gate YAML file (see examples/gate.yaml)")
    g.add_argument("--dask-address", help="run the measure tasks on this Dask scheduler")
    g.add_argument("--dask-local", type=int, metavar="N",
                   help="start a local Dask cluster with N workers for the measure tasks")
    g.add_argument("--report-detail", choices=["summary", "full"], default=None,
                   dest="report_detail", help="'full' adds the quasi-identifier values of the "
                   "riskiest records to the report, labelled as examples (overrides the config)")
    g.add_argument("--json", action="store_true", help="print the outcome as JSON")
    g.add_argument("--verbose", action="store_true", help="show Prefect's run log on the console")

    r = sub.add_parser("report", help="re-render report.html from a run folder's JSON outputs")
    r.add_argument("run_dir", help="folder holding decision.json (local path or fsspec URL)")
    r.add_argument("--out", help="where to write the HTML (default RUN_DIR/report.rerendered.html)")
    r.add_argument("--report-detail", choices=["summary", "full"], default=None,
                   dest="report_detail", help="'full' shows the example values the run "
                   "recorded (quasi-identifiers only); default: the run's own setting")
    r.add_argument("--json", action="store_true", help="print where the report went as JSON")

    sc = sub.add_parser("screenshot", help="open a report in headless Chromium: check it and "
                        "save a PNG", description="Load report.html in headless Chromium "
                        "(Debian's chromium), check that the verdict is visible, every plot has "
                        "a size and the console has no error, and save a screenshot. Exit 1 if "
                        "a reader would see a problem.")
    sc.add_argument("report", help="a report.html, a run folder, or a release folder (its "
                    "latest run)")
    sc.add_argument("--out", default="report.png", help="PNG file (default report.png)")
    sc.add_argument("--width", type=int, default=1280, help="viewport width in CSS pixels")
    sc.add_argument("--max-height", type=int, default=None, dest="max_height",
                    help="crop the full-page screenshot to this many pixels")
    sc.add_argument("--json", action="store_true", help="print what the browser saw as JSON")
    s = sub.add_parser("serve", help="serve the gate's deployments (schedule + event trigger)")
    s.add_argument("--config", required=True,
                   help="default gate config (path or URL) for scheduled runs")
    s.add_argument("--cron", default="0 2 * * *", help="schedule of the nightly re-check")
    s.add_argument("--limit", type=int, default=5, help="gate runs at once (seed 001: 5)")

    e = sub.add_parser("emit-anonymized",
                       help="emit riskgate.anonymization.completed (triggers a gate run)")
    e.add_argument("--release", required=True, help="release id")
    e.add_argument("--config", required=True, help="gate config URL the run starts from")
    e.add_argument("--original", help="URL of the original table (overrides the config)")
    e.add_argument("--released", "--url", dest="released",
                   help="URL of the released table (overrides the config)")
    e.add_argument("--output", help="output URL (overrides the config)")

    x = sub.add_parser("example", help="write the demo's example data (deterministic)")
    x.add_argument("out_dir", help="folder for original.csv and released.csv")
    x.add_argument("--rows", type=int, default=6000)
    x.add_argument("--seed", type=int, default=2026)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"measure": cmd_measure, "attack": cmd_attack, "alc": cmd_alc, "gate": cmd_gate,
                "report": cmd_report, "screenshot": cmd_screenshot, "serve": cmd_serve,
                "emit-anonymized": cmd_emit,
                "example": cmd_example}[args.command](args)
    except RiskgateError as exc:
        console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}")
        return EXIT_ERROR


# ---------------------------------------------------------------- measure
def _measure_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if args.config:
        import yaml

        settings = yaml.safe_load(Path(args.config).read_text(encoding="utf-8")) or {}
    for key in ("qi", "sensitive", "weight", "household", "population", "threshold", "missing",
                "alpha", "ks", "l_c", "encoding", "risk_method", "max_global_risk", "suda",
                "suda_max_size", "suda_ihsn", "dis_fraction", "population_size"):
        value = getattr(args, key)
        if value is not None:
            settings[key] = value
    return settings


def cmd_measure(args: argparse.Namespace) -> int:
    from riskcore import Roles, encode_tables, progress
    from riskcore.errors import ConfigError
    from riskcore.gate import per_record_parquet, versions
    from riskcore.measures import MeasureInputs, run_measure
    from riskcore.results import to_jsonable
    from riskcore.tableio import coerce_types, read_table

    st = _measure_settings(args)
    if not st.get("qi"):
        raise ConfigError("name the quasi-identifiers with --qi A,B,C (or 'qi:' in --config)")
    roles = Roles.from_mapping({"qi": st["qi"], "sensitive": st.get("sensitive") or (),
                                "weight": st.get("weight"), "household": st.get("household")})
    timings: dict[str, float] = {}
    with console.status("reading tables...") as status:
        t0 = time.perf_counter()
        frames, infos = {}, []
        for name, url in (("released", args.table), ("identification", st.get("population"))):
            if not url:
                continue
            status.update(f"reading {name}: {url}")
            df, info = read_table(url, name=name, encoding=st.get("encoding", "utf-8"))
            frames[name] = coerce_types(df, roles.types, name)
            infos.append(info)
        timings["load"] = time.perf_counter() - t0
        status.update("encoding...")
        t0 = time.perf_counter()
        required = {"released": list(roles.measured_columns),
                    "identification": list(roles.quasi_identifiers)}
        enc = encode_tables(frames, roles, required=required)
        timings["encode"] = time.perf_counter() - t0
        inputs = MeasureInputs(released=enc["released"], identification=enc.get("identification"),
                               missing=st.get("missing", "own"),
                               alpha=float(st.get("alpha", 1.0)))
        plan: dict[str, dict[str, Any]] = {
            "k_anonymity": {"ks": st.get("ks", (2, 3, 5, 10))},
            "reid": {"threshold": float(st.get("threshold", 0.1))},
            "sdc": {k: v for k, v in (("method", st.get("risk_method")),
                                      ("max_global_risk", st.get("max_global_risk")))
                    if v is not None},
        }
        if roles.sensitive:
            plan["l_diversity"] = {"c": float(st.get("l_c", 2.0))}
            plan["t_closeness"] = {}
        if st.get("suda"):
            plan["suda"] = {k: v for k, v in (
                ("max_msu_size", st.get("suda_max_size")),
                ("original_scores", False if st.get("suda_ihsn") else None),
                ("dis_fraction", st.get("dis_fraction"))) if v is not None}
        if st.get("population_size") is not None:
            plan["population"] = {"population_size": st["population_size"]}
    results = {}
    with progress_bars():
        for i, (name, params) in enumerate(plan.items()):
            with progress.scope("measures"):
                progress.tick(name, i, len(plan))
            t0 = time.perf_counter()
            results[name] = run_measure(name, inputs, params)
            timings[name] = time.perf_counter() - t0

    _print_results(results, console if args.json_out == "-" else out)
    if args.json_out:
        doc = to_jsonable({"schema": "riskgate.measures/1",
                           "release_id": args.release_id or Path(args.table).stem,
                           "flow_run_id": None, "inputs": [i.to_dict() for i in infos],
                           "measures": [r.to_dict() for r in results.values()], "errors": {},
                           "versions": versions(), "timings": timings})
        text = json.dumps(doc, indent=2)
        if args.json_out == "-":
            print(text)
        else:
            Path(args.json_out).write_text(text, encoding="utf-8")
            console.print(f"JSON written to {args.json_out}")
    if args.per_record:
        Path(args.per_record).write_bytes(per_record_parquet(results, enc["released"].n))
        console.print(f"per-record values written to {args.per_record}")
    return 0


def _print_results(results: dict[str, Any], target: Console) -> None:
    for name, res in results.items():
        table = Table(title=name, show_header=True, header_style="bold")
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_column("direction")
        for key, value in res.figures.items():
            txt = "n/a" if value is None else (f"{value:.6g}" if isinstance(value, float)
                                               else str(value))
            direction = res.higher_is_riskier.get(key)
            table.add_row(key, txt, "" if direction is None else
                          ("higher = riskier" if direction else "lower = riskier"))
        if res.status.value != "ok":
            table.caption = f"{res.status.value}: {res.reason}"
        target.print(table)


# ---------------------------------------------------------------- attack
def cmd_attack(args: argparse.Namespace) -> int:
    from riskcore.attacks.data import encode_attack_tables
    from riskcore.errors import ConfigError
    from riskcore.gate import versions
    from riskcore.results import to_jsonable
    from riskcore.tableio import read_table

    frames, infos = {}, []
    for name, url in (("original", args.original), ("released", args.released),
                      ("control", args.control)):
        if url:
            df, info = read_table(url, name=name)
            frames[name] = df
            infos.append(info)
    from riskcore import Roles
    from riskcore.cleanliness import declared_types
    from riskcore.tableio import coerce_types

    cols = [c for c in frames["original"].columns if c in frames["released"].columns]
    types = declared_types(frames, Roles(tuple(cols)))  # numbers stay numbers (Gower)
    frames = {name: coerce_types(df, types, name) for name, df in frames.items()}
    with console.status(f"{args.kind}: encoding..."):
        enc = encode_attack_tables(frames["original"], frames["released"], frames.get("control"),
                                   cols)
    ori, rel, ctl = enc["original"], enc["released"], enc.get("control")
    with progress_bars():
        if args.kind == "singling-out":
            from riskcore.attacks.singling_out import singling_out

            res = singling_out(ori, rel, ctl, columns=args.columns or list(rel.columns),
                               n_attacks=args.n_attacks, n_cols=args.n_cols, mode=args.mode,
                               seed=args.seed)
        elif args.kind == "linkability":
            from riskcore.attacks.linkability import linkability

            if not args.aux or not args.aux2:
                raise ConfigError("linkability needs --aux A,B and --aux2 C,D (disjoint)")
            res = linkability(ori, rel, ctl, aux_a=args.aux, aux_b=args.aux2,
                              n_attacks=args.n_attacks, n_neighbors=args.neighbors,
                              seed=args.seed)
        else:
            from riskcore.attacks.inference import inference

            if not args.secret:
                raise ConfigError("inference needs --secret COLUMN")
            aux = args.aux or [c for c in rel.columns if c != args.secret]
            res = inference(ori, rel, ctl, secret=args.secret, aux=aux,
                            n_attacks=args.n_attacks, regression=args.regression, seed=args.seed)
    _print_results({res.measure: res}, console if args.json_out == "-" else out)
    if args.json_out:
        f = res.figures
        doc = to_jsonable({"schema": "riskgate.attack/1", "attack": args.kind,
                           "risk": f["risk"], "risk_ci": [f["risk_ci_low"], f["risk_ci_high"]],
                           "result": res.to_dict(), "inputs": [i.to_dict() for i in infos],
                           "versions": versions()})
        _write_json(doc, args.json_out)
    return 0


# ---------------------------------------------------------------- alc
def cmd_alc(args: argparse.Namespace) -> int:
    from riskcore import Roles, progress
    from riskcore.alc import ALCConfig, PRCParams, from_frames
    from riskcore.alc.scenarios import (Scenario, all_secrets, auto_scenarios, run_scenarios,
                                        summarize)
    from riskcore.alc.targets import select_targets
    from riskcore.cleanliness import declared_types
    from riskcore.errors import ConfigError
    from riskcore.gate import versions
    from riskcore.results import to_jsonable
    from riskcore.tableio import coerce_types, read_table

    urls = [("original", args.original)] + [
        ("released" if len(args.released) == 1 else f"released_{i + 1}", u)
        for i, u in enumerate(args.released)]
    frames, infos = {}, []
    for name, url in urls:
        df, info = read_table(url, name=name)
        frames[name] = df
        infos.append(info)
    names = list(frames)
    ori = frames["original"]
    cols = [c for c in ori.columns if c != args.household]
    types = declared_types(frames, Roles(tuple(c for c in cols if all(
        c in f.columns for f in frames.values()))))
    frames = {n: coerce_types(df, types, n) for n, df in frames.items()}
    data = from_frames(frames["original"], [frames[n] for n in names[1:]], columns=cols,
                       household=args.household, names=names)
    known = args.known
    if args.auto_known:
        scenarios = auto_scenarios(data, args.secret, args.per_secret, columns=known,
                                   seed=args.seed)
    elif args.all_secrets:
        scenarios = all_secrets(data, known, args.secret)
    else:
        if not args.secret:
            raise ConfigError("alc needs --secret COLUMN (or --all-secrets / --auto-known)")
        scenarios = [Scenario(s, tuple(k for k in (known or cols) if k != s))
                     for s in args.secret]
    if not scenarios:
        raise ConfigError("alc: no attack scenario (no known-column set qualifies)")
    targets = None
    if args.mode == "pretargeted":
        if not args.target_query:
            raise ConfigError("--mode pretargeted needs --target-query "
                              "('top 1% income' or a predicate)")
        targets = select_targets(data, args.target_query)
    cfg = ALCConfig(prc=PRCParams(alpha=args.alpha, r_min=args.r_min), halting=args.halting,
                    max_attacks=args.max_attacks, time_budget=args.time_budget, seed=args.seed)
    with progress_bars(), progress.scope("ALC attacks"):
        progress.tick("starting", 0, len(scenarios))
        results = run_scenarios(data, scenarios, cfg,
                                progress=lambda done, total, status: progress.tick(
                                    status, done, total),
                                targets=targets, recall=args.recall, baseline=args.baseline)
    summary = summarize(results)
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
    target = console if args.json_out == "-" else out
    target.print(table)
    target.print(f"max ALC {summary.max_alc}; per band {summary.counts}")
    if args.json_out:
        body = results[0].to_dict() if len(results) == 1 else {
            "schema": "riskgate.alc-set/1", "summary": summary.to_dict(),
            "attacks": [r.to_dict() for r in results]}
        doc = to_jsonable({**body, "inputs": [i.to_dict() for i in infos],
                           "column_kinds": dict(data.kinds), "versions": versions()})
        _write_json(doc, args.json_out)
    return 0


# ---------------------------------------------------------------- gate
def cmd_gate(args: argparse.Namespace) -> int:
    from riskcore.gateconfig import load_gate_config

    cfg = load_gate_config(args.config)
    if args.report_detail:
        cfg = cfg.model_copy(update={"report": cfg.report.model_copy(
            update={"detail": args.report_detail})})
    if not args.verbose:  # the progress bars and the summary replace Prefect's console log
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    # the ephemeral server's telemetry cannot reach anything from a closed network
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.release_gate import release_gate

    flow_fn = release_gate
    if args.dask_address or args.dask_local:
        from prefect_dask import DaskTaskRunner

        if args.dask_address:
            runner = DaskTaskRunner(address=args.dask_address)
        else:
            runner = DaskTaskRunner(cluster_class="distributed.LocalCluster",
                                    cluster_kwargs={"n_workers": args.dask_local,
                                                    "threads_per_worker": 1})
        flow_fn = release_gate.with_options(task_runner=runner)
    console.print(f"release gate [bold]{cfg.release_id}[/]: running...")
    with progress_bars():
        outcome = flow_fn(config=cfg, config_name=cfg.release_id)
    if args.json:
        print(json.dumps(outcome, indent=2, default=str))
    else:
        print_outcome(outcome, out)
    return int(outcome["exit_code"])


VERDICT_STYLE = {"APPROVED": "green", "NEEDS_REVIEW": "yellow", "REJECTED": "red"}
CHECK_STYLE = {"pass": "green", "review": "yellow", "insufficient": "yellow", "fail": "red",
               "error": "magenta"}


def print_outcome(outcome: dict[str, Any], target: Console) -> None:
    """The gate's summary: a table of every policy check, the verdict and where things went."""
    checks = outcome.get("checks") or []
    if checks:
        table = Table(title=f"policy checks of {outcome['release_id']}", header_style="bold")
        for col, justify in (("check", "left"), ("value", "right"), ("threshold", "left"),
                             ("verdict", "left")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        for c in checks:
            value = c.get("value")
            txt = "n/a" if value is None else f"{value:.6g}"
            style = CHECK_STYLE.get(c["verdict"], "")
            table.add_row(c["figure"], txt, str(c.get("threshold", "")),
                          f"[{style}]{c['verdict']}[/]" if style else c["verdict"])
        target.print(table)
    colour = VERDICT_STYLE.get(outcome["verdict"], "magenta")
    target.print(f"verdict: [bold {colour}]{outcome['verdict']}[/]")
    for reason in outcome.get("reasons", [])[:15]:
        target.print(f"  - {reason}", soft_wrap=True)
    target.print(f"decision: {outcome['decision_url']}", soft_wrap=True)
    if outcome.get("report_url"):
        target.print(f"report:   {outcome['report_url']}", soft_wrap=True)


# ---------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    import fsspec
    import pandas as pd

    from riskcore.gate import report_html
    from riskcore.tableio import exists, join_url

    def read_json(name: str) -> Any:
        url = join_url(args.run_dir, name)
        try:
            with fsspec.open(url, "r", encoding="utf-8") as fh:
                return json.load(fh)
        except FileNotFoundError:
            return None

    decision = read_json("decision.json")
    if decision is None:
        from riskcore.errors import InputError

        raise InputError(f"no decision.json in '{args.run_dir}': not a finished gate run")
    measures = (read_json("measures.json") or {}).get("measures", [])
    per_record = None
    pr_url = join_url(args.run_dir, "per_record.parquet")
    if exists(pr_url):
        per_record = pd.read_parquet(pr_url)
    detail = args.report_detail or (decision.get("config") or {}).get("report", {}).get(
        "detail", "summary")
    examples = read_json("examples.json") if detail == "full" else None
    if detail == "full" and examples is None:
        console.print("[yellow]note:[/] this run recorded no example values (examples.json); "
                      "run the gate with --report-detail full to record them")
    html = report_html(decision, measures, read_json("validation.json"), per_record, detail,
                       examples)
    target = args.out or join_url(args.run_dir, "report.rerendered.html")
    with fsspec.open(target, "wb") as fh:
        fh.write(html)
    if args.json:
        print(json.dumps({"report_url": target, "detail": detail,
                          "verdict": decision.get("verdict"), "bytes": len(html)}, indent=2))
    else:
        out.print(f"report written to {target}")
    return 0


# ---------------------------------------------------------------- screenshot
def find_report(path: str) -> Path:
    """A report.html itself, the one of a run folder, or that of a release folder's latest run
    (by its decision.json's finish time)."""
    from riskcore.errors import InputError

    p = Path(path)
    if p.is_file():
        return p
    if (p / "report.html").is_file():
        return p / "report.html"
    runs = []
    for d in p.glob("*/decision.json") if p.is_dir() else []:
        if (d.parent / "report.html").is_file():
            finished = json.loads(d.read_text(encoding="utf-8")).get("finished_at", "")
            runs.append((finished, d.stat().st_mtime, d.parent / "report.html"))
    if not runs:
        raise InputError(f"no report.html in '{path}' nor in a run folder under it: give a "
                         "report file, a run folder or a release folder")
    return max(runs)[2]


def cmd_screenshot(args: argparse.Namespace) -> int:
    from riskcore.report.browser import check_page

    report = find_report(args.report)
    with console.status(f"opening {report} in headless Chromium..."):
        page = check_page(report, args.out, width=args.width, max_height=args.max_height)
    problems = page.problems()
    if args.json:
        print(json.dumps({**page.to_dict(), "report": str(report), "problems": problems},
                         indent=2))
    else:
        out.print(f"{report}: verdict {page.verdict}, {len(page.plots)} plots, page "
                  f"{page.page_height} px high ({page.chromium})", soft_wrap=True)
        out.print(f"screenshot: {page.screenshot}", soft_wrap=True)
        for p in problems:
            out.print(f"[red]problem:[/] {p}")
    return 1 if problems else 0


# ---------------------------------------------------------------- serve / emit
def cmd_serve(args: argparse.Namespace) -> int:
    from prefect import serve

    from flows.deploy import build_deployments

    serve(*build_deployments(args.config, cron=args.cron), limit=args.limit)
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    from prefect.events import emit_event

    payload = {"release_id": args.release, "config": args.config}
    for key in ("original", "released", "output"):
        value = getattr(args, key)
        if value:
            payload[key] = value
    event = emit_event(event="riskgate.anonymization.completed",
                       resource={"prefect.resource.id": f"riskgate.release.{args.release}"},
                       payload=payload)
    out.print(f"emitted riskgate.anonymization.completed for {args.release}"
              + (f" (event {event.id})" if event else ""))
    return 0


def cmd_example(args: argparse.Namespace) -> int:
    from riskcore.examples import write_example

    paths = write_example(args.out_dir, n=args.rows, seed=args.seed)
    for name, path in paths.items():
        out.print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
