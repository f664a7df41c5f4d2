"""Compiled kernels: numba where it is installed, None where it is not (each caller then has a
NumPy path that gives the same result)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_COMPILED: dict[Callable[..., Any], Callable[..., Any] | None] = {}


def compiled(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """``fn`` compiled by numba (nopython, cached on disk, releasing the GIL), made once per
    process; None without numba."""
    if fn not in _COMPILED:
        try:
            import numba
        except ImportError:
            _COMPILED[fn] = None
        else:
            _COMPILED[fn] = numba.njit(cache=True, nogil=True)(fn)
    return _COMPILED[fn]


def warm() -> None:
    """numba's one-off set-up in a process, done ahead of any kernel: its import (0.15 s) and
    its CPU target's registries (0.3 s, scipy.linalg's import among them), which the first
    kernel of a process otherwise pays before its cached machine code loads (5 ms once warm).
    Nothing without numba; if numba's internals move, the first kernel pays again, as before.

    The target's contexts are made first, outside numba's compiler lock, and the lock is
    taken for their registries alone: numba makes a context under the context's own lock and
    then takes the compiler lock inside it (a kernel's first dispatcher does so in a family's
    thread), so taking the compiler lock first and the context's lock second, as this did,
    deadlocked a gate whose first kernel was made while this ran (seen: singling out's
    counter beside this start-up)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    try:
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target

        typing, target = cpu_target.typing_context, cpu_target.target_context
        with global_compiler_lock:
            target.refresh()
            typing.refresh()
    except Exception:  # a numba whose internals differ: the first kernel sets itself up
        log.debug("numba's set-up ahead of the kernels failed", exc_info=True)
