"""Giving freed memory back to the system between the gate's steps.

The gate's steps allocate and free arrays of hundreds of megabytes. Freed memory often stays
with the allocator that held it: Arrow's pool (mimalloc) keeps the pages of the tables it read,
and glibc keeps freed heap blocks below its trim threshold. Peak RSS then counts memory that
no step uses any more. :func:`release_memory`, called when a step's large objects are gone,
returns both to the system (the same remedy Dask's workers use, ``malloc_trim``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS).

    glibc's soname first: ``ctypes.util.find_library`` runs ``ldconfig -p`` in a subprocess
    (30 ms on the gate's path between loading and validating)."""
    fn = None
    for find in (lambda: "libc.so.6", lambda: ctypes.util.find_library("c")):
        name = find()
        if not name:
            continue
        try:
            fn = ctypes.CDLL(name).malloc_trim
            break
        except (OSError, AttributeError):
            continue
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


def release_memory(collect: bool = False) -> None:
    """Return the free pages of Arrow's pool and of the C heap to the system (about a
    millisecond).

    Args:
        collect: first run a full garbage collection, for large objects held only by
            reference cycles (a Prefect flow's task results). It walks every object: a quarter
            of a second with Prefect and Great Expectations loaded, so only when it frees much.
    """
    if collect:
        gc.collect()
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pass
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
