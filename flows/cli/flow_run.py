"""``riskgate flow-run``: the command a Prefect worker starts for each flow run of a work pool
set up with ``riskgate deploy --standby``. With ``$RISKGATE_STANDBY`` naming a standby of the
worker's environment, the run is a fork of it (:mod:`riskgate.flows.launch`); without one,
the command becomes ``python -m prefect.engine``, the worker's default, before it imports
anything. Here, in a standby's forked process, it runs Prefect's engine itself."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import warnings
from collections.abc import Mapping
from typing import Any


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    f = sub.add_parser(
        "flow-run", parents=[common],
        help="run the flow run a Prefect worker started (its id in $PREFECT__FLOW_RUN_ID), "
             "in a fork of the standby of $RISKGATE_STANDBY when there is one; set as the work "
             "pool's command by `riskgate deploy --standby`")
    f.add_argument("flow_run_id", nargs="?", help="the flow run's id (default: "
                   "$PREFECT__FLOW_RUN_ID, as the worker sets it)")
    f.set_defaults(handler=run)


def run_settings(environ: Mapping[str, str]) -> dict[Any, Any]:
    """The settings a worker gives a flow run in its environment that a standby's fork must
    take from there (Prefect read the standby's own when it was imported): the work pool's
    heartbeat (``riskgate deploy`` sets 30 s; Prefect's default, 180 s, would have the lost-run
    automation end a living gate after 90 s)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    beat = environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "").strip()
    return {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: int(beat)} if beat.isdigit() else {}


def run(args: argparse.Namespace) -> int:
    """Prefect's engine (``python -m prefect.engine``, its own code) on the worker's flow run,
    with the work pool's heartbeat: the standby read its settings before the worker set it
    (the lost-run automation listens for those beats). Its exit code is the engine's."""
    from prefect.settings import temporary_settings

    updates = run_settings(os.environ)
    sys.argv = ["prefect.engine", *([args.flow_run_id] if args.flow_run_id else [])]
    with temporary_settings(updates=updates), warnings.catch_warnings():  # type: ignore[arg-type]
        # the standby imported the module: its main block runs all the same
        warnings.filterwarnings("ignore", "'prefect.engine' found in sys.modules",
                                RuntimeWarning)
        try:
            runpy.run_module("prefect.engine", run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
