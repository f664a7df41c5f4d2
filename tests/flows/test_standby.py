"""``riskgate standby``: a ``riskgate gate`` with ``$RISKGATE_STANDBY`` set runs in a fork of a
process that did a gate's imports, and is the command's own run all the same (its figures,
verdict, output and exit code), or runs in the command's process and says why. The console
script runs as a user runs it; the standby is a real process on a real socket."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from riskgate.flows import standby_wire as wire
from tests.conftest import POLICY, ROOT, wait_for_paused_run
from tests.flows.operations_support import _flow_run, _standby_ready

pytestmark = pytest.mark.integration

RISKGATE = str(Path(sys.executable).with_name("riskgate"))


class Standby:
    def __init__(self, env: dict[str, str], log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.env, self.log, self.proc = env, log, proc

    def forked(self) -> list[int]:
        """The gate processes it forked, from its log."""
        return [int(line.split()[2]) for line in self.log.read_text().splitlines()
                if line.startswith("gate process ")]


@pytest.fixture(scope="module")
def standby(tmp_path_factory: pytest.TempPathFactory, prefect_server) -> Iterator[Standby]:
    """One standby for the module's tests (each reads the gate processes it forked since)."""
    folder = tempfile.mkdtemp(prefix="rg-sb-")  # short: a socket's path is 107 bytes at most
    env = {**prefect_server.env(), wire.ENV: os.path.join(folder, "s.sock")}
    log = tmp_path_factory.mktemp("standby") / "standby.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([RISKGATE, "standby"], env=env, cwd=ROOT, stdout=fh,
                                stderr=subprocess.STDOUT)
    try:
        _standby_ready(proc, log)
        yield Standby(env, log, proc)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(folder, ignore_errors=True)
    assert "standby stopped" in log.read_text()
    assert not os.path.exists(env[wire.ENV])  # its socket goes with it


def _config(tmp_path: Path, files: dict[str, Path], name: str, every: bool = True,
            **extra: Any) -> Path:
    """The example config (every family, or the equivalence classes' alone) on the suite's
    example tables, with ``extra``'s keys last."""
    cfg = yaml.safe_load((ROOT / "examples/gate.yaml").read_text())
    if not every:
        cfg["measures"] = {"k_anonymity": {}, "reid": {"threshold": 0.1}, "l_diversity": {},
                          "t_closeness": {}}
    cfg.update(release_id=f"standby-{name}", original=str(files["original"]),
               released=str(files["released"]), output_url=str(tmp_path / name),
               policy=str(ROOT / "examples/policy.yaml"))
    cfg["generalization"] = {"age": "interval"}  # not the demo's hierarchy file
    if not every:
        cfg["policy"] = POLICY
    cfg.update(extra)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _gate(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RISKGATE, "gate", "--config", str(config), "--json"], env=env,
                          cwd=config.parent, capture_output=True, text=True, timeout=600)


def _gate_at(config: Path, env: dict[str, str], step: str
             ) -> tuple[subprocess.Popen[str], list[str]]:
    """A ``riskgate gate`` command running, once its output has reached ``step``'s line (the
    gate's own step lines, through the command's stdout), and the lines read so far."""
    proc = subprocess.Popen([RISKGATE, "gate", "--config", str(config)], env=env,
                            cwd=config.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if f"  {step}: " in line:
            return proc, lines
    raise AssertionError("".join(lines))


def _figures(outcome: dict) -> tuple[str, list]:
    folder = Path(outcome["decision_url"]).parent
    measures = json.loads((folder / "measures.json").read_text())["measures"]
    return outcome["verdict"], measures


def test_a_gate_run_by_the_standby_is_the_commands_own(tmp_path, example_files, standby):
    here_env = {k: v for k, v in standby.env.items() if k != wire.ENV}
    here = _gate(_config(tmp_path, example_files, "here"), here_env)
    assert here.returncode in (0, 1, 2), here.stdout + here.stderr
    before = standby.forked()
    forked = _gate(_config(tmp_path, example_files, "forked"), standby.env)
    assert forked.returncode == here.returncode, forked.stdout + forked.stderr
    assert "standby not used" not in forked.stderr
    assert len(standby.forked()) == len(before) + 1, standby.log.read_text()
    a, b = json.loads(here.stdout), json.loads(forked.stdout)
    assert b["release_id"] == "standby-forked"
    assert _figures(a) == _figures(b)  # the same figures, verdict and seed: the same run
    assert "gate run(s):" in forked.stderr  # its console lines reached the command's stderr
    # nothing after its exit code (the command closing its end once told never stops the gate
    # process on its way out: seen, a SIGTERM traceback on the command's stderr)
    assert "Traceback" not in forked.stderr and forked.stderr.rstrip().endswith(
        "since the command started")
    # the gate process is gone once the command has its exit code (its helper goes back to
    # the standby: test_gates_one_after_another_share_the_helper_the_standby_takes_back)
    pid = standby.forked()[-1]
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _helpers(standby: Standby, *, other_than: int | None = None, count: int = 1) -> list[int]:
    """The helper processes the standby holds (its spare, and those lent to running gates),
    once they are ``count`` and ``other_than`` is not among them."""
    from tests.conftest import child_processes

    deadline = time.monotonic() + 60
    while True:
        helpers = []
        for pid in child_processes(standby.proc.pid):
            try:
                if b"riskcore.gate.gx_helper" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    helpers.append(pid)
            except OSError:
                continue
        if len(helpers) == count and other_than not in helpers:
            return helpers
        assert time.monotonic() < deadline, (helpers, standby.log.read_text())
        time.sleep(0.1)


def test_gates_one_after_another_share_the_helper_the_standby_takes_back(tmp_path,
                                                                        example_files,
                                                                        standby):
    """The helper a gate process was given serves the next gate once that process has exited:
    the second gate does not wait for Great Expectations' import. A gate process killed
    mid-run (it may have left a request half-written) has its helper ended, and a new spare
    takes its place."""
    spare = _helpers(standby)
    first = _gate(_config(tmp_path, example_files, "first", every=False), standby.env)
    assert first.returncode in (0, 1, 2), first.stdout + first.stderr
    assert _helpers(standby) == spare  # taken back, not a new one
    second = _gate(_config(tmp_path, example_files, "second", every=False), standby.env)
    assert second.returncode == first.returncode, second.stdout + second.stderr
    assert _helpers(standby) == spare
    folder = Path(json.loads(second.stdout)["decision_url"]).parent
    timings = json.loads((folder / "decision.json").read_text())["timings"]
    assert "gx_start" not in timings, json.dumps(timings)  # its checks never waited
    assert _figures(json.loads(first.stdout))[1] == _figures(json.loads(second.stdout))[1]
    proc, _ = _gate_at(_config(tmp_path, example_files, "killed"), standby.env, "load")
    os.kill(standby.forked()[-1], signal.SIGKILL)
    proc.communicate(timeout=60)
    assert _helpers(standby, other_than=spare[0]) != spare


def test_a_gate_paused_for_review_does_not_keep_the_next_gates_waiting_for_a_helper(
        tmp_path, example_files, standby):
    """A gate process paused for review holds the helper it was given for as long as it waits
    (minutes, hours); once it is idle the standby warms a spare beside it, and the next gate
    starts its checks at once (before, every gate after a paused one waited 2 s for a helper of
    its own)."""
    spare = _helpers(standby)
    review = _config(tmp_path, example_files, "paused", every=False,
                     policy={"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 100,
                                                       "review_min": 1}]},
                     review="pause", review_timeout_s=300)
    paused = subprocess.Popen([RISKGATE, "gate", "--config", str(review)], env=standby.env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        wait_for_paused_run("standby-paused")
        helpers = _helpers(standby, count=2)  # the lent helper and a new spare
        assert spare[0] in helpers, helpers
        new = next(pid for pid in helpers if pid != spare[0])
        deadline = time.monotonic() + 60
        used: float | None = -1.0
        # warmed: its imports done, it waits for a gate
        while (now := wire.cpu_seconds(new)) != used:
            assert time.monotonic() < deadline, standby.log.read_text()
            used = now
            time.sleep(1.0)
        after = _gate(_config(tmp_path, example_files, "after-paused", every=False),
                      standby.env)
        assert after.returncode in (0, 1, 2), after.stdout + after.stderr
        folder = Path(json.loads(after.stdout)["decision_url"]).parent
        timings = json.loads((folder / "decision.json").read_text())["timings"]
        assert "gx_start" not in timings, json.dumps(timings)  # its checks never waited
    finally:
        paused.terminate()  # as a stopped command: its gate ends with an ERROR decision
        paused.wait(timeout=60)


def test_a_command_of_another_environment_runs_itself_and_says_why(tmp_path, example_files,
                                                                   standby):
    env = {**standby.env, "RISKGATE_THREADS": "1"}  # any variable the standby does not have
    before = standby.forked()
    done = _gate(_config(tmp_path, example_files, "other", every=False), env)
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    assert "riskgate standby not used: the standby at" in done.stderr
    assert "another environment" in done.stderr
    assert standby.forked() == before
    assert json.loads(done.stdout)["release_id"] == "standby-other"


def test_the_standby_forks_for_gates_alone(standby):
    """A request of the right user, code and environment for another command, or not shaped
    as a command's, is refused, and nothing is forked."""
    import socket

    env = wire.command_environ(standby.env, verbose=False)
    request = {"argv": ["init", "--out", "x"], "cwd": "/", "umask": 0o22, "started": 0.0,
               "fingerprint": wire.fingerprint(env, wire.code_stamp()), "per_command": {}}
    before = standby.forked()
    alone = "runs `riskgate gate` and a worker's `riskgate flow-run` alone"
    for ask, why in ((request, alone), ({**request, "argv": ["flow-run", "--config", "x"]}, alone),
                     ({**request, "argv": "gate"}, "not a command's")):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(standby.env[wire.ENV])
            wire.send(sock, ask, fds=[0, 1, 2])
            answer, _ = wire.receive(sock)
        assert answer is not None and why in answer["refused"], answer
    assert standby.forked() == before


def test_sigterm_to_the_command_stops_its_gate_with_an_error_decision(tmp_path, example_files,
                                                                     standby):
    proc, lines = _gate_at(_config(tmp_path, example_files, "stopped"), standby.env, "encode")
    proc.send_signal(signal.SIGTERM)  # to the command: it hands it to its gate process
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, "".join(lines) + out
    decision = json.loads(next((tmp_path / "stopped").rglob("decision.json")).read_text())
    if decision["verdict"] == "ERROR":
        assert "stopped (SIGTERM" in " ".join(decision["reasons"])
    assert standby.proc.poll() is None  # the standby serves on


def test_a_gate_whose_command_is_killed_stops(tmp_path, example_files, standby):
    proc, _ = _gate_at(_config(tmp_path, example_files, "orphan"), standby.env, "load")
    proc.kill()
    proc.wait(10)
    pid = standby.forked()[-1]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"gate process {pid} still runs without its command")
    # stopped as a gate whose process was stopped: seconds of measures were left to run
    decision = json.loads(next((tmp_path / "orphan").rglob("decision.json")).read_text())
    assert decision["verdict"] == "ERROR", decision
    assert "stopped (SIGTERM" in " ".join(decision["reasons"])


def test_a_socket_folder_others_can_reach_is_refused_by_both_sides(tmp_path, example_files,
                                                                   prefect_server):
    folder = tempfile.mkdtemp(prefix="rg-sb-")
    try:
        os.chmod(folder, 0o755)
        env = {**prefect_server.env(), wire.ENV: os.path.join(folder, "s.sock")}
        done = subprocess.run([RISKGATE, "standby"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 3
        assert f"the folder of ${wire.ENV}, {folder}, is open to others (mode 755); " \
               "chmod 700 it" in done.stderr
        assert "Traceback" not in done.stderr
        ran = _gate(_config(tmp_path, example_files, "open", every=False), env)
        assert ran.returncode in (0, 1, 2), ran.stdout + ran.stderr
        assert "riskgate standby not used: the folder of" in ran.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_fingerprint_compares_every_variable_but_the_shells_own():
    base = {"PATH": "/usr/bin", "PREFECT_API_URL": "http://127.0.0.1:4200/api", "PWD": "/a"}
    stamp = wire.code_stamp()
    same = wire.fingerprint(base, stamp)
    assert wire.fingerprint({**base, "PWD": "/b", "_": "/usr/bin/riskgate"}, stamp) == same
    assert wire.fingerprint({**base, "PREFECT_API_URL": "http://other/api"}, stamp) != same
    assert wire.fingerprint({**base, "AWS_PROFILE": "x"}, stamp) != same
    assert wire.fingerprint(base, stamp + "x") != same  # other code
    quiet = wire.command_environ({}, verbose=False)
    assert quiet["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "CRITICAL"
    assert "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL" not in wire.command_environ({}, True)
    assert wire.command_environ({"GX_ANALYTICS_ENABLED": "True"}, False)[
        "GX_ANALYTICS_ENABLED"] == "True"  # what the user set wins


def test_the_standby_builds_the_models_prefect_defers_before_it_forks():
    """Prefect builds its API models' validators at their first use; the standby's warm-up
    builds them (a fork then finds them built), among them those of a flow run's creation, an
    artifact and a log line."""
    probe = ("from riskgate.flows.cli.standby import build_deferred_models\n"
             "import riskgate.flows.release_gate\n"
             "from prefect.client.schemas.actions import ArtifactCreate, FlowRunCreate, "
             "LogCreate\n"
             "models = (ArtifactCreate, FlowRunCreate, LogCreate)\n"
             "print([m.__pydantic_complete__ for m in models])\n"
             "build_deferred_models()\n"
             "print([m.__pydantic_complete__ for m in models])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.stdout.split("\n")[:2] == ["[False, False, False]", "[True, True, True]"], \
        done.stderr[-2000:]


def test_an_unsafe_socket_path_is_named(tmp_path):
    assert "not an absolute path" in str(wire.unsafe_folder("s.sock"))
    assert "cannot be read" in str(wire.unsafe_folder(str(tmp_path / "none" / "s.sock")))
    link = tmp_path / "link"
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link.symlink_to(real)
    assert "not a folder (a link?)" in str(wire.unsafe_folder(str(link / "s.sock")))
    assert wire.unsafe_folder(str(real / "s.sock")) is None
    assert "too long" in str(wire.unsafe_folder(str(real / ("s" * 120))))


def test_a_worker_of_a_standby_pool_runs_each_flow_run_in_a_fork_of_its_standby(
        tmp_path, example_files, prefect_server):
    """``riskgate deploy --standby``'s pool: the worker starts ``riskgate flow-run``, which a
    standby of the worker's environment forks (with the pool's heartbeat, which the lost-run
    automation listens for), and which, with no standby answering, runs as Prefect's engine."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.workers.process import ProcessWorker

    from bench.triggered import deploy_gate_pool
    from riskgate.flows.cli.ops import FLOW_RUN_COMMAND, job_template

    pool = f"riskgate-standby-{os.getpid()}"
    template = job_template(ProcessWorker.get_default_base_job_template(), True)
    assert template["variables"]["properties"]["command"]["default"] == FLOW_RUN_COMMAND
    again = job_template(copy.deepcopy(template), False)  # --no-standby: Prefect's own
    assert again["variables"]["properties"]["command"]["default"] is None
    folder = tempfile.mkdtemp(prefix="rg-fr-")
    # one environment for both, as a service file gives it: the worker's settings (as it
    # writes them again into each run's environment: 1 -> 1.0) and `riskgate` on its PATH
    env = {**prefect_server.env(), wire.ENV: os.path.join(folder, "s.sock"),
           "PREFECT_WORKER_QUERY_SECONDS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    deployment = deploy_gate_pool(pool, standby=True)
    log = tmp_path / "standby.log"
    with open(log, "wb") as fh:
        sb = subprocess.Popen([RISKGATE, "standby"], env=env, cwd=ROOT, stdout=fh,
                              stderr=subprocess.STDOUT)
    worker_log = tmp_path / "worker.log"
    with open(worker_log, "wb") as fh:
        worker = subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", "--pool",
                                   pool], env=env, cwd=tmp_path, stdout=fh,
                                  stderr=subprocess.STDOUT)
    try:
        _standby_ready(sb, log)
        runs = {}
        _cancel_a_forked_review(tmp_path, example_files, deployment)
        for name in ("forked", "alone"):
            if name == "alone":  # no standby answers: the run is Prefect's engine's own
                sb.terminate()
                sb.wait(30)
            config = _config(tmp_path, example_files, f"flow-run-{name}", every=False)
            run = run_deployment(deployment, parameters={"config": str(config)}, timeout=300)
            assert run.state is not None and run.state.type.value == "COMPLETED", (
                run.state, worker_log.read_text()[-3000:])
            decision = json.loads(next((tmp_path / f"flow-run-{name}").rglob(
                "decision.json")).read_text())
            assert decision["verdict"] == "APPROVED" and decision["flow_run_id"] == str(run.id)
            runs[name] = run
        forked = [line for line in log.read_text().splitlines()
                  if line.startswith("gate process ")]
        assert len(forked) == 2 and all(line.endswith("forked for a worker's flow run")
                                        for line in forked), log.read_text()
        assert "no standby answers" in worker_log.read_text()  # the second run said why
        with get_client(sync_client=True) as client:  # the pool's heartbeat, in the fork too
            for run in runs.values():
                deadline = time.monotonic() + 30  # the server stores events every few seconds
                while True:
                    beats = client.read_events(filter=EventFilter(
                        event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
                        resource=EventResourceFilter(id=[f"prefect.flow-run.{run.id}"])),
                        limit=5)
                    if beats.events or time.monotonic() > deadline:
                        break
                    time.sleep(1)
                assert beats.events, f"no heartbeat from {run.id}"
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=3)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
        if sb.poll() is None:
            sb.terminate()
            sb.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


def _cancel_a_forked_review(tmp_path: Path, files: dict[str, Path], deployment: Any) -> None:
    """A forked gate paused for review, cancelled as the UI cancels it: the run ends
    Cancelled with an ERROR decision for its id. The worker signals ``riskgate flow-run``,
    which passes the signal on to the fork; were that to fail, the worker kills the launcher
    30 s later and the fork stops when its end of the socket closes (both paths tried: the
    outcome is the same, the second half a minute later). A fork that ran on would leave the
    run Cancelling and its reviewer waiting."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.states import Cancelling

    config = _config(tmp_path, files, "flow-run-cancelled", every=False,
                     policy={"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 100,
                                                       "review_min": 1}]},
                     review="pause", review_timeout_s=300)
    run_deployment(deployment, parameters={"config": str(config)}, timeout=0)
    paused = wait_for_paused_run("standby-flow-run-cancelled")
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(paused.id, Cancelling(), force=True)
    run = _flow_run(str(paused.id))
    assert run.state.type.value == "CANCELLED", run.state
    decision = json.loads(next((tmp_path / "flow-run-cancelled").rglob(
        "decision.json")).read_text())
    assert decision["verdict"] == "ERROR" and decision["flow_run_id"] == str(paused.id)


def test_a_forked_flow_run_beats_as_the_pool_says(monkeypatch):
    """The fork runs under the settings of the worker's environment for the run, not under
    those Prefect read when the standby imported it: the pool's heartbeat among them
    (Prefect's 180 s default would have a living gate declared lost)."""
    from prefect.settings import get_current_settings

    from riskgate.flows.cli.flow_run import run_settings
    from riskgate.flows.deployments import HEARTBEAT_S

    before = get_current_settings().flows.heartbeat_frequency
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_S))
    assert get_current_settings().flows.heartbeat_frequency == before  # read at import
    with run_settings():
        assert get_current_settings().flows.heartbeat_frequency == HEARTBEAT_S
    # a worker writes its settings into a run's environment again, as Prefect serializes them
    assert wire.fingerprint({"PREFECT_WORKER_QUERY_SECONDS": "1"}, "c", flow_run=True) == \
        wire.fingerprint({"PREFECT_WORKER_QUERY_SECONDS": "1.0"}, "c", flow_run=True)
    assert wire.fingerprint({"PREFECT_X": "True", "PREFECT__FLOW_RUN_ID": "a"}, "c",
                            flow_run=True) == wire.fingerprint({"PREFECT_X": "true"}, "c",
                                                               flow_run=True)
    assert wire.fingerprint({"PREFECT__FLOW_RUN_ID": "a"}, "c") != wire.fingerprint({}, "c")
