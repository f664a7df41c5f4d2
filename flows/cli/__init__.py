"""The ``riskgate`` command line, one module per command.

Exit codes (every command):

====  ==========================================================
0     approved (``gate``), or the command did what it was asked
1     rejected (``gate``); a problem a reader would see (``screenshot``)
2     needs review (``gate``)
3     error: bad input, unreachable store or API, any unexpected exception
64    usage error: unknown flag, missing argument (sysexits' EX_USAGE)
130   interrupted (Ctrl-C)
====  ==========================================================

An error prints one line naming the file, key or column and what to do; ``--verbose`` adds the
traceback. Every line that leaves the process is redacted (no credential is ever printed).
Prefect is imported only by the commands that orchestrate.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

if sys.argv[1:2] == ["gate"] and not {"-h", "--help"} & set(sys.argv[2:]):
    # ``riskgate gate``: Great Expectations' helper starts before the commands' imports (0.2
    # s), so that its own import (1.7 s of CPU) ends before the gate reads its tables rather
    # than beside the read; gate.run() finds it running
    from riskcore.gate import gx_helper as _gx_helper

    _gx_helper.start()

from riskcore.errors import RiskgateError  # noqa: E402
from riskcore.processes import stop_on_sigterm  # noqa: E402
from riskcore.redact import install_log_redaction, redact_text  # noqa: E402

from ..standby_wire import command_environ  # noqa: E402
from . import (  # noqa: E402
    alc,
    attack,
    config,
    diff,
    emit,
    example,
    flow_run,
    gate,
    history,
    init,
    measure,
    ops,
    report,
    standby,
    trust,
)
from .common import console  # noqa: E402

EXIT_OK = 0
EXIT_ERROR = 3
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130

COMMANDS = (init, diff, measure, attack, alc, gate, config, report, ops, emit, history,
            trust, example, standby, flow_run)


class Parser(argparse.ArgumentParser):
    """argparse with riskgate's usage exit code (64, not 2 = NEEDS_REVIEW)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: usage error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="show tracebacks and Prefect's run log on the console")
    p = Parser(prog="riskgate", description="Measure re-identification risk of released "
               "tables and gate their release.", parents=[common],
               epilog="Exit codes: 0 approved/done, 1 rejected, 2 needs review, 3 error, "
                      "64 usage error.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=Parser)
    for module in COMMANDS:
        module.add_parsers(sub, common)
    return p


def _handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    return args.handler  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (never raises, except SystemExit for usage)."""
    args = build_parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    # before Prefect is imported: no analytics, and without --verbose the summary tables
    # replace Prefect's console log (a standby does the same: :mod:`..standby_wire`)
    os.environ.update(command_environ(os.environ, verbose))
    install_log_redaction()
    try:
        return int(_handler(args)(args))
    except RiskgateError as exc:
        _fail(f"error: {type(exc).__name__}: {exc}", verbose)
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.print("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # an unforeseen failure is an error (3), never a verdict
        _fail(f"error: unexpected {type(exc).__name__}: {exc}"
              + ("" if verbose else " (run with --verbose for the traceback)"), verbose)
        return EXIT_ERROR


def _fail(line: str, verbose: bool) -> None:
    if verbose:
        sys.stderr.write(redact_text(traceback.format_exc()))
    console.print(redact_text(line), markup=False, highlight=False, soft_wrap=True)


def run(argv: list[str] | None = None, tell: Callable[[int], None] | None = None
        ) -> NoReturn:
    """The console script: :func:`main`, then out without the interpreter's teardown;
    ``tell`` is given the exit code once everything is written (a standby's gate process
    tells its command, :mod:`..standby`).

    Tearing down a process that imported Prefect, Great Expectations and scikit-learn takes
    about a second (measured: 0.9-1.1 s of every gate run) and does nothing a finished command
    needs: what Prefect still holds (run logs, events) is sent first, logs and the standard
    streams are flushed, child processes were stopped by the command itself.
    """
    stop_on_sigterm(EXIT_ERROR)  # the console script only: not in a process that calls main()
    code = _exit_code(argv)
    if "riskgate.flows.standby" in sys.modules:  # ``riskgate standby``: in a gate process it
        from ..standby import forked  # forked, its command runs now

        command = forked()
        if command is not None:
            stop_on_sigterm(EXIT_ERROR)
            code, tell = _exit_code(command.argv), command.tell
    _leave(code, tell)


def _exit_code(argv: list[str] | None) -> int:
    """:func:`main`'s exit code, usage errors and ``--help`` included."""
    try:
        return main(argv)
    except SystemExit as exc:  # usage errors and --help
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)


def _leave(code: int, tell: Callable[[int], None] | None = None) -> NoReturn:
    if "prefect" in sys.modules:
        from ..local_api import drain_prefect

        drain_prefect()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    if tell is not None:
        tell(code)
    os._exit(code)


__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main", "run"]
