"""Giving freed memory back to the system between the gate's steps.

The gate's steps allocate and free arrays of hundreds of megabytes. Freed memory often stays
with the allocator that held it: Arrow's pool (mimalloc) keeps the pages of the tables it read,
and glibc keeps freed heap blocks below its trim threshold. Peak RSS then counts memory that
no step uses any more. :func:`release_memory`, called when a step's large objects are gone,
returns both to the system (the same remedy Dask's workers use, ``malloc_trim``).

Within a step the opposite holds: :func:`keep_freed_memory` has glibc keep what a step frees
for the step's next arrays, rather than give it back and fault it in again at once; and
:func:`spare_the_collector` keeps Python's garbage collector off what the process loaded.
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


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """glibc, its ``mallopt``, ``malloc`` and ``free`` typed; None where the C library is
    another (musl, macOS)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _mallopt(param: int, value: int, variable: str) -> bool:
    """glibc's ``mallopt(param, value)``, unless the user tuned that parameter (its
    environment ``variable``) or any (``GLIBC_TUNABLES``): True when set."""
    if variable in os.environ or "GLIBC_TUNABLES" in os.environ:
        return False
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(param, value))


#: allocations between two collections of Python's youngest generation (CPython's default: 700)
YOUNG_OBJECTS = 20_000


@functools.cache
def spare_the_collector() -> bool:
    """Leave what this process has loaded so far out of Python's cyclic garbage collector
    (``gc.freeze``), and collect its youngest generation every :data:`YOUNG_OBJECTS`
    allocations rather than every 700: once per process, at its first gate, before any table
    is read (so no table's memory is ever frozen). True when done; False where the collector
    is off (the embedding program's choice, kept). A higher threshold the program set is kept.

    A gate process has Prefect, pandas and Arrow loaded: a quarter of a million objects that
    live as long as it does. Each full collection walked them all (0.12-0.23 s with the
    interpreter's lock held, three times in a 1M-row gate), and the youngest generation was
    collected about 350 times a gate. On ``bench/gate.py``'s every-family 1M-row gate the
    collector took 0.67 s of a gate by default, 0.29-0.33 s with the freeze, 0.14 s with the
    threshold too (most of a pandas or scikit-learn call's objects are freed before a
    collection sees them); the data work, four alternated gates each, 5.30 -> 5.06 s
    (median). ``riskgate standby`` freezes likewise before it forks a gate. Frozen objects
    are never collected: what was garbage at the first gate's start (imports' leftovers)
    stays.
    """
    if not gc.isenabled():
        return False
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_OBJECTS), middle, old)
    return True


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
    return _mallopt(M_TOP_PAD, TOP_PAD_BYTES, "MALLOC_TOP_PAD_")


#: glibc's ``mallopt`` parameter for the size from which a block is mapped on its own
M_MMAP_THRESHOLD = -3
#: large arrays below this size come from the heap (:func:`large_arrays_from_heap`)
HEAP_ARRAYS_BYTES = 1 << 30


@functools.cache
def large_arrays_from_heap() -> bool:
    """Have glibc serve blocks up to :data:`HEAP_ARRAYS_BYTES` from its heap rather than map
    each on its own (``mallopt(M_MMAP_THRESHOLD)``), unless the user tuned glibc's allocator:
    True when set. For Great Expectations' helper process (:mod:`riskcore.gate.gx_helper`),
    whose one large job is the release's diff.

    glibc maps a block above its threshold (128 KB at first, rising to the largest block freed,
    32 MB at most) with its own ``mmap``, and unmaps it when freed: a million-row column's
    array, each time it is made, is new pages, each faulted in (and zeroed) by the kernel, and
    on a virtual machine a fault is several times a native one. From the heap, a freed array's
    pages serve the next array (:func:`keep_freed_memory` keeps up to :data:`TOP_PAD_BYTES` of
    them). Measured in the helper on the diff of a 1M-row gate, four alternated gates each:
    1.00-1.08 s of CPU (0.35-0.39 s of it the kernel's) by default, 0.83-0.88 s (0.18-0.26)
    with it; the checks phase 1.23-1.41 s -> 1.08-1.23 s. Not in the gate's own process: there
    it gave no gain (the load reads into Arrow's pool, not glibc's) and 40 MB more peak RSS.
    :func:`release_memory` still returns the heap's free pages between gates."""
    return _mallopt(M_MMAP_THRESHOLD, HEAP_ARRAYS_BYTES, "MALLOC_MMAP_THRESHOLD_")


def prefault(nbytes: int) -> int:
    """Have the heap hold ``nbytes`` (at most :data:`TOP_PAD_BYTES`, what it keeps free)
    faulted in: one block allocated, written and freed, so that the next arrays take pages
    already there. What the helper does while the gate's process prepares its tables
    (:meth:`riskcore.gate.gx_helper.Helper.reserve`); with :func:`keep_freed_memory` and
    :func:`large_arrays_from_heap` in force, else glibc gives the block back at once. The
    bytes faulted in (0 where the C library is not glibc)."""
    size = max(0, min(int(nbytes), TOP_PAD_BYTES))
    libc = _glibc()
    if libc is None:  # not glibc: nothing to keep
        return 0
    block = libc.malloc(size) if size else None
    if not block:
        return 0
    ctypes.memset(block, 0, size)
    libc.free(block)
    return size


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
