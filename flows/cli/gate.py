"""``riskgate gate``: one gate run through the Prefect flow, against the configured API or a
private local server (see :mod:`riskgate.flows.local_api`)."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import Any

from rich.console import Console
from rich.table import Table

from riskcore.redact import redact, redact_text

from .common import add_storage_flag, console, out, progress_bars, storage_options

VERDICT_STYLE = {"APPROVED": "green", "NEEDS_REVIEW": "yellow", "REJECTED": "red"}
CHECK_STYLE = {"pass": "green", "review": "yellow", "insufficient": "yellow", "fail": "red",
               "error": "magenta"}


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    g = sub.add_parser("gate", parents=[common],
                       help="run the release gate (Prefect flow) on a gate config",
                       description="Run the release gate: against PREFECT_API_URL when set, "
                       "else a private local Prefect server. Exit code 0 approved, 1 rejected, "
                       "2 needs review, 3 error.")
    g.add_argument("--config", required=True, help="gate YAML: a path or any fsspec URL")
    for key in ("release-id", "original", "released", "control", "identification",
                "output-url", "policy"):
        g.add_argument(f"--{key}", dest=key.replace("-", "_"), default=None,
                       help=f"override the config's {key.replace('-', '_')}")
    g.add_argument("--dask-address", help="run the measure tasks (for a partitioned release, "
                   "the partitions' work) on this Dask scheduler")
    g.add_argument("--dask-local", type=int, metavar="N",
                   help="start a local Dask cluster with N workers for the same work")
    g.add_argument("--dask-memory", metavar="SIZE", default="auto",
                   help="memory limit of each --dask-local worker, e.g. 2GiB (default: auto)")
    g.add_argument("--report-detail", choices=["summary", "full"], default=None,
                   dest="report_detail", help="'full' adds the quasi-identifier values of the "
                   "riskiest records to the report, labelled as examples (overrides the config)")
    g.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_storage_flag(g)
    g.set_defaults(handler=run)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("release_id", "original", "released", "control", "identification", "output_url",
            "policy", "report_detail")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def run(args: argparse.Namespace) -> int:
    from riskcore.gate import gx_helper

    # Great Expectations' helper process first: its import (seconds, once a process) runs on
    # the other core while the config, Prefect and the tables load
    gx_helper.start()
    from riskcore.gate.config import load_gate

    options = storage_options(args)
    over = overrides(args)
    gate = load_gate(args.config, over, options)  # a config error fails here, in a second
    from riskcore.partitions import is_partitioned

    from ..local_api import prefect_api
    from ..release_gate import release_gate
    from ..verdicts import outcome_of

    flow_fn: Any = release_gate
    params: dict[str, Any] = {}
    with ExitStack() as stack:
        if is_partitioned(gate.config.released, options) and (args.dask_address
                                                               or args.dask_local):
            # a partitioned release: the partitions' work goes to the cluster
            params["dask_address"] = args.dask_address or stack.enter_context(
                _local_cluster(args.dask_local, args.dask_memory)).scheduler_address
        elif args.dask_address or args.dask_local:
            from prefect_dask import DaskTaskRunner

            runner = (DaskTaskRunner(address=args.dask_address) if args.dask_address else
                      DaskTaskRunner(cluster_class="distributed.LocalCluster",
                                     cluster_kwargs={"n_workers": args.dask_local,
                                                     "threads_per_worker": 1,
                                                     "memory_limit": args.dask_memory,
                                                     "dashboard_address": None}))
            flow_fn = release_gate.with_options(task_runner=runner)  # type: ignore[arg-type]
        stack.enter_context(prefect_api())  # an API that refuses us: its one line, first
        console.print(f"release gate [bold]{gate.config.release_id}[/]: running...")
        with progress_bars(), without_default_heartbeats():
            state = flow_fn(config=args.config, overrides=over, storage_options=options,
                            origin="command line", return_state=True, **params)
    outcome = outcome_of(state)
    if outcome is None:
        console.print(redact_text(f"error: the gate run ended {state.type.value} without a "
                                  f"verdict: {state.message}"), markup=False)
        return 3
    if args.json:
        print(json.dumps(redact(outcome), indent=2, default=str))
    else:
        print_outcome(outcome, out)
    return int(outcome["exit_code"])


def without_default_heartbeats() -> Any:
    """Settings under which a command-line gate sends no flow-run heartbeats, unless the user
    set their frequency: Prefect's default (every 180 s) has no reader for such a run (the
    lost-run automation of ``riskgate deploy`` watches the deployments' runs alone), and the
    engine joins its heartbeat thread, which sleeps in 1 s steps, when the flow ends: every
    command-line gate waited 0-1 s after its verdict was known (the suite's 101 bad-input
    cases, most of them a gate: 64 s with heartbeats, 39-40 s without)."""
    from contextlib import nullcontext

    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        return nullcontext()  # set by the user (environment, profile), even to the default
    return temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


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
