"""Progress of long steps, for whoever listens (the CLI's progress bars).

Library code calls :func:`tick` at natural checkpoints (a SUDA2 level, a block of attack
queries, an ALC checkpoint); it costs one list check when nobody listens. The measure being run
sets the label with :func:`scope`, so that parallel measures report separately. Listeners are
process-wide: measures run on Dask workers in other processes report nothing to the CLI.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

#: listener(label, step, done, total): total None when unknown
Listener = Callable[[str, str, int, "int | None"], None]

_scope: ContextVar[str] = ContextVar("riskgate_progress_scope", default="")
_listeners: list[Listener] = []
_lock = threading.Lock()


@contextmanager
def scope(label: str) -> Iterator[None]:
    """Ticks inside this block are reported under ``label`` (e.g. the measure's name)."""
    token = _scope.set(label)
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def _registered(registry: list[Any], listener: Any) -> Iterator[None]:
    """``listener`` in ``registry`` while the block runs."""
    with _lock:
        registry.append(listener)
    try:
        yield
    finally:
        with _lock:
            registry.remove(listener)


def listen(listener: Listener) -> AbstractContextManager[None]:
    """Call ``listener`` for every tick while the block runs."""
    return _registered(_listeners, listener)


#: step listener(label, seconds): a gate step or a measure family has finished
StepListener = Callable[[str, float], None]
_step_listeners: list[StepListener] = []


def listen_steps(listener: StepListener) -> AbstractContextManager[None]:
    """Call ``listener`` whenever a gate step or a family finishes while the block runs."""
    return _registered(_step_listeners, listener)


def finished(label: str, seconds: float) -> None:
    """Report that the step or family ``label`` took ``seconds``."""
    for fn in tuple(_step_listeners):
        try:
            fn(label, float(seconds))
        except Exception:  # a broken progress display must never break a gate
            pass


def tick(step: str, done: int, total: int | None = None) -> None:
    """Report that ``done`` of ``total`` units of ``step`` are finished."""
    if not _listeners:
        return
    label = _scope.get() or step
    for fn in tuple(_listeners):
        try:
            fn(label, step, int(done), None if total is None else int(total))
        except Exception:  # a broken progress display must never break a measure
            pass


class WorkSpans:
    """When each step's own work began and ended (``time.perf_counter``), across the threads
    that do it: a step run as Prefect tasks (two loads, five families at once) spans from the
    first task body's start to the last one's end; what the step took beyond that is the task
    runs' bookkeeping (their creation, states and events), not work on the data."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[str, tuple[float, float]] = {}

    def add(self, step: str, start: float, end: float) -> None:
        with self._lock:
            old = self._spans.get(step)
            self._spans[step] = (start, end) if old is None else (min(old[0], start),
                                                                  max(old[1], end))

    def pop(self, step: str) -> float | None:
        """Seconds from the step's first start to its last end (None: nothing recorded), and
        forget it."""
        span = self.pop_span(step)
        return None if span is None else span[1] - span[0]

    def pop_span(self, step: str) -> tuple[float, float] | None:
        """The step's first start and last end (None: nothing recorded), and forget it."""
        with self._lock:
            return self._spans.pop(step, None)


_work: ContextVar[WorkSpans | None] = ContextVar("riskgate_work_spans", default=None)


@contextmanager
def recording(spans: WorkSpans) -> Iterator[None]:
    """:func:`working` blocks inside this one (and in the threads it submits to, which copy
    the context, as Prefect's task runner does) record into ``spans``."""
    token = _work.set(spans)
    try:
        yield
    finally:
        _work.reset(token)


@contextmanager
def working(step: str) -> Iterator[None]:
    """The block is work of ``step`` (load, validate, encode, measures) for the recording run."""
    spans = _work.get()
    start = time.perf_counter()
    try:
        yield
    finally:
        if spans is not None:
            spans.add(step, start, time.perf_counter())
