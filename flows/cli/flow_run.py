"""``riskgate flow-run``: the command a Prefect worker starts for each flow run of a work pool
set up with ``riskgate deploy --standby``. With ``$RISKGATE_STANDBY`` naming a standby of the
worker's environment, the run is a fork of it (:mod:`riskgate.flows.launch`); without one,
the command becomes ``python -m prefect.engine``, the worker's default, before it imports
anything. Here, in a standby's forked process, it runs Prefect's engine itself."""

from __future__ import annotations

import argparse
import runpy
import sys
import warnings
from contextlib import AbstractContextManager
from typing import Any

from ..standby_wire import FLOW_RUN


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    f = sub.add_parser(
        FLOW_RUN, parents=[common],
        help="run the flow run a Prefect worker started (its id in $PREFECT__FLOW_RUN_ID), "
             "in a fork of the standby of $RISKGATE_STANDBY when there is one; set as the work "
             "pool's command by `riskgate deploy --standby`")
    f.add_argument("flow_run_id", nargs="?", help="the flow run's id (default: "
                   "$PREFECT__FLOW_RUN_ID, as the worker sets it)")
    f.set_defaults(handler=run)


def run_settings() -> AbstractContextManager[Any]:
    """Prefect's settings as this flow run's environment has them: the worker's per-run
    variables the standby's fork was given, the work pool's heartbeat among them (Prefect
    read the standby's settings when it was imported; entering a settings context reads the
    environment again). Without it the run would beat every 180 s, Prefect's default, and the
    lost-run automation (60-90 s of silence) would end a living gate."""
    from prefect.settings import temporary_settings

    return temporary_settings()


def run(args: argparse.Namespace) -> int:
    """Prefect's engine (``python -m prefect.engine``, its own code) on the worker's flow run,
    under this run's settings (:func:`run_settings`). Its exit code is the engine's."""
    sys.argv = ["prefect.engine", *([args.flow_run_id] if args.flow_run_id else [])]
    with run_settings(), warnings.catch_warnings():
        # the standby imported the module: its main block runs all the same
        warnings.filterwarnings("ignore", "'prefect.engine' found in sys.modules",
                                RuntimeWarning)
        try:
            runpy.run_module("prefect.engine", run_name="__main__")
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
