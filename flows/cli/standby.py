"""``riskgate standby``: keep a process with a gate's imports done, forking a gate process
for each ``riskgate gate`` that has ``$RISKGATE_STANDBY`` set
(:mod:`riskgate.flows.standby`)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import command_started, console, reset_consoles


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "standby", parents=[common],
        help="keep a gate's imports done and run each `riskgate gate` of this environment "
             "(the socket named by $RISKGATE_STANDBY) in a fork of it, until stopped")
    s.set_defaults(handler=run)


def warm() -> None:
    """What a gate run imports: the gate command, its flow, and what they import lazily."""
    from .. import local_api, release_gate, verdicts  # noqa: F401
    from . import gate  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Serve until stopped (0); in a gate process it forked, make this process the command's
    (its consoles, its start) and return 0: the console script then runs the command
    (:func:`riskgate.flows.cli.run`)."""
    from ..standby import serve

    command = serve(lambda line: console.print(line, markup=False, highlight=False), warm)
    if command is not None:
        reset_consoles()
        command_started(command.started)
    return 0
