"""Processes: ending a child that was asked to stop, a child that ends with its parent, and a
command that stops promptly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from .errors import RiskgateError

#: seconds a SIGTERMed command has to write its ERROR decision before it leaves regardless
TERMINATION_GRACE_S = 8.0


STOPPED = ("the gate was stopped (SIGTERM: the run was cancelled, or its process or worker "
           "was stopped) before its verdict; run it again")


class Terminated(RiskgateError):
    """The process was asked to stop (SIGTERM) before the gate's verdict."""


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for a child asked to stop (its stdin closed, a
    terminate, a close command), then kill it; it is reaped either way."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def exit_with_parent(parent: int | None = None, interval_s: float = 0.25) -> None:
    """In a child process: leave as soon as the parent is gone (SIGKILLed included), from a
    daemon thread that watches the parent's pid. Unlike PR_SET_PDEATHSIG, which fires when the
    *thread* that started the child ends, this follows the process; it also runs while the
    child's main thread is busy (a long import)."""
    expected = parent if parent is not None else os.getppid()

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(interval_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


_armed: list[tuple[int, float]] = []  # (exit code, grace) once a command asked for it
_leaving = threading.Event()


def leave_soon() -> None:
    """Start the SIGTERM deadline (see :func:`stop_on_sigterm`), once, if a command armed it;
    for code that receives the termination in its own way (Prefect's engine turns SIGTERM into
    its TerminationSignal while a flow runs)."""
    if not _armed or _leaving.is_set():
        return
    _leaving.set()
    exit_code, grace_s = _armed[0]

    def leave_later() -> None:
        time.sleep(grace_s)
        try:
            sys.stderr.write(f"error: stopped by SIGTERM; left after {grace_s:.0f} s without "
                             "waiting for the work still running\n")
            sys.stderr.flush()
        finally:
            os._exit(exit_code)

    threading.Thread(target=leave_later, name="sigterm-deadline", daemon=True).start()


def stop_on_sigterm(exit_code: int, grace_s: float = TERMINATION_GRACE_S) -> None:
    """In a command's main thread: SIGTERM raises :class:`Terminated` where the main thread
    is (a gate run turns it into an ERROR decision), and the process leaves with
    ``exit_code`` after ``grace_s`` seconds whatever still runs (worker threads cannot be
    interrupted; the interpreter would wait for them)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _armed[:] = [(exit_code, grace_s)]

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second SIGTERM changes nothing
        leave_soon()
        raise Terminated(STOPPED)

    signal.signal(signal.SIGTERM, on_sigterm)
