"""``riskgate gate``: gate runs through the Prefect flow, against the configured API or a
private local server (see :mod:`riskgate.flows.local_api`). Several configs (or a folder of
them) are judged one after another in one process: one start-up (the private server, Great
Expectations' helper, the imports), one verdict and one decision each, and the exit code of
the worst verdict."""

from __future__ import annotations

import argparse
import json
import time
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.table import Table

from riskcore.errors import ConfigError, RiskgateError
from riskcore.redact import redact, redact_text
from riskcore.verdict import Verdict

from .common import (
    add_storage_flag,
    console,
    out,
    process_seconds,
    progress_bars,
    storage_options,
)

VERDICT_STYLE = {"APPROVED": "green", "NEEDS_REVIEW": "yellow", "REJECTED": "red"}
CHECK_STYLE = {"pass": "green", "review": "yellow", "insufficient": "yellow", "fail": "red",
               "error": "magenta"}
#: overrides that name one release's tables: refused with several configs
PER_RELEASE = ("release_id", "original", "released", "control", "identification")
#: verdicts from best to worst: several configs exit with the worst one's code (an ERROR,
#: not judged, is worse than a rejection)
WORST_LAST = ("APPROVED", "NEEDS_REVIEW", "REJECTED", "ERROR")
CONFIG_SUFFIXES = (".yaml", ".yml")


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    g = sub.add_parser("gate", parents=[common],
                       help="run the release gate (Prefect flow) on gate configs",
                       description="Run the release gate on a config, several, or every "
                       "*.yaml / *.yml of a folder, in one process: one start-up, one verdict "
                       "and one decision each. Against PREFECT_API_URL when set, else a "
                       "private local Prefect server. Exit code: 0 approved, 1 rejected, "
                       "2 needs review, 3 error; with several configs the worst verdict's "
                       "(approved, needs review, rejected, error: worst last).")
    g.add_argument("--config", required=True, nargs="+", action="extend", metavar="CONFIG",
                   help="gate YAML: a path or any fsspec URL; several, or a folder of them")
    for key in ("release-id", "original", "released", "control", "identification",
                "output-url", "policy"):
        dest = key.replace("-", "_")
        g.add_argument(f"--{key}", dest=dest, default=None,
                       help=f"override the config's {dest}"
                       + (" (one config only)" if dest in PER_RELEASE else ""))
    g.add_argument("--dask-address", help="run the measure tasks (for a partitioned release, "
                   "the partitions' work) on this Dask scheduler")
    g.add_argument("--dask-local", type=int, metavar="N",
                   help="start a local Dask cluster with N workers for the same work")
    g.add_argument("--dask-memory", metavar="SIZE", default="auto",
                   help="memory limit of each --dask-local worker, e.g. 2GiB (default: auto)")
    g.add_argument("--report-detail", choices=["summary", "full"], default=None,
                   dest="report_detail", help="'full' adds the quasi-identifier values of the "
                   "riskiest records to the report, labelled as examples (overrides the config)")
    g.add_argument("--json", action="store_true", help="print the outcome as JSON (a list "
                   "of outcomes with several configs)")
    add_storage_flag(g)
    g.set_defaults(handler=run)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("release_id", "original", "released", "control", "identification", "output_url",
            "policy", "report_detail")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def config_urls(given: list[str], options: dict[str, Any]) -> list[str]:
    """The configs to judge: each one given, a folder's *.yaml and *.yml files in name order;
    a folder with none is refused."""
    from riskcore.storage import filesystem

    urls: list[str] = []
    for url in given:
        fs, path = filesystem(url, options)
        try:
            folder = bool(fs.isdir(path))
        except Exception:
            folder = False  # unreachable: load_gate says why, naming the file
        if not folder:
            urls.append(url)
            continue
        found = sorted(p for p in fs.ls(path, detail=False)
                       if str(p).lower().endswith(CONFIG_SUFFIXES))
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        configs = [str(p) if protocol in ("file", "local") else f"{protocol}://{p}"
                   for p in found if _is_gate_config(fs, str(p))]
        if not configs:  # the loader says what is wrong with it, as for one file
            urls.append(url)
            continue
        skipped = len(found) - len(configs)
        if skipped:
            console.print(f"{redact_text(url)}: {len(configs)} gate config(s); {skipped} other "
                          "YAML file(s) (policies, hierarchies) skipped", markup=False)
        urls += configs
    return urls


def _is_gate_config(fs: Any, path: str) -> bool:
    """A folder's YAML file is a gate config when it maps release_id or released (a policy
    beside the configs has neither); one that cannot be parsed is taken, so that its error is
    told as its ERROR verdict."""
    import yaml

    try:
        with fs.open(path, "rb") as f:
            doc = yaml.safe_load(f.read(1 << 20))
    except Exception:
        return True
    return isinstance(doc, dict) and bool({"release_id", "released"} & set(doc))


def worst(outcomes: list[dict[str, Any]]) -> str:
    """The worst verdict of several runs (:data:`WORST_LAST`)."""
    return max((str(o.get("verdict")) for o in outcomes),
               key=lambda v: WORST_LAST.index(v) if v in WORST_LAST else len(WORST_LAST))


def run(args: argparse.Namespace) -> int:
    from riskcore.gate import gx_helper

    # Great Expectations' helper process first: its import (seconds, once a process) runs on
    # the other core while the config, Prefect and the tables load
    gx_helper.start()
    started = time.perf_counter()
    options = storage_options(args)
    over = overrides(args)
    urls = config_urls(args.config, options)
    if len(urls) > 1:
        gx_helper.serve_families()  # the first gate sets the ALC up in the helper for the rest
        named = [f"--{k.replace('_', '-')}" for k in PER_RELEASE if k in over]
        if named or args.dask_address or args.dask_local:
            raise ConfigError(f"{', '.join(named or ['--dask-address/--dask-local'])}: one "
                              f"config only, and {len(urls)} were given; set it in each "
                              "config, or gate them one by one")
    from riskcore.gate.config import load_gate

    gates: dict[str, Any] = {}
    if len(urls) == 1:  # a config error fails here, in a second, as one line
        gates[urls[0]] = load_gate(urls[0], over, options)
    else:
        for url in urls:
            try:
                gates[url] = load_gate(url, over, options)
            except RiskgateError as exc:  # its own ERROR verdict, the others still judged
                gates[url] = exc
    outcomes = _judge(args, urls, gates, over, options)
    if args.json:
        doc = outcomes[0] if len(outcomes) == 1 else outcomes
        print(json.dumps(redact(doc), indent=2, default=str))
    else:
        for outcome in outcomes:
            print_outcome(outcome, out)
        if len(outcomes) > 1:
            print_summary(outcomes, out)
    waited = process_seconds()
    console.print(f"{len(outcomes)} gate run(s): {time.perf_counter() - started:.1f} s of wall "
                  "time" + (f", {waited:.1f} s since the command started" if waited else ""),
                  markup=False)
    v = worst(outcomes)
    return Verdict(v).exit_code if v in WORST_LAST else Verdict.ERROR.exit_code


def _judge(args: argparse.Namespace, urls: list[str], gates: dict[str, Any],
           over: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    """One gate run per config, in order, under one Prefect API; a config that could not be
    read is an ERROR outcome of its own."""
    from ..local_api import prefect_api
    from ..verdicts import outcome_of

    outcomes: list[dict[str, Any]] = []
    with ExitStack() as stack:
        flow_fn, params = _runner(args, gates[urls[0]], options, stack)
        if any(not isinstance(g, RiskgateError) for g in gates.values()):
            stack.enter_context(prefect_api())  # an API that refuses us: its one line, first
        for url in urls:
            gate = gates[url]
            if isinstance(gate, RiskgateError):
                outcomes.append(_unread(url, gate))
                continue
            console.print(f"release gate [bold]{gate.config.release_id}[/]: running...")
            with progress_bars(), without_default_heartbeats():
                state = flow_fn(config=url, overrides=over, storage_options=options,
                                origin="command line", return_state=True, **params)
            outcome = outcome_of(state)
            if outcome is None:
                outcome = {"release_id": gate.config.release_id, "verdict": "ERROR",
                           "exit_code": Verdict.ERROR.exit_code, "config": url,
                           "reasons": [redact_text(
                               f"the gate run ended {state.type.value} without a verdict: "
                               f"{state.message}")]}
            outcomes.append({**outcome, "config": url})
    return outcomes


def _unread(url: str, exc: RiskgateError) -> dict[str, Any]:
    """The ERROR outcome of a config that could not be read (no decision is written: where
    to is what could not be read)."""
    return {"release_id": None, "verdict": "ERROR", "exit_code": Verdict.ERROR.exit_code,
            "config": url,
            "reasons": [redact_text(f"{type(exc).__name__}: {exc}")], "checks": [],
            "decision_url": None}


def _runner(args: argparse.Namespace, gate: Any, options: dict[str, Any], stack: ExitStack
            ) -> tuple[Any, dict[str, Any]]:
    """The flow to call and its extra parameters: Dask for the partitions' work of a
    partitioned release, or as the measures' task runner."""
    from riskcore.partitions import is_partitioned

    from ..release_gate import release_gate

    if not (args.dask_address or args.dask_local) or isinstance(gate, RiskgateError):
        return release_gate, {}
    if is_partitioned(gate.config.released, options):  # the partitions' work to the cluster
        return release_gate, {"dask_address": args.dask_address or stack.enter_context(
            _local_cluster(args.dask_local, args.dask_memory)).scheduler_address}
    from prefect_dask import DaskTaskRunner

    runner = (DaskTaskRunner(address=args.dask_address) if args.dask_address else
              DaskTaskRunner(cluster_class="distributed.LocalCluster",
                             cluster_kwargs={"n_workers": args.dask_local,
                                             "threads_per_worker": 1,
                                             "memory_limit": args.dask_memory,
                                             "dashboard_address": None}))
    return release_gate.with_options(task_runner=runner), {}  # type: ignore[arg-type]


def print_summary(outcomes: list[dict[str, Any]], target: Console) -> None:
    """Several runs at a glance: each config's release and verdict, and the worst."""
    table = Table(title=f"{len(outcomes)} releases judged", header_style="bold")
    for col in ("config", "release", "verdict"):
        table.add_column(col)
    for o in outcomes:
        v = str(o.get("verdict"))
        style = VERDICT_STYLE.get(v, "magenta")
        table.add_row(redact_text(str(o.get("config"))), str(o.get("release_id") or "-"),
                      f"[{style}]{v}[/]")
    target.print(table)
    v = worst(outcomes)
    target.print(f"worst verdict: [bold {VERDICT_STYLE.get(v, 'magenta')}]{v}[/]")


def without_default_heartbeats() -> Any:
    """Settings under which a command-line gate sends no flow-run heartbeats, unless the user
    set their frequency: Prefect's default (every 180 s) has no reader for such a run (the
    lost-run automation of ``riskgate deploy`` watches the deployments' runs alone), and the
    engine joins its heartbeat thread, which sleeps in 1 s steps, when the flow ends: every
    command-line gate waited 0-1 s after its verdict was known (the suite's 101 bad-input
    cases, most of them a gate: 64 s with heartbeats, 39-40 s without).

    The settings are the current ones with that one field changed: Prefect's
    ``temporary_settings`` builds them anew from every source (the environment, the profile
    file), 0.12 s on each gate's path, for the same values."""
    from contextlib import nullcontext

    from prefect.context import SettingsContext

    context = SettingsContext.get()
    if context is None or "heartbeat_frequency" in context.settings.flows.model_fields_set:
        return nullcontext()  # set by the user (environment, profile), even to the default
    settings = context.settings
    quiet = settings.model_copy(update={
        "flows": settings.flows.model_copy(update={"heartbeat_frequency": None})})
    return SettingsContext(profile=context.profile, settings=quiet)


def _local_cluster(workers: int, memory: str) -> Any:
    """A Dask cluster on this machine: ``workers`` processes of one thread each."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit=memory,
                        dashboard_address=None)


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
            txt = "n/a" if value is None else f"{value:.4g}"
            style = CHECK_STYLE.get(c["verdict"], "")
            table.add_row(c["figure"], txt, str(c.get("threshold") or ""),
                          f"[{style}]{c['verdict']}[/]" if style else c["verdict"])
        target.print(table)
    colour = VERDICT_STYLE.get(outcome["verdict"], "magenta")
    target.print(f"verdict: [bold {colour}]{outcome['verdict']}[/]")
    for reason in outcome.get("reasons", [])[:15]:
        target.print(f"  - {redact_text(reason)}", soft_wrap=True, markup=False)
    target.print(f"decision: {outcome.get('decision_url') or 'not written'}", soft_wrap=True,
                 markup=False)
    if outcome.get("report_link"):
        target.print(f"report:   {outcome['report_link']}", soft_wrap=True, markup=False)
    elif outcome.get("report_url"):
        target.print(f"report:   {outcome['report_url']}", soft_wrap=True, markup=False)
