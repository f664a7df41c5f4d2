"""Deployed gates through a Prefect worker: each flow run started with Prefect's command (a new
``python -m prefect.engine`` process that imports everything) against ``riskgate flow-run``
forked from a standby beside the worker (``riskgate deploy --standby``).

Two process pools on one private Prefect server (on a throwaway PostgreSQL cluster, as
production runs it: :func:`server_database`), one with each command, and a worker on each,
started with one environment (the standby's too), asking for runs every second
(``PREFECT_WORKER_QUERY_SECONDS=1``; Prefect's default, 10 s, adds 0-10 s to either). The
flow is the gate's (``release_gate`` with the demo's config as its parameter: the deployed
``deployed_gate`` does the same work under a pinned config). The runs alternate between the
pools. For each: wall from the run's creation to its final state (the API polled every 0.1 s),
the gate's data work (:func:`bench.gate._work`), around = wall - data work, and "start" from
the run's creation to its Running state (the worker's pick-up, the process start and the
flow's load). Target (issue 56): around within 2 s of the data work for the 6,000-row demo.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.around import demo_config, start_standby
from bench.common import OUT, print_table
from bench.gate import _work

RUNS = 4
POOLS = {"Prefect's command": False, "riskgate flow-run, forked from a standby": True}


def deploy_gate_pool(name: str, standby: bool) -> Any:
    """A process pool ``name`` (with ``riskgate deploy``'s job template: the heartbeat, and
    ``riskgate flow-run`` as its command when ``standby``) and a deployment of the gate's flow
    to it, taking its config as a parameter; the deployment's id."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    from riskgate.flows.cli.ops import job_template

    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=(
            job_template(ProcessWorker.get_default_base_job_template(), standby))))
        flow_id = client.create_flow_from_name("release-gate")
        return client.create_deployment(flow_id=flow_id, name=name, work_pool_name=name,
                                        pull_steps=[],
                                        entrypoint="riskgate.flows.release_gate.release_gate")


def _one(deployment: Any, config: Path) -> tuple[float, float, float, str]:
    """(wall, data work, start, verdict) of one run."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    t0 = time.time()
    run = run_deployment(deployment, parameters={"config": str(config)}, timeout=0)
    with get_client(sync_client=True) as client:
        while True:
            state = client.read_flow_run(run.id).state
            if state is not None and state.is_final():
                break
            if time.time() - t0 > 300:
                raise SystemExit(f"run {run.id} did not end: {state}")
            time.sleep(0.1)
        wall = time.time() - t0
        done = client.read_flow_run(run.id)
    start = (done.start_time.timestamp() - t0) if done.start_time else float("nan")
    decisions = sorted(Path(OUT / "triggered" / "out").rglob("decision.json"),
                       key=lambda p: p.stat().st_mtime)
    decision = json.loads(decisions[-1].read_text())
    assert decision["flow_run_id"] == str(run.id), "another run's decision"
    return wall, _work(decision["timings"]), start, decision["verdict"]


@contextmanager
def server_database() -> Iterator[str | None]:
    """The private server's database: ``$BENCH_DATABASE_URL``, else a throwaway PostgreSQL
    cluster (tests/postgres.py) when ``initdb`` is here, as production and compose run Prefect;
    else None (SQLite in the server's home). On SQLite, with two workers asking every second,
    Prefect's server held its write lock for 60 s at times (its log: "database is locked",
    then a 60,214 ms ``mark_work_queues_ready``; Prefect issue #23051): one run in 8-12 then
    waited a minute for its start or its last writes, whichever pool it was in."""
    from tests import postgres

    given = os.environ.get("BENCH_DATABASE_URL")
    if given or not postgres.available():
        yield given
        return
    with postgres.throwaway("riskgate-bench-pg-") as url:
        yield url


def main() -> None:
    from riskgate.flows.local_api import private_server

    folder = OUT / "triggered"
    folder.mkdir(parents=True, exist_ok=True)
    import yaml

    doc = yaml.safe_load(demo_config().read_text())
    doc["output_url"] = str(folder / "out")
    config = folder / "gate.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    socket_dir = tempfile.mkdtemp(prefix="rg-trig-")
    env = {"RISKGATE_STANDBY": os.path.join(socket_dir, "s.sock"),
           "PREFECT_WORKER_QUERY_SECONDS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    results: dict[str, list[tuple[float, float, float, str]]] = {k: [] for k in POOLS}
    loads: dict[str, list[float]] = {k: [] for k in POOLS}
    from prefect.settings import PREFECT_API_URL, temporary_settings

    home = folder / "prefect-home"
    shutil.rmtree(home, ignore_errors=True)  # a new server: the last run's pools stay in its
    # database, and creating them again fails (bench/triggered.py's second run did)
    server_log = folder / "server.log"
    server_log.unlink(missing_ok=True)
    n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    with server_database() as database_url, \
            private_server(home=str(home), log=str(server_log),
                           database_url=database_url) as api, \
            temporary_settings(updates={PREFECT_API_URL: api}):  # Prefect read it at import
        os.environ.update({**env, "PREFECT_API_URL": api})
        database = "PostgreSQL" if (database_url or "").startswith("postgresql") else "SQLite"
        deployments = {label: deploy_gate_pool(f"bench-{i}", standby)
                       for i, (label, standby) in enumerate(POOLS.items())}
        standby = start_standby(env["RISKGATE_STANDBY"], folder / "standby.log")
        workers = []
        for i in range(len(POOLS)):
            with open(folder / f"worker-{i}.log", "wb") as log:
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "prefect", "worker", "start", "--pool",
                     f"bench-{i}"], env=os.environ.copy(), cwd=folder, stdout=log,
                    stderr=subprocess.STDOUT))
        try:
            time.sleep(5)  # the workers are up
            for i in range(n_runs):
                order = list(POOLS) if i % 2 == 0 else list(reversed(POOLS))
                for label in order:
                    loads[label].append(os.getloadavg()[0])
                    results[label].append(_one(deployments[label], config))
                    print(label, [round(x, 2) if isinstance(x, float) else x
                                  for x in results[label][-1]], flush=True)
                    time.sleep(2)
        finally:
            for worker in workers:
                worker.kill()
                worker.wait(30)
            standby.terminate()
            standby.wait(30)
    forked = [ln for ln in (folder / "standby.log").read_text().splitlines()
              if "forked for a worker's flow run" in ln]
    assert len(forked) == n_runs, "a run of the standby's pool was not forked"
    rows, record = [], {}
    base = statistics.median(w for w, *_ in results[next(iter(POOLS))])
    for label, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        work = statistics.median(r[1] for r in runs)
        start = statistics.median(r[2] for r in runs)
        around = wall - work
        rows.append([label, f"{wall:.2f}", f"{work:.2f}", f"{around:.2f}", f"{start:.2f}",
                     f"{base / wall:.2f}x", "<= 2 s", "yes" if around <= 2.0 else "no",
                     "/".join(sorted({r[3] for r in runs})),
                     f"{statistics.median(loads[label]):.2f}"])
        record[label] = {"runs": runs, "wall_s": wall, "data_work_s": work, "around_s": around,
                         "start_s": start}
    text = print_table(
        f"deployed gates through a worker (the demo, 6,000 rows, every family; median of "
        f"{n_runs} alternated runs; the server on {database}; wall = the run's creation to its "
        "final state; start = to its Running state; the worker asks for runs every second)",
        ["flow run started with", "wall s", "data work s", "around s", "start s",
         "speed-up", "target", "met", "verdict", "load"], rows)
    (OUT / "triggered.txt").write_text(text + "\n")
    (OUT / "triggered.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
