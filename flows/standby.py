"""``riskgate standby``: a process that has imported what a gate needs and forks a gate
process for each ``riskgate gate`` that asks it (see :mod:`.standby_wire` for when a command
may; :mod:`.launch` is the command's side).

A gate process started by a command spends 4.6 s of one core importing Prefect, pandas,
scikit-learn and numba (``python -X importtime``), 2.2 s of it before its flow starts, and the
rest beside its tables' reading, where it holds the interpreter's lock; Great Expectations'
helper process imports for 1.7 s more. A fork of a process that did all that starts its flow
at once, and a spare helper, warmed before it asked, is given to it: one started between
gates (none running, or each one idle: :meth:`Standby._gates_working`), or the one the last
gate used, taken back once that gate's process has exited (:meth:`Standby._take_back`; gates
one after another each waited 2 s for a new helper's imports before).

The forked process is the command's gate process: the command's standard streams (passed
over the socket), its folder, umask, arguments and per-command variables; it tells the command
its exit code when it is done, and it stops (an ERROR decision, as any stopped gate) when the
command is gone. It runs as one: nothing of it is shared with the standby after the fork
(its helper, whose pipes the standby keeps, serves it alone until it has exited), and
the standby forks only while it runs no thread but its main one (forking a process whose
other threads hold locks leaves them held forever in the child).
"""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from riskcore.errors import ConfigError
from riskcore.gate import gx_helper

from . import standby_wire as wire

#: how often the standby looks for ended gate processes while no command asks
POLL_S = 0.5
#: the longest a command may take to send its request once connected
REQUEST_S = 5.0
#: the longest the standby waits for a lent helper's answer when it takes it back (an idle
#: helper answers in milliseconds; one still starting, after its imports: 2-3 s). With the
#: helper's end, well within the command's wait for its answer (``launch.ANSWER_S``)
TAKE_BACK_S = 3.0
#: a gate process that fails before its command runs: an error (:mod:`.cli`'s exit codes)
EXIT_ERROR = 3
#: a gate process is idle when it used less than IDLE_SHARE of a core over the last LOOK_S
#: seconds (a gate paused for review waits minutes or hours, its threads waking now and then)
IDLE_SHARE, LOOK_S = 0.05, 2.0


@dataclass(frozen=True)
class Forked:
    """In a gate process the standby forked: the command it runs for (its arguments, when it
    started: the epoch) and how it tells the command its exit code."""

    argv: list[str]
    started: float
    tell: Callable[[int], None]


_FORKED: list[Forked] = []


def forked() -> Forked | None:
    """The command this process was forked to run, in a standby's gate process; else None."""
    return _FORKED[0] if _FORKED else None


def warm_families() -> None:
    """Every family's one-off set-up (scikit-learn's import, numba's registries), in this
    process's main thread: no other thread runs when it forks."""
    from riskcore.measures import BY_NAME, set_up

    set_up(BY_NAME)


class Standby:
    """The listening socket, the gate processes it forked, and the spare helper."""

    def __init__(self, path: str, say: Callable[[str], None]) -> None:
        why = wire.unsafe_folder(path)
        if why is not None:
            raise ConfigError(why)
        self.path = path
        self.say = say
        self.pid = os.getpid()
        self.children: set[int] = set()
        self.spare: gx_helper.Helper | None = None
        #: the spare each running gate process was given, its pipes kept here so that it
        #: outlives that process and serves the next gate (:meth:`_take_back`)
        self.lent: dict[int, gx_helper.Helper] = {}
        #: each gate process's readings (when, CPU seconds with its helpers), those of the
        #: last LOOK_S seconds and the newest one before them (:meth:`_gates_working`)
        self.cpu_seen: dict[int, list[tuple[float, float]]] = {}
        env, code = wire.command_environ(os.environ, verbose=False), wire.code_stamp()
        self.stamp = wire.fingerprint(env, code)
        #: ... a worker's flow run (``riskgate flow-run``): the worker's per-run variables aside,
        #: and its settings as a worker writes them into a flow run's environment (those read
        #: from a profile too)
        self.flow_run_stamp = wire.fingerprint({**_settings_environ(), **env}, code,
                                               flow_run=True)
        if os.path.exists(path):  # a standby that ended without removing it, or one running
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)
            else:
                probe.close()
                raise ConfigError(f"a standby already listens at {path} (${wire.ENV}); stop "
                                  "it first, or name another socket")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            self.sock.bind(path)
        finally:
            os.umask(mask)
        self.sock.listen(16)

    def serve(self) -> Forked | None:
        """Answer commands until SIGTERM or SIGINT: None then; in a gate process it forked,
        the command to run (the gate process returns from here)."""
        ending: list[int] = []

        def end(signum: int, frame: Any) -> None:
            ending.append(signum)

        signal.signal(signal.SIGTERM, end)
        signal.signal(signal.SIGINT, end)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        try:
            while not ending:
                self._reap()
                if self.spare is None and not self._gates_working():
                    self.spare = self._start_spare()
                try:
                    ready = select.select([self.sock], [], [], POLL_S)[0]
                except InterruptedError:
                    continue
                if ready:
                    command = self._answer()
                    if command is not None:
                        return command
            return None
        finally:
            self.close()

    def _gates_working(self) -> bool:
        """Whether a gate process is at work: a spare helper started then would take a core
        from it (its imports: 2 s of CPU on the critical path of the gate). A process just
        forked, or one that used more than :data:`IDLE_SHARE` of a core over the last
        :data:`LOOK_S` seconds, is; one paused for review is not, and gates that follow it
        are given a spare as if none ran (each waited for a helper of its own before). Where
        a process's CPU cannot be read (no /proc), any running gate counts as working."""
        now = time.monotonic()
        working = False
        for pid in self.children:
            used = self._gate_cpu(pid)
            seen = self.cpu_seen.setdefault(pid, [])
            if used is None:
                working = True
                continue
            seen.append((now, used))
            while len(seen) > 1 and seen[1][0] <= now - LOOK_S:
                seen.pop(0)  # the oldest reading at least LOOK_S old is the one compared
            then, before = seen[0]
            if now - then < LOOK_S or not 0 <= used - before <= IDLE_SHARE * (now - then):
                working = True  # (less than before: a helper of its ended, read again)
        for pid in set(self.cpu_seen) - self.children:
            del self.cpu_seen[pid]
        return working

    def _gate_cpu(self, pid: int) -> float | None:
        """The CPU seconds of a gate process with its helpers: the one lent to it and any it
        started itself. A gate waiting for its helper's checks or for a family run there
        (the ALC, on a survey's tables) is at work: a spare warmed then slowed that helper
        (bench/many.py: eight releases through a standby took 101 s, not 74)."""
        used = wire.cpu_seconds(pid)
        if used is None:
            return None
        lent = self.lent.get(pid)
        for helper in [*wire.child_pids(pid), *([lent.proc.pid] if lent is not None else [])]:
            used += wire.cpu_seconds(helper) or 0.0
        return used

    def _start_spare(self) -> gx_helper.Helper | None:
        try:
            return gx_helper.Helper()
        except OSError as exc:
            self.say(f"no spare helper process ({exc}); each gate starts its own")
            return None

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self._take_back(self.lent.pop(pid, None), os.WIFEXITED(status))

    def _take_back(self, helper: gx_helper.Helper | None, exited: bool) -> None:
        """The helper lent to a gate process that has ended: the next gate's spare if that
        process exited (a killed one may have left a request half-written), none is spare yet
        and the helper answers at once; else ended. A helper taken back has Great
        Expectations imported and the families the gates asked it for set up: gates that
        follow each other closely no longer wait for those imports (bench/many.py)."""
        if helper is None:
            return
        if exited and self.spare is None and helper.alive() and \
                helper.take_back(TAKE_BACK_S):
            self.spare = helper
        else:
            helper.close(wait_s=0.5)  # a command may be waiting (:meth:`_fork`)

    def _answer(self) -> Forked | None:
        """One command's request: refused, or a gate process forked for it (which returns
        its :class:`Forked`)."""
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return None
        fds: list[int] = []
        command: Forked | None = None
        try:
            if wire.peer_uid(conn) != os.getuid():
                return None  # another user's process: no answer at all
            conn.settimeout(REQUEST_S)
            request, fds = wire.receive(conn, max_fds=3)
            if request is None or len(fds) != 3:
                return None
            refused = self._refusal(request)
            if refused:
                wire.send(conn, {"refused": refused})
                return None
            command = self._fork(conn, fds, request)
            return command
        except (OSError, ValueError) as exc:
            if os.getpid() != self.pid:  # a gate process that could not become one
                os._exit(EXIT_ERROR)
            self.say(f"a command's request could not be read ({exc})")
            return None
        finally:
            if command is None:  # the gate process keeps its command's socket
                for fd in fds:
                    os.close(fd)
                conn.close()

    def _refusal(self, request: dict[str, Any]) -> str | None:
        argv, cwd = request.get("argv"), request.get("cwd")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or \
                not isinstance(cwd, str) or not isinstance(request.get("umask", 0), int) or \
                not isinstance(request.get("started", 0.0), (int, float)) or \
                not isinstance(request.get("per_command") or {}, dict):
            return "a request that is not a command's (its arguments, folder, umask)"
        if argv[:1] != ["gate"] and not _a_flow_run(argv):
            return "a standby runs `riskgate gate` and a worker's `riskgate flow-run` alone"
        stamp = self.flow_run_stamp if _a_flow_run(argv) else self.stamp
        if request.get("fingerprint") != stamp:
            return (f"the standby at {self.path} runs other code or another environment than "
                    "this command (start it again from this shell, or beside the worker)")
        if threading.active_count() > 1:
            return f"the standby at {self.path} runs threads and cannot fork safely"
        return None

    def _fork(self, conn: socket.socket, fds: list[int], request: dict[str, Any]
              ) -> Forked | None:
        """Fork a gate process for ``request``: None here, its command there."""
        # a command that follows another's exit code finds its gate process ended, most
        # often, but not yet reaped (this loop looks every POLL_S): its helper is the spare
        self._reap()
        spare, self.spare = self.spare, None
        pidfd = -1
        if spare is not None:
            try:
                pidfd = os.pidfd_open(spare.proc.pid)
            except OSError:
                spare.close()
                spare = None
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                return self._become_gate(conn, fds, request, spare, pidfd)
            except BaseException:  # the command, told nothing, runs itself (its folder gone?)
                os._exit(EXIT_ERROR)
        self.children.add(pid)
        asker = "a worker's flow run" if _a_flow_run(request["argv"]) else "a command"
        self.say(f"gate process {pid} forked for {asker}")
        if spare is not None:  # the gate process has it now; its pipes stay open here too
            os.close(pidfd)
            self.lent[pid] = spare
        return None

    def _become_gate(self, conn: socket.socket, fds: list[int], request: dict[str, Any],
                     spare: gx_helper.Helper | None, pidfd: int) -> Forked:
        """In the forked process: the command's standard streams, folder, umask and
        per-command variables, the spare helper, and a watch on the command."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.sock.close()
        self.children.clear()
        for other in self.lent.values():  # other gates' helpers
            other.drop_pipes()
        self.lent.clear()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        fds.clear()
        os.chdir(request["cwd"])
        os.umask(int(request.get("umask", 0o022)))
        argv = [str(a) for a in request["argv"]]
        own = wire.PER_COMMAND + (wire.PER_FLOW_RUN if _a_flow_run(argv) else ())
        for key, value in dict(request.get("per_command") or {}).items():
            if key in own:
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = str(value)
        sys.argv = ["riskgate", *argv]
        sys.stdout.reconfigure(line_buffering=sys.stdout.isatty())  # type: ignore[union-attr]
        if spare is not None:
            gx_helper.adopt(spare, pidfd)
        else:
            gx_helper.start()
        conn.settimeout(None)
        wire.send(conn, {"pid": os.getpid()})
        leaving = _stop_when_gone(conn)

        def tell(code: int) -> None:
            # everything is written: the command, once told, closes its end, which must not
            # stop this process on its way out (seen: the SIGTERM's traceback, after the
            # exit code, on the command's stderr)
            leaving.set()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                wire.send(conn, {"exit": int(code)})
            except OSError:
                pass

        command = Forked(argv, float(request.get("started") or time.time()), tell)
        _FORKED[:] = [command]
        return command

    def close(self) -> None:
        """The socket closed (and, in the standby itself, removed); the spare ended."""
        self.sock.close()
        if os.getpid() == self.pid:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        for helper in self.lent.values():  # the gates that have them end with this process
            helper.drop_pipes()
        self.lent.clear()


def _settings_environ() -> dict[str, str]:
    """Prefect's settings set here (from the environment or a profile), as variables: what a
    worker of this environment adds to each flow run's."""
    from prefect.settings import get_current_settings

    return {k: str(v) for k, v in
            get_current_settings().to_environment_variables(exclude_unset=True).items()
            if v is not None}


def _a_flow_run(argv: list[str]) -> bool:
    """``argv`` is a worker's ``riskgate flow-run`` (its flow run's id, if given, a UUID)."""
    if argv[:1] != [wire.FLOW_RUN] or len(argv) > 2:
        return False
    try:
        return len(argv) == 1 or bool(uuid.UUID(argv[1]))
    except ValueError:
        return False


def _stop_when_gone(conn: socket.socket) -> threading.Event:
    """SIGTERM this process when its command is gone (its end of the socket closed) before
    the returned event is set (the process is telling it its exit code): the gate stops as it
    would if the command itself had been stopped."""
    watched = os.dup(conn.fileno())
    leaving = threading.Event()

    def watch() -> None:
        try:
            while os.read(watched, 1):
                pass
        except OSError:
            pass
        if not leaving.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="riskgate-command-gone", daemon=True).start()
    return leaving


def serve(say: Callable[[str], None], warm: Callable[[], None]) -> Forked | None:
    """``riskgate standby``: ``warm()`` (the imports), then answer commands at
    ``$RISKGATE_STANDBY`` until stopped (None); in a gate process it forked, the command to
    run. A config error is raised before it listens."""
    path = os.environ.get(wire.ENV, "").strip()
    if not path:
        raise ConfigError(f"${wire.ENV} is not set: set it to the socket's path (in a folder "
                          "of yours, mode 700), here and where the gates are run")
    t0 = time.perf_counter()
    standby = Standby(path, say)
    warm()
    warm_families()
    gc.collect()
    gc.freeze()  # what was imported stays shared with the gate processes, page for page
    say(f"standby ready at {path} (pid {os.getpid()}, warmed in "
        f"{time.perf_counter() - t0:.1f} s); `riskgate gate` with ${wire.ENV} set runs here")
    command = standby.serve()
    if command is None:
        say("standby stopped")
    return command
