"""Great Expectations (and the release's diff) in a helper process, on the other core.

Importing Great Expectations and building its context costs about 2.5 s of CPU, all of it
Python under the interpreter's lock. In a background thread (the earlier design) it competed
with Prefect's own start-up for that lock, so the two costs added up on the gate's path
(profile of a 6,000-row gate: the flow module's imports took 2.6 s beside the thread, 1.4 s
alone). In a child process the two run side by side.

The helper validates what :func:`riskcore.gate.cleanliness.validate_tables` gives it (each
table's distinct values, a few MB at most) and answers with plain rows: the same function,
:func:`riskcore.gate.gx_suites.run_suites_here`, runs in either process. Once it is ready
(it says so when its start-up ends) it also reads the release against its original
(:func:`riskcore.anatomy.read_release`: the original's measured columns and the sample of
released rows the diff links sent as frames, 25 MB at a million rows), so that the diff's
Python and NumPy run on the other core rather than under this process's lock beside the
checks and the encoding. It lives as long as
its parent: it ends when its stdin closes, which the kernel does when the parent exits however
it exits. If it cannot be started, or dies, validation runs in this process instead (the
same checks, only slower to start), with a warning in the log; an error of Great Expectations
itself is raised as it would be in this process.

It also runs the families of :data:`riskcore.gate.run.IN_HELPER` (the ALC), once asked to set
them up (:meth:`Helper.start_families`): for a gate whose tables are of a survey's size
(:data:`riskcore.gate.run.HELPER_FROM_ROWS` to :data:`riskcore.gate.run.HELPER_ROWS` rows),
and for every later gate of a process that judges several configs (:func:`serve_families`).
The ALC fits scikit-learn models, whose Python runs under the interpreter's lock between their
compiled parts: beside the other families in one process it took half as long again (3.1-3.3
s against 2.0 alone on a 19,000-row survey release); in the helper it has a lock of its own.

Messages are length-prefixed pickles over the child's own pipes; nothing leaves the machine.

The helper imports less of what GX imports (:func:`_lighten`): its checks run on in-memory
pandas frames, so GX's optional SQL and AWS back ends (SQLAlchemy, boto3) stay out, and
``scipy.stats`` (statistical expectations only) and ``altair`` (the charts of one
expectation's renderer) are loaded on first use, which riskgate's checks never make. That took
GX's start from 2.8 s to 1.7 s of CPU (the import ran beside the gate's CSV read on a two-core
worker and slowed it by 0.7 s), and altair 0.2-0.25 s more of the 2.2-2.5 s the helper now
takes with pandas and its first validation (a test suite runs some sixty helpers).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Sequence
from typing import IO, Any

from ..processes import wait_or_kill

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")


class HelperGone(RuntimeError):
    """The helper process is not there to answer (never started, or died)."""


class HelperFailed(RuntimeError):
    """Great Expectations raised in the helper; the message is its exception's."""


def _send(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other side closed its pipe")
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed its pipe mid-message")
    return pickle.loads(data)  # noqa: S301 - our own child, on its private pipe


class Helper:
    """One helper process and the lock that keeps its requests one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log = tempfile.TemporaryFile(prefix="riskgate-gx-helper-")  # noqa: SIM115
        #: when the helper's start-up (GX's import and first validation) ended, once it said
        self._ready_at: float | None = None
        #: the families set up in it (:meth:`start_families`)
        self._families: set[str] = set()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "riskcore.gate.gx_helper"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
            env={**os.environ, "GX_ANALYTICS_ENABLED": "False",
                 "RISKGATE_HELPER_PARENT": str(os.getpid())})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        """The helper has started and is free now (it answers a request at once); never
        waits."""
        if not self._lock.acquire(blocking=False):
            return False  # another request is in it
        try:
            if self._ready_at is None and self.alive() and self.proc.stdout is not None \
                    and select.select([self.proc.stdout], [], [], 0)[0]:
                self._await_ready()
            return self._ready_at is not None and self.alive()
        except HelperGone:
            return False
        finally:
            self._lock.release()

    def run_suites(self, jobs: Sequence[tuple[str, Any, Sequence[Any]]]
                   ) -> tuple[list[list[dict[str, Any]]], float]:
        """The rows of :func:`run_suites_here` for ``jobs``, computed in the helper, and the
        seconds this call waited for the helper's start-up (GX's import) to end."""
        asked = time.time()
        rows, ready_at = self._ask(("suites", list(jobs)))
        return list(rows), max(0.0, ready_at - asked)

    def read_release(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """:func:`riskcore.anatomy.read_release` (``args``, ``kwargs``), computed in the
        helper: the release read against its original on the other core, beside the checks
        and the encoding of this process."""
        return self._ask(("diff", (tuple(args), kwargs)))[0]

    def reserve(self, nbytes: int) -> None:
        """Have the helper fault in ``nbytes`` of its heap for the diff that follows
        (:func:`riskcore.memory.prefault`): it answers at once, then does it, before it reads
        the next request."""
        self._ask(("reserve", int(nbytes)))

    def start_families(self, names: Sequence[str]) -> None:
        """Have the helper set up the families ``names`` (their imports: scikit-learn's take
        1.2 s), in a thread of its own: it answers at once, and a family it runs waits for
        its set-up. Once per family and helper."""
        wanted = [n for n in names if n not in self._families]
        if wanted:
            self._ask(("start_up", wanted))
            self._families.update(wanted)

    def has_families(self, names: Sequence[str]) -> bool:
        """The families ``names`` are (being) set up in the helper (:meth:`start_families`)."""
        return set(names) <= self._families

    def measure(self, name: str, inputs: Any, params: Any, threads: int | None) -> Any:
        """:func:`riskcore.measures.run_measure` in the helper, with ``threads`` threads for
        its compiled calls (the family's share of the budget in force here)."""
        return self._ask(("measure", (name, inputs, params, threads)))[0]

    def _ask(self, request: tuple[str, Any]) -> tuple[Any, float]:
        """One request and its answer; the answer's payload and when the helper was ready.
        HelperGone when the helper is not there to answer, HelperFailed when the work raised
        in it."""
        with self._lock:
            if not self.alive() or self.proc.stdin is None or self.proc.stdout is None:
                raise HelperGone(self._said())
            try:
                _send(self.proc.stdin, request)
                ready_at = self._await_ready()
                status, payload = _receive(self.proc.stdout)
            except (OSError, EOFError, pickle.PickleError) as exc:
                self.close()
                raise HelperGone(f"{type(exc).__name__}: {exc}; {self._said()}") from None
        if status != "ok":
            raise HelperFailed(str(payload))
        return payload, ready_at

    def _await_ready(self) -> float:
        """The helper's first message, that its start-up ended (read once; under the lock)."""
        if self._ready_at is None:
            assert self.proc.stdout is not None
            try:
                said, at = _receive(self.proc.stdout)
            except (OSError, EOFError, pickle.PickleError) as exc:
                self.close()
                raise HelperGone(f"{type(exc).__name__}: {exc}; {self._said()}") from None
            if said != "ready":
                self.close()
                raise HelperGone(f"it said {said!r} before it was ready")
            self._ready_at = float(at)
        return self._ready_at

    def take_back(self, timeout_s: float) -> bool:
        """In a standby, for a helper it lent to a gate process that has ended (its pipes kept
        here meanwhile): make it the spare for the next gate. The helper is asked to free its
        memory and to say which families it has set up; what it said to the ended process and
        nobody read (its start-up message; an answer to a process that ended mid-request) is
        read and dropped. False, and the helper ended, when its answer does not come within
        ``timeout_s`` or the pipe holds anything else (a request cut off mid-message)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        nonce = os.urandom(8).hex()
        fd = self.proc.stdout.fileno()
        data = bytearray()
        deadline = time.monotonic() + timeout_s
        try:
            _send(self.proc.stdin, ("back", nonce))
            while True:  # raw reads: nothing read ahead stays in a buffer of this side
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError(f"no answer within {timeout_s:.0f} s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise EOFError("it ended")
                data += chunk
                while len(data) >= _HEADER.size:
                    end = _HEADER.size + _HEADER.unpack_from(data)[0]
                    if len(data) < end:
                        break
                    said = pickle.loads(bytes(data[_HEADER.size:end]))  # noqa: S301 - ours
                    del data[:end]
                    if isinstance(said, tuple) and len(said) == 2 and said[0] == "ok" and \
                            isinstance(said[1], tuple) and said[1][:1] == (nonce,):
                        if data:
                            raise ValueError("it said more than asked")
                        self._families = set(said[1][1])
                        self._ready_at = time.time()
                        return True
        except Exception as exc:  # any other answer: a pipe out of step; a new helper is cheaper
            log.debug("a lent helper was not taken back (%s: %s)", type(exc).__name__, exc)
            self.close(wait_s=0.5)  # nothing of it is wanted: a command may be waiting
            return False

    def drop_pipes(self) -> None:
        """Close this side's pipes to the helper without ending it (a gate process that a
        standby forked holds the pipes of helpers lent to other gates: they are not its)."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _said(self) -> str:
        try:
            self._log.seek(0)
            lines = self._log.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return "its log is gone"
        return f"its last words: {lines[-1][:200]}" if lines else "it said nothing"

    def close(self, wait_s: float = 5.0) -> None:
        """End the helper: its pipes closed, ``wait_s`` seconds to leave, then killed."""
        self.drop_pipes()
        wait_or_kill(self.proc, wait_s)


class Adopted:
    """A helper process started by another process and used by this one, which inherited its
    pipes (a standby's spare helper, given to the gate process it forks:
    ``riskgate.flows.standby``). Not this process's child, it cannot be waited for: its end
    is read from a pidfd (``pidfd_open``), which a reused pid cannot fool. What
    :class:`Helper` and :func:`riskcore.processes.wait_or_kill` use of a ``Popen``."""

    def __init__(self, proc: subprocess.Popen[bytes], pidfd: int) -> None:
        self.pid = proc.pid
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self.returncode: int | None = None
        self._pidfd = pidfd

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -1  # ended; its status is its parent's to read
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired([sys.executable], timeout or 0.0)
            self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass


def adopt(helper: Helper, pidfd: int) -> None:
    """Make ``helper``, started by this process's parent (its pipes inherited), this
    process's helper (:class:`Adopted`); ``pidfd`` is the helper's (``os.pidfd_open``)."""
    if isinstance(helper.proc, subprocess.Popen):
        helper.proc = Adopted(helper.proc, pidfd)  # type: ignore[assignment]
    with _LOCK:
        _HELPER[:] = [helper]


_LOCK = threading.Lock()
_HELPER: list[Helper] = []


def start() -> None:
    """Start this process's helper unless it runs already (it imports GX at once)."""
    with _LOCK:
        if _HELPER and _HELPER[0].alive():
            return
        try:
            helper = Helper()
        except OSError as exc:
            log.warning("Great Expectations runs in this process: its helper process could "
                        "not start (%s)", exc)
            return
        _HELPER[:] = [helper]


#: the longest a family run in the helper waits for its set-up (imports) to end
START_UP_WAIT_S = 120.0
#: later gates of this process will want families in the helper (:func:`serve_families`)
_LATER_GATES = [False]


def serve_families(on: bool = True) -> None:
    """Tell this process's gates that more gates follow them in it (``riskgate gate`` with
    several configs): the first has :data:`riskcore.gate.run.IN_HELPER`'s families set up in
    the helper for the others, whatever their size. A single gate of small tables does not
    (the helper's set-up, scikit-learn's import, would take longer than it saves)."""
    _LATER_GATES[0] = on


def families_served() -> bool:
    """Whether :func:`serve_families` was asked."""
    return _LATER_GATES[0]


def current() -> Helper | None:
    """This process's helper, if one was started and is still alive."""
    with _LOCK:
        return _HELPER[0] if _HELPER and _HELPER[0].alive() else None


def stop() -> None:
    """End this process's helper (tests; a command that is done with validation)."""
    with _LOCK:
        helpers, _HELPER[:] = list(_HELPER), []
    for helper in helpers:
        helper.close()


#: optional back ends of GX that in-memory pandas checks never use: absent in the helper (GX
#: imports them under ``try``, as it does when they are not installed)
NOT_IMPORTED = ("sqlalchemy", "boto3")
#: modules GX imports at start-up but uses only in what riskgate never asks (statistical
#: expectations; the charts of the KL-divergence expectation's renderer): loaded on first use
ON_FIRST_USE = ("scipy.stats", "altair")


class OnFirstUse(types.ModuleType):
    """A stand-in for a module not imported yet: ``import`` statements bind it (it has the
    module's name and spec, so the import system does not look further), and the first
    attribute it lacks imports the real module, which takes its place in ``sys.modules`` and
    in its parent. ``importlib.util.LazyLoader`` runs the module at any attribute access,
    ``__spec__`` included, which an ``import altair as alt`` statement reads (measured: altair
    was loaded all the same, 0.2-0.25 s of CPU in every helper)."""

    def __getattr__(self, attr: str) -> Any:
        real = sys.modules.get(self.__name__)
        if real is None or real is self:
            sys.modules.pop(self.__name__, None)
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


def _lighten() -> None:
    """Keep :data:`NOT_IMPORTED` out of this process and put an :class:`OnFirstUse` stand-in
    for each of :data:`ON_FIRST_USE`. Only in the helper, before GX is imported; if a later GX
    needs one of them at import, the stand-in imports it then (the same module, only later);
    if it needs a back end it cannot have, the helper dies at start-up and validation runs in
    the parent, as for any helper that cannot start."""
    for name in NOT_IMPORTED:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    for name in ON_FIRST_USE:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        stand_in = OnFirstUse(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, stand_in)


def _serve() -> None:
    """The helper's loop: requests on stdin, answers on the original stdout; anything Great
    Expectations prints goes to stderr, never into the answers."""
    from riskcore.memory import keep_freed_memory, large_arrays_from_heap
    from riskcore.processes import exit_with_parent

    keep_freed_memory()  # as in the gate's process: the diff's arrays reuse freed memory
    large_arrays_from_heap()  # ... its large ones too, without a fault per page each time
    exit_with_parent(int(os.environ.get("RISKGATE_HELPER_PARENT", "0")) or None)
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _lighten()
    from riskcore.gate.gx_suites import gx_context, run_suites_here, warm_suites

    gx_context()  # the import, while the parent starts
    warm_suites()  # and GX's first validation
    _send(answers, ("ready", time.time()))  # the wall clock, which the parent shares
    from riskcore.anatomy import read_release  # the diff's modules, while the parent loads

    starting: list[Any] = []  # the families' set-ups asked for (each in its thread)
    set_up: set[str] = set()  # ... and their names
    while True:
        try:
            kind, payload = _receive(requests)
        except EOFError:  # the parent is gone or done
            return
        try:
            if kind == "diff":
                args, kwargs = payload
                reply: tuple[str, Any] = ("ok", read_release(*args, **kwargs))
            elif kind == "start_up":  # in a thread: the diff and the checks go on beside it
                from riskcore.measures import start_up

                starting.append(start_up(payload))
                set_up.update(payload)
                reply = ("ok", None)
            elif kind == "reserve":  # after the answer: the parent goes on meanwhile
                reply = ("ok", None)
            elif kind == "back":  # the gate it was lent to ended; its standby takes it back
                from riskcore.memory import release_memory

                release_memory(collect=True)  # an idle spare holds no gate's tables
                reply = ("ok", (payload, sorted(set_up)))
            elif kind == "measure":
                from riskcore.measures import run_measure
                from riskcore.threads import thread_budget

                name, inputs, params, threads = payload
                for began in starting:  # a set-up that hangs: the family imports its own
                    began.join(START_UP_WAIT_S)
                with thread_budget(threads or 1, models=True):
                    reply = ("ok", run_measure(name, inputs, params))
            else:
                reply = ("ok", run_suites_here(payload))
        except Exception as exc:  # the parent raises it as its own (or does the work itself)
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _send(answers, reply)
        if kind == "reserve":
            from riskcore.memory import prefault

            prefault(payload)


if __name__ == "__main__":
    _serve()
