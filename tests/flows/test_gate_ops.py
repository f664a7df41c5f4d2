"""The flow in this process against the suite's Prefect server: shared gate limit, Dask task
runner, human sign-off, the deployments' one source."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, gate_config, run_gate_flow, wait_for_paused_run


@pytest.fixture(scope="module")
def bigger_files(tmp_path_factory):
    from riskcore.examples import write_example

    return write_example(tmp_path_factory.mktemp("bigger"), n=60000, seed=3)


def test_a_config_cannot_resize_the_shared_limit(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), limits={"gate_concurrency": 100})
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "ERROR"
    assert "riskgate limits" in outcome["reasons"][0]


def test_dask_local_cluster_gives_the_same_decision_and_figures(example_files, tmp_path):
    from prefect_dask import DaskTaskRunner

    from riskgate.flows.release_gate import release_gate
    from riskgate.flows.verdicts import outcome_of

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="dask")
    threads = run_gate_flow(cfg)
    runner = DaskTaskRunner(cluster_class="distributed.LocalCluster",
                            cluster_kwargs={"n_workers": 2, "threads_per_worker": 1,
                                            "processes": True, "dashboard_address": None})
    dask = outcome_of(release_gate.with_options(task_runner=runner)(config=cfg,
                                                                     return_state=True))
    assert dask is not None and dask["verdict"] == threads["verdict"]

    def figures(outcome):
        doc = json.loads((Path(outcome["folder"]) / "measures.json").read_text())
        return {m["measure"]: m["figures"] for m in doc["measures"]}

    assert figures(dask) == figures(threads)
    d1 = json.loads(Path(dask["decision_url"]).read_text())
    d2 = json.loads(Path(threads["decision_url"]).read_text())
    assert d1["checks"] == d2["checks"]


def test_paused_review_resumed_with_approval_ends_approved(example_files, tmp_path):
    from prefect.flow_runs import resume_flow_run

    from riskgate.flows.limits import GATE_LIMIT, set_limits

    policy = {"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 100,
                                        "review_min": 1}]}
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="review", policy=policy,
                      review="pause", review_timeout_s=120)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(run_gate_flow(cfg)))
    t.start()
    paused = wait_for_paused_run("review")
    # everything but decision.json is written before the reviewer is asked
    folder = tmp_path / "out" / "review" / str(paused.id)
    assert (folder / "report.html").exists() and (folder / "measures.json").exists()
    assert not (folder / "decision.json").exists()
    assert set_limits()[GATE_LIMIT]["active_slots"] == 0  # the pause holds no gate slot
    resume_flow_run(paused.id, run_input={"approve": True, "reviewer": "dpo@example.org",
                                          "comment": "l-diversity acceptable for this use"})
    t.join(timeout=120)
    assert result["verdict"] == "APPROVED" and result["state_name"] == "Approved"
    decision = json.loads(Path(result["decision_url"]).read_text())
    assert decision["review"]["decision"] == "approved"
    assert decision["review"]["reviewer"] == "dpo@example.org"
    assert decision["checks"][0]["verdict"] == "review"


def test_prefect_yaml_validates_and_entrypoints_import():
    import importlib

    from prefect.events import DeploymentEventTrigger

    doc = yaml.safe_load((ROOT / "deployments/prefect.yaml").read_text())
    assert doc["pull"] == []  # module entrypoints: no working directory, no /opt path
    deployments = doc["deployments"]
    assert {d["name"] for d in deployments} == {"nightly-recheck", "on-anonymization",
                                                "watch-releases", "lost-run-verdict"}
    for d in deployments:
        module, func = d["entrypoint"].rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), func))
        assert d["work_pool"]["name"] == "riskgate-process"
        # no gate deployment takes a config, an override or a policy: pinned at deploy
        assert not {"config", "overrides", "policy"} & set(d["parameters"]), d["name"]
        if d["name"] != "watch-releases":  # the gates: the riskgate-gate limit (the module)
            assert "concurrency_limit" not in d
    triggered = next(d for d in deployments if d["name"] == "on-anonymization")
    trigger = triggered["triggers"][0]
    assert trigger["expect"] == ["riskgate.anonymization.completed"]
    # the event's id and time only: the flow reads the payload from the event store, so that
    # nothing a pipeline put in it becomes a stored flow-run parameter
    assert set(trigger["parameters"]["trigger"]) == {"event_id", "event", "occurred"}
    DeploymentEventTrigger(**{k: v for k, v in trigger.items() if k != "type"})
    lost = next(d for d in deployments if d["name"] == "lost-run-verdict")["triggers"][0]
    # only the state the lost-run automation sets starts it (not the crash hook's own)
    assert lost["expect"] == ["prefect.flow-run.Error"]  # a state's event bears its name
    from riskgate.flows.deployments import LOST_MESSAGE, lost_gate_automation

    assert lost["match"]["prefect.state-message"] == LOST_MESSAGE + "*"
    assert lost_gate_automation([]).actions[0].message.startswith(LOST_MESSAGE)
    assert lost_gate_automation([]).trigger.within.total_seconds() == 90
    assert lost_gate_automation([], 75).trigger.within.total_seconds() == 75
    assert "for 75 s" in lost_gate_automation([], 75).actions[0].message
    scheduled = next(d for d in deployments if d["name"] == "nightly-recheck")
    assert scheduled["schedules"][0]["active"] is False  # until its config URL is set
    watch = next(d for d in deployments if d["name"] == "watch-releases")
    assert watch["schedules"][0] == {"interval": 60, "active": False}
    assert watch["concurrency_limit"] == {"limit": 1, "collision_strategy": "CANCEL_NEW"}


def test_serve_builds_the_same_deployments_as_the_yaml():
    from riskgate.flows.deployments import DEPLOYMENTS, runner_deployments
    from riskgate.flows.names import CONFIG_TAG_PREFIX

    sha = "a" * 64
    built = {d.name: d for d in runner_deployments(pinned={"on-anonymization": sha,
                                                           "watch-releases": sha})}
    assert set(built) == set(DEPLOYMENTS)
    for name, spec in DEPLOYMENTS.items():
        recorded = [f"{CONFIG_TAG_PREFIX}{sha}"] if name in ("on-anonymization",
                                                              "watch-releases") else []
        assert sorted(built[name].tags) == sorted(spec["tags"] + recorded)
        assert built[name].parameters == {}
    assert built["watch-releases"].schedules[0].active is True
    assert built["nightly-recheck"].schedules[0].active is False
    trigger = built["on-anonymization"].triggers[0]
    assert trigger.expect == {"riskgate.anonymization.completed"}
    assert trigger.parameters == DEPLOYMENTS["on-anonymization"]["triggers"][0]["parameters"]


def test_partitioned_release_through_the_flow_on_a_dask_scheduler(tmp_path, prefect_server):
    """A partitioned release gated by the flow with ``dask_address`` (as the CLI's
    --dask-local and a worker's RISKGATE_DASK_ADDRESS give it): the figures of the one-node
    partitioned run, the attacks on the sample, and the steps as tasks in the API."""
    import asyncio

    from distributed import LocalCluster
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from riskcore.gate.config import load_gate
    from riskcore.gate.partitioned_steps import PartitionedSteps
    from riskcore.gate.run import run_gate
    from tests.gate.test_partitioned import config, write_tables

    t = write_tables(tmp_path, n=3000, parts=3)
    measures = {"k_anonymity": {}, "reid": {"threshold": 0.1}, "sdc": {},
                "singling_out": {"n_attacks": 200}}
    cfg = config(tmp_path, t["original_parts"], t["released_parts"], "flow-dask", measures)
    local = run_gate(load_gate(cfg), "one-node", steps=PartitionedSteps())
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        outcome = run_gate_flow(str(cfg), dask_address=cluster.scheduler_address)
    assert outcome["verdict"] == local.verdict, outcome["reasons"]

    def figures(folder):
        doc = json.loads((Path(folder) / "measures.json").read_text())
        return {m["measure"]: m["figures"] for m in doc["measures"]}

    assert figures(outcome["folder"]) == figures(local.folder)
    assert figures(outcome["folder"])["singling_out"]["risk"] is not None
    assert len(list((Path(outcome["folder"]) / "per_record").glob("part-*.parquet"))) == 3

    async def task_names() -> set[str]:
        async with get_client() as client:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[outcome["run_id"]])))
            return {r.name for r in runs}

    names = asyncio.run(task_names())
    assert {"partitioned-load", "partitioned-validate", "partitioned-encode",
            "partitioned-measures", "partitioned-per-record"} <= names


def test_a_review_needs_the_reviewers_name_and_states_its_timeout():
    """The reviewer is required, and the form says when the review times
    out into REJECTED (the config's review_timeout_s)."""
    import pydantic

    from riskgate.flows.gate_steps import ReviewInput, review_description

    with pytest.raises(pydantic.ValidationError, match="reviewer"):
        ReviewInput(approve=True)
    with pytest.raises(pydantic.ValidationError, match="reviewer"):
        ReviewInput(approve=True, reviewer="")
    assert ReviewInput(approve=False, reviewer="dpo@example.org").reviewer == "dpo@example.org"
    text = review_description("r1", [], "s3://b/report.html", 5400)
    assert "within 90 minute(s)" in text and "REJECTED" in text and "required" in text


def test_a_verdict_is_not_logged_as_a_crash():
    """Prefect's engine line for a run that ends Failed becomes one INFO line
    naming the verdict when the failure is the gate's verdict; other errors stay ERROR."""
    import logging

    from riskgate.flows.verdicts import GateVerdict, VerdictIsNotACrash

    def record(exc: BaseException) -> logging.LogRecord:
        try:
            raise exc
        except BaseException:
            import sys
            return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                                     "Engine execution exited with unexpected exception", (),
                                     sys.exc_info())

    verdict = record(GateVerdict({"release_id": "r", "verdict": "REJECTED", "reasons": []}))
    assert VerdictIsNotACrash().filter(verdict)
    assert verdict.levelno == logging.INFO and verdict.exc_info is None
    assert verdict.getMessage() == ("the run ended Failed with the gate's verdict REJECTED "
                                    "(a verdict, not a crash)")
    crash = record(RuntimeError("boom"))
    assert VerdictIsNotACrash().filter(crash) and crash.levelno == logging.ERROR
    assert crash.exc_info is not None


def test_no_more_families_run_at_once_than_the_cores_allow(prefect_server, example_files,
                                                            tmp_path, monkeypatch):
    """The flow's task runner has four threads (the tables load at once), but the families
    start one per core the process may use (here one, as a worker's $RISKGATE_THREADS says:
    two at the least), the next as one ends; each family still runs, and in the config's
    order in the results."""
    import riskgate.tasks.measure as measure_tasks
    from riskgate.flows.gate_steps import MEASURE_WORKERS, families_at_once
    from riskgate.flows.release_gate import release_gate
    from riskgate.flows.verdicts import outcome_of

    monkeypatch.setenv("RISKGATE_THREADS", "1")
    assert families_at_once() == 2 < MEASURE_WORKERS
    lock, now, most, ran = threading.Lock(), [0], [0], []
    real = measure_tasks.measure

    def counted(name: str, *args: Any) -> Any:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
            ran.append(name)
        try:
            time.sleep(0.3)  # long enough that four would overlap if they were let
            return real(name, *args)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(measure_tasks, "measure", counted)
    families = ["k_anonymity", "reid", "l_diversity", "t_closeness", "sdc", "suda"]
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="at-once",
                      measures={name: {} for name in families})
    outcome = outcome_of(release_gate(config=cfg, return_state=True))
    assert outcome is not None and outcome["verdict"] != "ERROR", outcome
    assert most[0] == 2 and sorted(ran) == sorted(families)
    measured = json.loads((Path(outcome["folder"]) / "measures.json").read_text())["measures"]
    assert [m["measure"] for m in measured] == families


def test_a_run_knows_its_deployment_from_its_context(prefect_server):
    """Whether a run is a deployment's (a deployed run never reads a key file: riskcore.signer)
    is read from the flow run in the run's context, as the API gives it: no deployment for a
    run started here, its deployment's id for a run created from one; as Prefect's own
    ``runtime.deployment.id``, which reads the flow run from the API again."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow
    from prefect.runtime import deployment

    from riskgate.flows.pinned import run_deployment_id

    @flow(name="riskgate-deployment-probe")
    def probe() -> tuple[str | None, str | None]:
        return run_deployment_id(), deployment.id

    assert probe() == (None, None)
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(probe)
        dep_id = client.create_deployment(flow_id=flow_id, name="probe",
                                          entrypoint="tests/flows/test_gate_ops.py:probe")
        flow_run = client.create_flow_run_from_deployment(dep_id)
    assert run_flow(probe, flow_run=flow_run) == (str(dep_id), str(dep_id))
    assert run_deployment_id() is None  # outside a run


def test_a_gate_run_stores_its_parameters_as_prefect_does_without_importing_fastapi(
        example_files, tmp_path):
    """The gate's flows store JSON parameters as they are (FastAPI's import for Prefect's
    encoder cost a command-line gate 0.36 s before its flow began): what the API holds is
    what Prefect's encoder gives, in the same order, and a value that is not JSON (a path) is
    still stored by Prefect's encoder; a fresh process creating a run's parameters imports no
    FastAPI."""
    import subprocess
    import sys

    from fastapi.encoders import jsonable_encoder
    from prefect.client.orchestration import get_client

    from riskgate.flows.release_gate import deployed_gate, release_gate

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="plain-params")
    params = {"config": cfg, "overrides": {"seed": 3, "measures": [1.5, None, True]},
              "storage_options": None, "origin": "command line", "trigger": {"a": {"b": []}}}
    assert release_gate.serialize_parameters(params) == jsonable_encoder(params)
    assert list(release_gate.serialize_parameters(params)) == list(params)
    odd = {"config": tmp_path / "gate.yaml", "overrides": {"when": (1, 2)}}
    assert release_gate.serialize_parameters(odd) == jsonable_encoder(odd) == {
        "config": str(tmp_path / "gate.yaml"), "overrides": {"when": [1, 2]}}
    assert deployed_gate.serialize_parameters({"trigger": {"event_id": "e"}}) == {
        "trigger": {"event_id": "e"}}

    outcome = run_gate_flow(cfg, overrides={"report_detail": "summary"})
    with get_client(sync_client=True) as client:
        stored = client.read_flow_run(outcome["decision_url"].split("/")[-2]).parameters
    assert stored["config"] == jsonable_encoder(cfg)
    assert stored["overrides"] == {"report_detail": "summary"}

    fresh = subprocess.run(
        [sys.executable, "-c",
         "import sys; from riskgate.flows.release_gate import release_gate; "
         "release_gate.serialize_parameters({'config': 'gate.yaml', 'overrides': {'a': [1]}}); "
         "print('fastapi' in sys.modules)"],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert fresh.stdout.strip() == "False", fresh.stderr[-2000:]
