"""Ending a child process that was asked to stop."""

from __future__ import annotations

import subprocess
from typing import Any


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for a child asked to stop (its stdin closed, a
    terminate, a close command), then kill it; it is reaped either way."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
