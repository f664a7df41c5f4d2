"""Threads are a budget.

A worker never runs one gate alone: up to five gates at once, each running its families as
parallel threads, each family fitting models whose OpenMP or BLAS calls start a thread per core
by default. On two cores that is dozens of spinning threads, and the ALC measured 10x slower
beside two busy processes. So every compiled call runs inside an explicit budget:

- the process's budget: ``$RISKGATE_THREADS`` when set (a worker's setting: e.g. 1 on a worker
  that runs five gates on two cores), else the cores this process may use (its CPU affinity,
  capped by a cgroup CPU quota: what a container was given, not what the host has);
- a family's share: the process's budget divided by the families that run at once (at least
  one thread), applied with threadpoolctl to every OpenMP and BLAS library loaded
  (scikit-learn's gradient boosting, NumPy's BLAS) and to numba's threading layer once a
  parallel kernel launched it;
- threads left idle: a family's chunked kernels (:func:`in_chunks`) also take the threads of
  the families that have ended, once fewer run than the budget has threads
  (:func:`spare_threads`).

threadpoolctl's BLAS limits are process-wide, so the budget is entered once around the parallel
families (not inside each family thread), reference-counted across concurrent gates of one
process: the first entry sets the limit, later ones can only lower it, the last exit restores.
OpenMP's limit is not: libgomp keeps it per thread, and a thread that never set it gets one
thread per core. So every thread that may fit a model sets it for itself (:func:`this_thread`):
the thread that enters a budget, each family's thread (:func:`riskcore.gate.run.measure`) and
the helpers of :func:`in_chunks`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from .errors import ConfigError

ENV = "RISKGATE_THREADS"
#: how long a waiting OpenMP thread of libgomp spins before it sleeps (:func:`load_model_runtime`)
OPENMP_SPIN = 10_000

_LOCK = threading.Lock()
_ACTIVE: list[int] = []  # the budgets entered and not yet left (one per entry)
_RUNNING = [0]  # the families running now in this process, every gate's (:func:`running`)
_IN_RUN: ContextVar[bool] = ContextVar("riskgate_in_family_run", default=False)
_SAVED: list[Any] = []  # threadpoolctl's controller of the outermost entry


def available_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def process_budget() -> int:
    """``$RISKGATE_THREADS`` (a positive integer), else :func:`available_cores`."""
    given = os.environ.get(ENV, "").strip()
    if not given:
        return available_cores()
    try:
        value = int(given)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"${ENV}={given!r}: give the number of threads this process may "
                          "use, a whole number of at least 1")
    return value


def family_threads(parallel: int, budget: int | None = None) -> int:
    """Threads per family when ``parallel`` families run at once: the budget shared out, at
    least one each."""
    return max(1, (budget or process_budget()) // max(1, parallel))


def load_model_runtime() -> None:
    """Load scikit-learn's OpenMP runtime now: threadpoolctl limits only the libraries loaded
    when the limit is set, and a family imports scikit-learn lazily, inside the budget."""
    # a waiting OpenMP thread spins briefly, then sleeps (both read when the runtime loads).
    # Passive alone (no spin) costs a wake-up per parallel region: scikit-learn's gradient
    # boosting opens thousands of small ones, and on a virtual machine whose wake-ups are slow
    # its fit on 6,000 rows took 3.2-4.7 s against 0.23-0.35 s with a short spin (bench/gate.py,
    # the ALC's model selection). A short spin (libgomp's GOMP_SPINCOUNT, 10,000 pauses: well
    # under a millisecond) keeps that, and a thread still sleeps between fits rather than
    # taking a core from other gates' work; passive stays for more threads than cores (libgomp
    # then never spins) and for other OpenMP runtimes. Either variable the user set wins.
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPIN)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import sklearn.utils._openmp_helpers  # noqa: F401
    except ImportError:
        pass


def start_models(*modules: str) -> None:
    """A model family's start-up (:attr:`MeasureFamily.start_up`): scikit-learn's OpenMP
    runtime the way the budget needs it loaded (:func:`load_model_runtime`), then the
    scikit-learn ``modules`` the family's models come from."""
    import importlib

    load_model_runtime()
    for name in modules:
        importlib.import_module(name)


#: rows of training data per thread of a model fit: below it, OpenMP's start-up and
#: synchronisation cost more than a second thread gains (scikit-learn's gradient boosting,
#: measured: 3,000 rows 0.087 s on one thread, 0.083 s on two; 200,000 rows 1.03 s, 0.66 s)
ROWS_PER_MODEL_THREAD = 100_000


def model_threads(n_rows: int, budget: int | None = None) -> int:
    """Threads for fitting models on ``n_rows`` rows: one per :data:`ROWS_PER_MODEL_THREAD`,
    at least one, at most the budget."""
    return max(1, min(budget or process_budget(), 1 + int(n_rows) // ROWS_PER_MODEL_THREAD))


def _apply(threads: int) -> Any:
    """Limit every loaded OpenMP/BLAS pool and numba's to ``threads``; the controller that
    restores the previous limits."""
    from threadpoolctl import threadpool_limits

    controller = threadpool_limits(limits=threads)
    # numba's pool only once a parallel kernel launched it: setting its size launches it (a
    # second OpenMP runtime, 20 ms), and riskgate's kernels run on in_chunks's threads instead
    layer = sys.modules.get("numba.np.ufunc.parallel")
    if layer is not None and getattr(layer, "_is_initialized", False):
        try:
            import numba

            numba.set_num_threads(min(threads, int(numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
        except Exception:  # a threading layer that cannot be resized keeps its default
            pass
    return controller


_OPENMP: list[Any] = []  # threadpoolctl's controllers of the loaded OpenMP runtimes, once found


def _openmp() -> list[Any]:
    """The OpenMP runtimes' controllers, found once scikit-learn's runtime is loaded
    (:func:`load_model_runtime`); none before (nothing then uses OpenMP)."""
    with _LOCK:
        if not _OPENMP and "sklearn.utils._openmp_helpers" in sys.modules:
            from threadpoolctl import ThreadpoolController

            _OPENMP.extend(ThreadpoolController().select(user_api="openmp").lib_controllers)
            if not _OPENMP:
                _OPENMP.append(None)  # looked: none loaded
        return [c for c in _OPENMP if c is not None]


@contextmanager
def this_thread(threads: int | None = None) -> Iterator[int | None]:
    """OpenMP's limit in the calling thread for the block: ``threads``, by default the budget
    in force (nothing outside any budget). libgomp keeps the limit per thread (measured: a
    limit of 1 set in one thread, 2 in a thread started after it, on two cores; scikit-learn's
    gradient boosting reads it), so a limit set where the budget was entered does not reach a
    family's thread or a helper. Restores the thread's previous limit."""
    limit = threads or current_limit()
    runtimes = _openmp() if limit else []
    saved = [c.get_num_threads() for c in runtimes]
    for c in runtimes:
        c.set_num_threads(limit)
    try:
        yield limit
    finally:
        for c, n in zip(runtimes, saved, strict=True):
            c.set_num_threads(n)


def model_rows(n_rows: int) -> contextlib.AbstractContextManager[int | None]:
    """OpenMP's limit in the calling thread for one model fit or prediction on ``n_rows``
    rows: :func:`model_threads` within the budget in force. A family's budget is set by the
    table it measures, and its models are often fitted on a few thousand rows of it: there,
    a second thread only waits, and on a busy machine each of gradient boosting's thousands
    of parallel regions waits for a descheduled thread (the ALC alone on 1M rows beside two
    busy processes: 18.4 s, against 1.2-1.5 s with one thread for its 6,000-row fits)."""
    return this_thread(model_threads(n_rows, current_limit()))


def current_limit() -> int | None:
    """The budget in force in this process (None outside any)."""
    with _LOCK:
        return min(_ACTIVE) if _ACTIVE else None


@contextmanager
def thread_budget(threads: int, models: bool = False) -> Iterator[int]:
    """Run the block with at most ``threads`` threads in each OpenMP/BLAS/numba call; yields
    the limit in force (lower when a concurrent entry asked for less). ``models``: the block
    fits scikit-learn models (their OpenMP runtime is loaded first)."""
    threads = max(1, int(threads))
    if models:
        load_model_runtime()
    with _LOCK:
        if not _ACTIVE:
            _SAVED.append(_apply(threads))
        elif threads < min(_ACTIVE):
            _apply(threads)
        _ACTIVE.append(threads)
        limit = min(_ACTIVE)
    try:
        with this_thread(limit):  # OpenMP's limit is this thread's own
            yield limit
    finally:
        with _LOCK:
            _ACTIVE.remove(threads)
            if not _ACTIVE:
                _SAVED.pop().restore_original_limits()
            elif threads <= min(_ACTIVE):
                pass  # the others asked for as much or more: the lower limit stays (safe)


_TREE_JOBS: ContextVar[int] = ContextVar("riskgate_tree_jobs", default=1)


#: training rows per thread of a forest's trees: below it, joblib's hand-over (the waiting
#: thread polls every 10 ms) costs more than a second thread gains, and beside other work it
#: loses. 40 trees fitted and asked, alone / beside two spinning processes (two cores):
#: 3,000 rows 0.14 / 0.16 s on one thread, 0.12 / 0.26 s on two; 20,000 rows 0.71 / 0.95 s
#: on one, 0.42 / 0.82 s on two
ROWS_PER_TREE_THREAD = 10_000


def tree_jobs(n_rows: int | None = None) -> int:
    """Threads for a forest's trees (scikit-learn's ``n_jobs``, joblib threads that release
    the interpreter's lock while a tree grows): what :func:`tree_threads` set, else 1; at
    most one per :data:`ROWS_PER_TREE_THREAD` rows of ``n_rows`` training rows, when given."""
    jobs = _TREE_JOBS.get()
    if n_rows is None:
        return jobs
    return max(1, min(jobs, int(n_rows) // ROWS_PER_TREE_THREAD))


@contextmanager
def tree_threads(threads: int) -> Iterator[int]:
    """Forests fitted in the block grow up to ``threads`` trees at once (fewer on small
    tables: :func:`tree_jobs`); the forest is the same whatever the number (each tree's seed
    is fixed)."""
    token = _TREE_JOBS.set(max(1, int(threads)))
    try:
        yield max(1, int(threads))
    finally:
        _TREE_JOBS.reset(token)


@contextmanager
def running() -> Iterator[None]:
    """The block is a family's run (:func:`riskcore.gate.run.measure`): counted among the
    families running now in this process, whose number says how many of the budget's threads
    are idle (:func:`spare_threads`)."""
    with _LOCK:
        _RUNNING[0] += 1
    token = _IN_RUN.set(True)
    try:
        yield
    finally:
        _IN_RUN.reset(token)
        with _LOCK:
            _RUNNING[0] -= 1


def spare_threads() -> int:
    """Threads a running family's chunked kernel may use: its share of the budget, or more
    once other families have ended and left their threads idle (the process's budget less one
    per other family running; at least one). The families start together with one share each,
    and the longest (membership's distances on a synthetic release, 4 s against the others'
    2 s together) ran its last half alone on one core of two. Outside a family's run, or
    outside any budget (a Dask worker's process, which shares its cores with other workers):
    the budget in force, or one."""
    share = current_limit()
    if share is None or not _IN_RUN.get():
        return share or 1
    with _LOCK:
        others = _RUNNING[0] - 1
    return max(share, process_budget() - others)


_POOL: list[Any] = []  # one shared pool of helper threads, made on first use


def _helpers() -> Any:
    from concurrent.futures import ThreadPoolExecutor

    with _LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=max(4, 2 * available_cores()),
                                            thread_name_prefix="riskgate-chunk"))
        return _POOL[0]


def in_chunks(n: int, work: Callable[[slice], None], chunk: int,
              tick: Callable[[int], None] | None = None, threads: int | None = None) -> None:
    """``work`` over consecutive slices of ``range(n)`` of ``chunk`` items, on ``threads``
    threads, by default as many as the budget in force allows (one outside any budget), and
    in a family's run the threads other families left idle (:func:`spare_threads`): the
    calling thread and helpers
    from one shared pool take the next slice until none is left. For kernels that release the
    interpreter's lock (numba ``nogil``) and write disjoint slices of their outputs: on a busy
    worker a family then holds its share of the cores instead of one thread's. A single slice
    runs here, with no helper. ``tick(done)`` reports progress from the calling thread."""
    slices = [slice(s, min(n, s + chunk)) for s in range(0, n, max(1, chunk))]
    threads = min(threads or spare_threads(), len(slices))
    if threads <= 1:
        for sl in slices:
            if tick is not None:
                tick(sl.start)
            work(sl)
        return
    pending = iter(slices)
    taking = threading.Lock()

    def take() -> slice | None:
        with taking:
            return next(pending, None)

    limit = current_limit()
    if limit is not None and threads > limit:  # idle threads lent: one OpenMP thread each
        limit = 1

    def helper() -> None:
        with this_thread(limit):  # a helper fitting a model keeps to the caller's budget
            while (sl := take()) is not None:
                work(sl)

    helpers = [_helpers().submit(helper) for _ in range(threads - 1)]
    while (part := take()) is not None:  # the caller works too: no wait on a busy pool
        if tick is not None:
            tick(part.start)
        work(part)
    for h in helpers:
        h.result()


T = TypeVar("T")


class Beside(Generic[T]):
    """Work begun in a thread beside a step (the encoding beside the checks, the families'
    start-up beside the load). The thread runs in a copy of the caller's context, so its work
    spans reach the run's record; ``wait`` gives the work's value or raises its error."""

    def __init__(self, fn: Callable[[], T], name: str = "riskgate-beside") -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(self._run, fn), name=name,
                         daemon=True).start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to whoever waits
            self._error = exc
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> T:
        """The work's value (its error raised); TimeoutError if it has not ended within
        ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the work beside did not end within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


__all__ = ["ENV", "ROWS_PER_MODEL_THREAD", "Beside", "ROWS_PER_TREE_THREAD", "available_cores",
           "current_limit", "family_threads", "in_chunks", "load_model_runtime", "model_threads",
           "process_budget", "start_models", "this_thread", "thread_budget", "tree_jobs",
           "tree_threads"]
