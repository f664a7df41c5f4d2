"""Giving freed memory back to the system between the gate's steps.

The gate's steps allocate and free arrays of hundreds of megabytes. Freed memory often stays
with the allocator that held it: Arrow's pool (mimalloc) keeps the pages of the tables it read,
and glibc keeps freed heap blocks below its trim threshold. Peak RSS then counts memory that
no step uses any more. :func:`release_memory`, called when a step's large objects are gone,
returns both to the system (the same remedy Dask's workers use, ``malloc_trim``).

Within a step the opposite holds: :func:`keep_freed_memory` has glibc keep what a step frees
for the step's next arrays, rather than give it back and fault it in again at once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
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


#: glibc's ``mallopt`` parameter for the free memory the heap keeps at its top (``M_TOP_PAD``)
M_TOP_PAD = -2
#: what the gate's processes keep: about what a million-row step frees between its arrays
TOP_PAD_BYTES = 256 << 20


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc keep up to :data:`TOP_PAD_BYTES` of freed memory at the top of its heap
    (``mallopt(M_TOP_PAD)``; once per process), unless the user tuned glibc's allocator
    (``MALLOC_TOP_PAD_`` or ``GLIBC_TUNABLES``): True when set.

    By default glibc hands the top of its heap back to the system as soon as 128 KB of it are
    free, so a step that frees a column's temporaries and allocates the next ones takes their
    pages from the kernel again. Measured on the release's diff at a million rows, in a fresh
    process: 0.67-1.09 s by default, 0.49-0.72 s with the pad (the process's system time
    0.55-0.91 s, 0.26-0.34 s with it); a whole 1M-row equivalence gate's data work
    3.1-4.0 s -> 2.6-3.4 s, for 20-50 MB more peak RSS. :func:`release_memory` still
    returns it all between steps (``malloc_trim`` ignores the pad)."""
    if "MALLOC_TOP_PAD_" in os.environ or "GLIBC_TUNABLES" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TOP_PAD, TOP_PAD_BYTES))


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
