"""Compiled kernels: numba where it is installed, None where it is not (each caller then has a
NumPy path that gives the same result)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
