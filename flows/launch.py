"""The ``riskgate`` console script: a ``riskgate gate`` is run by the standby named in
``$RISKGATE_STANDBY`` when there is one it may use (:mod:`.standby_wire`), else here, as every
other command. So is ``riskgate flow-run``, the command a Prefect worker starts for each flow
run of a pool set up with ``riskgate deploy --standby`` (without a standby it becomes Prefect's
own ``python -m prefect.engine``). This module imports the standard library alone until it
knows which."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Any, NoReturn

from . import standby_wire as wire

#: the exit code of an error (:mod:`riskgate.flows.cli`)
EXIT_ERROR = 3
#: the longest the standby may take to answer a command (it forks at once)
ANSWER_S = 10.0


def run() -> NoReturn:
    """Run the command: through a standby where it may, else in this process (a worker's
    flow run: as Prefect's engine, which it then is)."""
    code = in_standby(sys.argv[1:])
    if code is not None:
        os._exit(code)
    if sys.argv[1:2] == [wire.FLOW_RUN] and not {"-h", "--help"} & set(sys.argv[2:]):
        run_id = [a for a in sys.argv[2:] if not a.startswith("-")][:1]  # not --verbose
        os.execv(sys.executable, [sys.executable, "-m", "prefect.engine", *run_id])
    from .cli import run as run_here

    run_here()


def in_standby(argv: list[str]) -> int | None:
    """The exit code of ``riskgate gate`` (or ``flow-run``) run by the standby, or None when
    this process should run the command itself (no standby named, another command,
    ``--verbose`` or ``--help``, or a standby it may not use: that one says why on stderr)."""
    path = os.environ.get(wire.ENV, "").strip()
    if not path or argv[:1] not in (["gate"], [wire.FLOW_RUN]) or \
            {"-h", "--help", "--verbose"} & set(argv[1:]):
        return None
    flow_run = argv[:1] == [wire.FLOW_RUN]
    started = time.time() - wire.process_age()
    why = wire.unsafe_folder(path)
    if why is not None:
        return _here(why)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_S)
        sock.connect(path)
        if wire.peer_uid(sock) != os.getuid():
            sock.close()
            return _here(f"the standby at {path} runs as another user")
        env = wire.command_environ(os.environ, verbose=False)
        per_command = wire.PER_COMMAND + (wire.PER_FLOW_RUN if flow_run else ())
        wire.send(sock, {"argv": argv, "cwd": os.getcwd(), "umask": _umask(),
                         "started": started,
                         "fingerprint": wire.fingerprint(env, wire.code_stamp(), flow_run),
                         "per_command": {k: os.environ.get(k) for k in per_command}},
                  fds=[0, 1, 2])
        answer, _ = wire.receive(sock)
    except (OSError, ValueError) as exc:
        sock.close()
        return _here(f"no standby answers at {path} ({_reason(exc)})")
    if answer is None or "pid" not in answer:
        sock.close()
        return _here(str((answer or {}).get("refused", "the standby closed the connection")))
    return _wait(sock, int(answer["pid"]))


def _wait(sock: socket.socket, pid: int) -> int:
    """The gate process's exit code, once it ends; SIGINT and SIGTERM sent here go to it."""
    def forward(signum: int, frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    sock.settimeout(None)
    try:
        answer, _ = wire.receive(sock)
    except (OSError, ValueError):
        answer = None
    finally:
        sock.close()
    if answer is None or not isinstance(answer.get("exit"), int):
        sys.stderr.write(f"error: the gate process {pid} of the standby ended without an "
                         "exit code (killed?), so its run may have no verdict; run it again\n")
        return EXIT_ERROR
    return int(answer["exit"])


def _here(why: str) -> int | None:
    """None (the command runs in this process), having said why on stderr."""
    sys.stderr.write(f"riskgate standby not used: {why}; the gate runs in this process\n")
    return None


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__
