"""Shared fixtures: the reference data (``tests/reference``, in the repository), the example
tables, one real Prefect server for the whole suite (started on first use, on 127.0.0.1, with
its own PREFECT_HOME, on PostgreSQL as production runs it: tests/postgres.py), and moto's S3
server. The suite reads nothing beside the repository: a file opened outside it, its
environment and the temporary folders is a failure of the whole run (:func:`outside`)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTDATA_KEYS = ("urbrur", "roof", "walls", "water", "electcon", "relat", "sex")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The suite's Prefect API is fixed before anything imports Prefect: Prefect reads its settings
# from the environment once, and threads do not inherit a temporary settings context. The
# server itself starts on first use (the prefect_server fixture).
# (this module is also imported as ``tests.conftest``: the second import keeps the first's API)
# With pytest-xdist (``make test`` runs the suite on several processes) each worker has a
# server, a home and a database of its own: the variables carry the worker's name.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_PORT_VARIABLE = "RISKGATE_TEST_PREFECT_PORT" + (f"_{WORKER}" if WORKER else "")
_HOME_VARIABLE = "RISKGATE_TEST_PREFECT_HOME" + (f"_{WORKER}" if WORKER else "")
_MADE_HOME = _PORT_VARIABLE not in os.environ
if _MADE_HOME:
    os.environ[_PORT_VARIABLE] = str(_free_port())
    # its SQLite database in memory-backed storage where there is one: a checkpoint's fsync on
    # a busy virtual disk holds the database's write lock, and every request waits for it
    _shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    os.environ[_HOME_VARIABLE] = tempfile.mkdtemp(prefix="riskgate-prefect-home-", dir=_shm)
PREFECT_PORT = int(os.environ[_PORT_VARIABLE])
PREFECT_HOME_DIR = os.environ[_HOME_VARIABLE]
os.environ["PREFECT_API_URL"] = f"http://127.0.0.1:{PREFECT_PORT}/api"
os.environ["PREFECT_HOME"] = PREFECT_HOME_DIR
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_TO_API_BATCH_INTERVAL", "0.5")
# the suite waits on verdict events some forty times: its server stores them every 0.5 s
# (Prefect's default 5 s, a few seconds per wait)
os.environ.setdefault("PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL", "0.5")
# the release watcher's schedule is created by the scheduler service: every 5 s here
# (Prefect's default 60 s) so that a test does not wait a minute for the first look
os.environ.setdefault("PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS", "5")


#: the peers' reference outputs and the data they were computed on (tests/reference/README.md)
REFERENCE = ROOT / "tests" / "reference"


def reference_dir() -> Path:
    return REFERENCE


@pytest.fixture(scope="session")
def reference() -> Path:
    return REFERENCE


@pytest.fixture(scope="session")
def testdata(reference: Path) -> pd.DataFrame:
    return pd.read_csv(reference / "datasets/sdcmicro/testdata.csv")


# ---------------------------------------------------------------- nothing beside the repo
def outside(path: str, root: Path = ROOT) -> bool:
    """A path the suite must not read: beside the repository (a sibling folder, such as a
    checkout's neighbour), never inside it, the interpreter's, the system's or a temporary
    folder."""
    try:
        resolved = Path(os.path.abspath(path))
    except (TypeError, ValueError):
        return False
    parent = root.parent
    if resolved == parent or parent not in resolved.parents:
        return False
    return resolved != root and root not in resolved.parents


#: files opened beside the repository while the suite ran (the audit hook records them)
READ_OUTSIDE: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if outside(path):
            READ_OUTSIDE.append(path)


sys.addaudithook(_audit)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """A suite that read beside the repository fails, naming what it read."""
    if READ_OUTSIDE:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "the suite read files outside the repository", red=True)
            for path in sorted(set(READ_OUTSIDE))[:20]:
                reporter.write_line(path)
        session.exitstatus = 1


#: the operations suite's files: each xdist process that runs one of them starts the suite's
#: servers, workers and gates for itself, so they are one unit of work, run one after another
#: on one process (two of them at once on two cores made every gate of both wait)
OPERATIONS_FILES = ("tests/flows/test_operations.py", "tests/flows/test_operations_faults.py",
                    "tests/flows/test_operations_rules.py")


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) never calls it
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """``--dist loadfile`` with the operations files as one unit (:data:`OPERATIONS_FILES`)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OperationsTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "operations" if path in OPERATIONS_FILES else str(super()._split_scope(
                nodeid))

    return OperationsTogether(config, log)


@pytest.fixture(scope="session")
def example_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from riskcore.examples import write_example

    return write_example(tmp_path_factory.mktemp("example"), n=3000, seed=7)


class PrefectServer:
    """A real Prefect API for the suite: its URL and its home (database, settings)."""

    def __init__(self, url: str, home: str, database: str | None = None) -> None:
        self.url, self.home, self.database = url, home, database

    def database_text(self, tables: tuple[str, ...] | None = None) -> dict[str, str]:
        """Every row of the server's database (or of ``tables``) as text, by table: what an
        attacker with the database would read. PostgreSQL's rows through asyncpg; SQLite's
        file (and its write-ahead log) as bytes decoded."""
        if not self.database:
            db = Path(self.home) / "prefect.db"
            return {f"prefect.db{suffix}": Path(f"{db}{suffix}").read_bytes().decode(
                "latin-1") for suffix in ("", "-wal") if Path(f"{db}{suffix}").exists()}
        import asyncio

        import asyncpg

        async def dump() -> dict[str, str]:
            conn = await asyncpg.connect(str(self.database).replace("+asyncpg", ""))
            try:
                names = tables or tuple(r["table_name"] for r in await conn.fetch(
                    "select table_name from information_schema.tables where "
                    "table_schema = 'public'"))
                return {name: repr([tuple(r) for r in await conn.fetch(
                    f'select * from "{name}"')]) for name in names}  # noqa: S608
            finally:
                await conn.close()

        return asyncio.run(dump())

    def env(self) -> dict[str, str]:
        """Environment for subprocesses (CLI runs, workers) that talk to this server."""
        return {**os.environ, "PREFECT_API_URL": self.url, "PREFECT_HOME": self.home,
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


@contextmanager
def _database() -> Iterator[str | None]:
    """The suite server's database: ``$RISKGATE_TEST_DATABASE_URL`` (``.ci/run`` starts that
    cluster), else a cluster of the suite's own where PostgreSQL is installed, else None
    (SQLite, said on the terminal: the operations tests are meant for PostgreSQL)."""
    from tests import postgres

    given = os.environ.get(postgres.URL_VARIABLE)
    if given:
        # a database of its own for each run (and each xdist process): a server left from an
        # earlier run (its deployments, leases, late runs) must not shape this one
        yield postgres.database_of(given, WORKER or "main")
        return
    if not postgres.available():
        yield None
        return
    with postgres.throwaway() as url:
        yield url


@pytest.fixture(scope="session")
def prefect_server(request: pytest.FixtureRequest) -> Iterator[PrefectServer]:
    from riskgate.flows.local_api import drain_prefect, private_server

    with _database() as database:
        if database is None:
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line("PostgreSQL not found: the suite's Prefect server runs on "
                                    "SQLite")
        with private_server(home=PREFECT_HOME_DIR, port=PREFECT_PORT, log=SERVER_LOG,
                            database_url=database) as url:
            yield PrefectServer(url, PREFECT_HOME_DIR, database)
            drain_prefect()


SERVER_LOG = os.path.join(PREFECT_HOME_DIR, "server.log")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What the suite's Prefect server complained of, at the end of the output (where CI's
    excerpt shows it): a timeout in a test is then read next to the server's side."""
    try:
        lines = Path(SERVER_LOG).read_text(errors="replace").splitlines()
    except OSError:
        return
    notable = [ln for ln in lines if any(w in ln for w in ("WARNING", "ERROR", "locked",
                                                           "Traceback", "took"))]
    if not notable:
        return
    terminalreporter.write_sep("-", f"the suite's Prefect server: {len(notable)} warnings or "
                                    f"errors of {len(lines)} lines ({SERVER_LOG})")
    for line in notable[-25:]:
        terminalreporter.write_line(line[:300])


def pytest_unconfigure(config: Any) -> None:
    """The suite's Prefect home (its database, in memory-backed /dev/shm) goes with the run
    that made it, after its server has stopped and its warnings have been printed."""
    if _MADE_HOME:
        shutil.rmtree(PREFECT_HOME_DIR, ignore_errors=True)


free_port = _free_port


class S3Endpoint:
    """moto in server mode: a real HTTP S3 API on loopback."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port,
                                              verbose=False)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1")

    def options(self) -> dict[str, Any]:
        # no credentials here: they come from the environment, as in production
        return {"endpoint_url": self.url, "skip_instance_cache": True}


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Endpoint]:
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)
    endpoint = S3Endpoint()
    endpoint.start()
    yield endpoint
    endpoint.stop()


POLICY: dict[str, Any] = {
    "version": 1,
    "checks": [
        {"figure": "k_anonymity.k", "min": 3},
        {"figure": "reid.pRb", "max": 0.34},
        {"figure": "reid.jRc", "max": 0.05},
        {"figure": "l_diversity.diagnosis.distinct_l", "min": 1},
        "t_closeness.t <= 0.9",
    ],
}


def example_text_tables(folder: Path, n: int, seed: int) -> dict[str, pd.DataFrame]:
    """The example generator's original and released tables, every cell as written (text,
    no missing-value parsing): what a scan of published values reads."""
    from riskcore.examples import write_example

    files = write_example(folder, n=n, seed=seed)
    read: dict[str, Any] = {"dtype": str, "keep_default_na": False}
    return {"original": pd.read_csv(files["original"], **read),
            "released": pd.read_csv(files["released"], **read)}


def gate_config(original: str, released: str, output: str, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "release_id": "itest",
        "original": original,
        "released": released,
        "output_url": output,
        "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                  "sensitive": ["diagnosis"], "weight": "weight", "household": "household_id",
                  "direct_identifiers": ["person_id"], "types": {"age": "categorical"}},
        "measures": {"k_anonymity": {}, "reid": {"threshold": 0.1}, "l_diversity": {},
                     "t_closeness": {}},
        "policy": POLICY,
        "seed": 11,
    }
    cfg.update(extra)
    return cfg


def outcome_of(state: Any) -> dict[str, Any]:
    """The outcome dict a gate flow run's final state carries."""
    from riskgate.flows.verdicts import outcome_of as flow_outcome

    data = flow_outcome(state)
    assert data is not None, f"the run ended {state.type} without an outcome: {state.message}"
    return data


def run_gate_flow(config: Any, **kwargs: Any) -> dict[str, Any]:
    """Run the release-gate flow in this process (against the suite's Prefect server) and
    return its outcome, with the final state's type and name added."""
    from riskgate.flows.cli.gate import without_default_heartbeats
    from riskgate.flows.release_gate import release_gate

    with without_default_heartbeats():  # as riskgate gate runs it
        state = release_gate(config=config, return_state=True, **kwargs)
    return {**outcome_of(state), "state_type": state.type.value, "state_name": state.name}


def wait_for_paused_run(name_like: str, timeout_s: float = 120.0) -> Any:
    """The first flow run whose name contains ``name_like`` once it is PAUSED (AssertionError
    after ``timeout_s``)."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    wanted = FlowRunFilter(
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])),
        name=FlowRunFilterName(like_=name_like))
    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(flow_run_filter=wanted)
            if runs:
                return runs[0]
            time.sleep(0.5)
    raise AssertionError(f"no run named like '{name_like}' paused within {timeout_s:.0f} s")


def unprivileged(cmd: list[str], env: dict[str, str], home: Path
                 ) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """A command (a worker, say) as a user that cannot read root's files: when this suite runs
    as root, as ``nobody``, with Debian's Python of the same version reading this environment's
    packages (the interpreter under /root is out of nobody's reach); else as it is. Returns the
    command, its environment and the Popen keywords that switch the user (Popen changes the
    user itself and execs: killing the process kills the worker, no runuser in between).
    ``home`` becomes its HOME and PREFECT_HOME, writable by it."""
    import sysconfig

    home.mkdir(parents=True, exist_ok=True)
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.geteuid() != 0 or not os.path.exists(python):
        return cmd, {**env, "PREFECT_HOME": str(home)}, {}
    shutil.chown(home, "nobody", "nogroup")
    (home / "tmp").mkdir(exist_ok=True)
    shutil.chown(home / "tmp", "nobody", "nogroup")
    site = sysconfig.get_paths()["purelib"]
    env = {**env, "PYTHONPATH": os.pathsep.join([site, str(ROOT)]), "HOME": str(home),
           "PREFECT_HOME": str(home), "NUMBA_CACHE_DIR": str(home / "numba"),
           "TMPDIR": str(home / "tmp")}
    if cmd and cmd[0] == sys.executable:
        cmd = [python, *cmd[1:]]
    return cmd, env, {"user": "nobody", "group": "nogroup", "extra_groups": []}


def child_processes(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, read from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def runs_as_another_user() -> bool:
    """:func:`unprivileged` really switches the user here."""
    return os.geteuid() == 0 and os.path.exists(
        f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files whose tests wait on the clock (marked ``waits``: a 60 s lease, a lost run's
    heartbeat silence, a pipeline's timeout) first, the rest in their order: the Makefile runs
    the files in this order over three processes on two cores, and a wait started early is
    filled by the other files' work; one started last is the suite's tail."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("waits") else 1)
