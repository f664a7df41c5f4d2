"""Operations: concurrency limit, Dask task runner, human sign-off, deployments."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from flows.release_gate import release_gate
from riskcore.examples import write_example
from tests.conftest import ROOT
from tests.integration.conftest import POLICY, gate_config


@pytest.fixture(scope="module")
def bigger_files(tmp_path_factory):
    return write_example(tmp_path_factory.mktemp("bigger"), n=60000, seed=3)


def test_six_gate_runs_with_limit_five_never_exceed_five(bigger_files, tmp_path):
    outcomes: dict[int, dict] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        cfg = gate_config(str(bigger_files["original"]), str(bigger_files["released"]),
                          str(tmp_path / "out"), release_id=f"conc-{i}",
                          limits={"gate_concurrency": 5})
        try:
            outcomes[i] = release_gate(config=cfg, config_name=f"conc-{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert sorted(outcomes) == list(range(6))  # none is lost
    for o in outcomes.values():
        assert Path(o["decision_url"]).exists()
    slots = sorted((o["slot"][0], o["slot"][1]) for o in outcomes.values())
    points = sorted([(a, 1) for a, _ in slots] + [(b, -1) for _, b in slots],
                    key=lambda p: (p[0], p[1]))
    inside = peak = 0
    for _, delta in points:
        inside += delta
        peak = max(peak, inside)
    assert peak <= 5
    # the sixth run could only start once another had finished
    assert slots[-1][0] >= min(b for _, b in slots[:-1])


def test_dask_local_cluster_gives_the_same_decision_and_figures(example_files, tmp_path):
    from prefect_dask import DaskTaskRunner

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="dask")
    threads = release_gate(config=cfg, config_name="threads")
    runner = DaskTaskRunner(cluster_class="distributed.LocalCluster",
                            cluster_kwargs={"n_workers": 2, "threads_per_worker": 1,
                                            "processes": True, "dashboard_address": None})
    dask = release_gate.with_options(task_runner=runner)(config=cfg, config_name="dask")
    assert dask["verdict"] == threads["verdict"]

    def figures(outcome):
        doc = json.loads((Path(outcome["folder"]) / "measures.json").read_text())
        return {m["measure"]: m["figures"] for m in doc["measures"]}

    assert figures(dask) == figures(threads)
    d1 = json.loads(Path(dask["decision_url"]).read_text())
    d2 = json.loads(Path(threads["decision_url"]).read_text())
    assert d1["checks"] == d2["checks"]


def test_paused_review_resumed_with_approval_ends_approved(example_files, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterName,
                                                FlowRunFilterState, FlowRunFilterStateType)
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run

    policy = {"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 100,
                                        "review_min": 1}]}
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="review", policy=policy,
                      review="pause", review_timeout_s=120)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(
        release_gate(config=cfg, config_name="review-run")))
    t.start()
    paused = None
    with get_client(sync_client=True) as client:
        for _ in range(120):
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])),
                name=FlowRunFilterName(like_="review")))
            if runs:
                paused = runs[0]
                break
            time.sleep(0.5)
    assert paused is not None, "the gate never paused for review"
    resume_flow_run(paused.id, run_input={"approve": True, "reviewer": "dpo@example.org",
                                          "comment": "l-diversity acceptable for this use"})
    t.join(timeout=120)
    assert result["verdict"] == "APPROVED"
    decision = json.loads(Path(result["decision_url"]).read_text())
    assert decision["review"]["decision"] == "approved"
    assert decision["review"]["reviewer"] == "dpo@example.org"
    assert decision["checks"][0]["verdict"] == "review"


def test_prefect_yaml_validates_and_entrypoints_import():
    import importlib

    doc = yaml.safe_load((ROOT / "deployments/prefect.yaml").read_text())
    deployments = doc["deployments"]
    assert {d["name"] for d in deployments} >= {"nightly-recheck", "on-anonymization"}
    for d in deployments:
        module, func = d["entrypoint"].split(":")
        mod = importlib.import_module(module.replace("/", ".").removesuffix(".py"))
        assert callable(getattr(mod, func))
        assert d["work_pool"]["name"] == "riskgate-process"
    triggered = next(d for d in deployments if d["name"] == "on-anonymization")
    trigger = triggered["triggers"][0]
    assert trigger["expect"] == ["riskgate.anonymization.completed"]
    assert triggered["concurrency_limit"] == 5
    from prefect.events import DeploymentEventTrigger

    DeploymentEventTrigger(**{k: v for k, v in trigger.items() if k != "enabled"})
    scheduled = next(d for d in deployments if d["name"] == "nightly-recheck")
    assert scheduled["schedules"][0]["cron"]
    assert POLICY  # the policy used in these tests is the example's shape
