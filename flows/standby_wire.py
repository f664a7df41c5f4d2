"""What ``riskgate standby`` and a command share: where its socket is, when a command may use
it, and their messages. Standard library only: a command reads this before it imports
anything else (:mod:`riskgate.flows.launch`).

A standby is a process that has imported what a gate run needs (Prefect, pandas, the
families' scikit-learn and numba: 4.6 s of one core's import time in each ``riskgate gate``
process, measured with ``python -X importtime``) and forks a gate process per command that
asks it. A forked gate is what a command would run, only if it is what the command would run:

- the same code: the Python executable and riskgate's source files (their newest change) are
  part of the stamp the two compare;
- the same environment, every variable (Prefect reads its settings, the API's URL among them,
  when it is imported), but those a shell sets per command (:data:`PER_COMMAND`), which the
  command's values replace in the gate process;
- the same user: each side reads the other's user id from the socket (``SO_PEERCRED``) and
  talks only to its own; the socket's folder must be the user's and no one else's.

Otherwise the command runs itself, as without a standby, and says why in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: the variable naming the standby's socket (a path): set, ``riskgate gate`` asks it first
ENV = "RISKGATE_STANDBY"
#: variables a shell sets per command: not compared; the command's own go to its gate process
PER_COMMAND = ("_", "PWD", "OLDPWD", "SHLVL", "COLUMNS", "LINES", "TERM")
#: the command a Prefect worker starts for each flow run of a pool set up with
#: ``riskgate deploy --standby`` (:mod:`riskgate.flows.launch`)
FLOW_RUN = "flow-run"
#: what a Prefect worker sets for each flow run it starts (Prefect's own list of the variables
#: its runner owns, ``prefect.runner._workspace_supervisor``, less PATH and the API's): the
#: run's id, its control channel, attribution, who runs its hooks, and the work pool's heartbeat.
#: Not compared; a flow run's own go to its forked process (``riskgate flow-run``)
PER_FLOW_RUN = ("PREFECT__FLOW_RUN_ID", "PREFECT__CONTROL_PORT", "PREFECT__CONTROL_TOKEN",
                "PREFECT__WORKER_ID", "PREFECT__WORKER_NAME", "PREFECT__FLOW_ID",
                "PREFECT__FLOW_NAME", "PREFECT__DEPLOYMENT_ID", "PREFECT__DEPLOYMENT_NAME",
                "PREFECT__ENABLE_CANCELLATION_AND_CRASHED_HOOKS", "PREFECT__STORAGE_BASE_PATH",
                "PREFECT__FLOW_ENTRYPOINT", "PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
#: what every command sets before Prefect is imported (none of them sends analytics)
ALWAYS = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GX_ANALYTICS_ENABLED": "False"}
#: ... and without ``--verbose``: the summary tables replace Prefect's console log (the API's
#: log, which the UI shows, is unchanged)
QUIET = {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
         "PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL": "CRITICAL",
         "PREFECT_LOGGING_HANDLERS_CONSOLE_TASK_RUNS_LEVEL": "CRITICAL"}
#: the longest path a Unix socket may have (Linux's sun_path, less its final NUL)
MAX_PATH = 107
#: the longest a message may be (a command's arguments and a few paths)
MAX_MESSAGE = 1 << 20
_LENGTH = struct.Struct("!I")


def command_environ(environ: Mapping[str, str], verbose: bool) -> dict[str, str]:
    """The environment a command runs its work in: ``environ`` with :data:`ALWAYS` (and,
    without ``verbose``, :data:`QUIET`) where it does not set them."""
    out = dict(environ)
    for key, value in {**ALWAYS, **({} if verbose else QUIET)}.items():
        out.setdefault(key, value)
    return out


def code_stamp() -> str:
    """The Python executable, and each of riskgate's source files (``riskcore``, ``flows``,
    ``tasks``: path, size, last change): a standby started before the code changed is not the
    code a command would run."""
    here = os.path.dirname(os.path.abspath(__file__))
    roots = [here, os.path.join(os.path.dirname(here), "tasks")]
    try:
        import importlib.util

        spec = importlib.util.find_spec("riskcore")
        if spec is not None and spec.origin:
            roots.append(os.path.dirname(spec.origin))
    except (ImportError, ValueError):
        pass
    h = hashlib.sha256(sys.executable.encode())
    stack = [r for r in roots if os.path.isdir(r)]
    seen: list[tuple[str, int, int]] = []
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    stack.append(entry.path)
                elif entry.name.endswith((".py", ".json", ".yaml", ".csv")):
                    st = entry.stat()
                    seen.append((entry.path, st.st_size, st.st_mtime_ns))
    for path, size, mtime in sorted(seen):
        h.update(f"{path}|{size}|{mtime}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def fingerprint(environ: Mapping[str, str], stamp: str, flow_run: bool = False) -> str:
    """A digest of the code (:func:`code_stamp`) and of ``environ`` but :data:`PER_COMMAND`
    (and, for a worker's flow run, :data:`PER_FLOW_RUN`): equal, a standby's gate process
    runs what the command would."""
    h = hashlib.sha256(stamp.encode())
    skip = {*PER_COMMAND, *(PER_FLOW_RUN if flow_run else ())}
    for key in sorted(k for k in environ if k not in skip):
        value = settings_value(key, environ[key]) if flow_run else environ[key]
        h.update(b"\0" + key.encode("utf-8", "surrogateescape") + b"=" +
                 value.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def settings_value(key: str, value: str) -> str:
    """A Prefect setting's value as its meaning (``true`` for True, ``1.0`` for 1): a worker
    writes its settings into each flow run's environment again, as Prefect serializes them."""
    if not key.startswith("PREFECT_") or key.startswith("PREFECT__"):
        return value
    if value.lower() in ("true", "false"):
        return value.lower()
    try:
        return repr(float(value))
    except ValueError:
        return value


def unsafe_folder(path: str) -> str | None:
    """Why the socket at ``path`` cannot be trusted, or None: its folder must exist, be a
    real folder (not a link), belong to this user and be closed to everyone else (a socket
    others can reach or replace would run their commands, or answer ours)."""
    if not os.path.isabs(path):
        return f"${ENV}={path!r} is not an absolute path; give the socket's full path"
    if len(os.fsencode(path)) > MAX_PATH:
        return f"${ENV}={path!r} is too long for a Unix socket (at most {MAX_PATH} bytes); " \
               "use a shorter path"
    folder = os.path.dirname(path)
    try:
        st = os.lstat(folder)
    except OSError as exc:
        return f"the folder of ${ENV}, {folder}, cannot be read ({exc.strerror}); create it " \
               "with mode 700"
    if not stat.S_ISDIR(st.st_mode):
        return f"the folder of ${ENV}, {folder}, is not a folder (a link?); use a real one"
    if st.st_uid != os.getuid():
        return f"the folder of ${ENV}, {folder}, belongs to user {st.st_uid}, not to you " \
               f"({os.getuid()}); use a folder of your own, mode 700"
    if st.st_mode & 0o077:
        return f"the folder of ${ENV}, {folder}, is open to others (mode " \
               f"{stat.S_IMODE(st.st_mode):o}); chmod 700 it"
    return None


def _stat_fields(pid: int | str) -> list[str]:
    """The fields of Linux's /proc/PID/stat after the process's name (OSError elsewhere)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float | None:
    """The CPU seconds (user and system) a process has used; None where it cannot be read."""
    try:
        fields = _stat_fields(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def child_pids(pid: int) -> list[int]:
    """The processes a process started (every thread's, Linux's /proc); none where unknown."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(child) for child in f.read().split()]
    except (OSError, ValueError):
        pass
    return found


def process_age() -> float:
    """Seconds since this process started (Linux's /proc), 0 where it cannot be read."""
    try:
        fields = _stat_fields("self")
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    """One message (JSON, its length first), with ``fds`` passed along (SCM_RIGHTS)."""
    data = json.dumps(message).encode()
    head = _LENGTH.pack(len(data))
    if fds:
        socket.send_fds(sock, [head], list(fds))
        sock.sendall(data)
    else:
        sock.sendall(head + data)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors passed with it; (None, []) when the other side closed
    the socket before a whole message."""
    fds: list[int] = []
    if max_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, _LENGTH.size, max_fds)
    else:
        head = sock.recv(_LENGTH.size)
    head += _read(sock, _LENGTH.size - len(head)) if head else b""
    if len(head) < _LENGTH.size:
        return None, fds
    size = _LENGTH.unpack(head)[0]
    if size > MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes (at most {MAX_MESSAGE})")
    data = _read(sock, size)
    if len(data) < size:
        return None, fds
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a message that is not a JSON object")
    return message, fds


def _read(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
