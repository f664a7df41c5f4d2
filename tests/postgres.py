"""A throwaway PostgreSQL cluster on 127.0.0.1 for the suite's Prefect server.

Production Prefect runs on PostgreSQL (compose does too); SQLite locked under the concurrent
gate tests. ``.ci/run`` starts one cluster for the whole suite and exports its URL as
``RISKGATE_TEST_DATABASE_URL``; without that variable the suite starts its own (tests/conftest.py)
when ``initdb`` is on the PATH. Standard library only: ``.ci/run`` calls it before the project's
environment exists.

PostgreSQL refuses to run as root: as root, ``initdb`` and ``pg_ctl`` run as the ``postgres``
user when there is one, else as ``nobody``, through ``runuser``.

    python3 tests/postgres.py start DIR     # prints: export RISKGATE_TEST_DATABASE_URL=...
    python3 tests/postgres.py stop DIR
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

URL_VARIABLE = "RISKGATE_TEST_DATABASE_URL"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15", "14", "13"):
        candidate = Path(f"/usr/lib/postgresql/{version}/bin/{name}")
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(f"{name} not found: install PostgreSQL's server (initdb, pg_ctl)")


def available() -> bool:
    try:
        _tool("initdb")
        _tool("pg_ctl")
    except FileNotFoundError:
        return False
    return True


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"]
    raise RuntimeError("running as root with neither a postgres nor a nobody user")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(folder: str | os.PathLike[str]) -> str:
    """initdb (trust on loopback), pg_ctl start; returns the asyncpg URL Prefect takes."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    prefix = _as_user()
    if prefix:  # the cluster's user owns its folder
        user = pwd.getpwnam(prefix[2])
        os.chown(root, user.pw_uid, user.pw_gid)
        os.chmod(root, 0o700)
    port = _free_port()
    subprocess.run(prefix + [_tool("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                             "--no-sync", "-E", "UTF8"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    # a test database: no fsync (a crash loses nothing that matters), enough connections
    # for the server's services, the workers' runs and five concurrent gates
    options = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    subprocess.run(prefix + [_tool("pg_ctl"), "-D", str(data), "-l", str(root / "postgres.log"),
                             "-o", options, "-w", "-t", "60", "start"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    (root / "port").write_text(str(port))
    return f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"


def database_of(url: str, worker: str) -> str:
    """A database of its own for one pytest-xdist worker on the cluster ``url`` names
    (created empty, an earlier one of the same name dropped): the URL of it."""
    import asyncio

    import asyncpg  # Prefect's PostgreSQL driver: the project's environment has it

    name = "prefect_" + "".join(c for c in worker if c.isalnum())
    plain = url.replace("postgresql+asyncpg://", "postgresql://", 1)

    async def create() -> None:
        conn = await asyncpg.connect(plain)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    return url.rsplit("/", 1)[0] + "/" + name


def stop(folder: str | os.PathLike[str]) -> None:
    """pg_ctl stop (fast); the folder stays for the caller to remove."""
    data = Path(folder) / "data"
    if not (data / "postmaster.pid").exists():
        return
    subprocess.run(_as_user() + [_tool("pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                                 "-t", "30", "stop"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")


@contextmanager
def throwaway(prefix: str = "riskgate-postgres-") -> Iterator[str]:
    """A cluster of its own for the block (in a new temporary folder, where the cluster's user
    may go): its asyncpg URL; stopped and removed afterwards."""
    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        yield start(folder)
    finally:
        stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        print("usage: postgres.py start|stop DIR", file=sys.stderr)
        sys.exit(64)
    if sys.argv[1] == "start":
        print(f"export {URL_VARIABLE}={start(sys.argv[2])}")
    else:
        stop(sys.argv[2])
