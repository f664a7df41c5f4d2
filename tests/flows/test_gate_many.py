"""``riskgate gate`` on several configs, or a folder of them: one process, one verdict and one
decision each, the exit code of the worst verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, gate_config

RISKGATE = [sys.executable, "-m", "riskgate.flows.cli"]


def _write(folder: Path, name: str, cfg: dict) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_folder_of_configs_is_judged_in_one_process(example_files, tmp_path, prefect_server):
    folder = tmp_path / "configs"
    folder.mkdir()
    out = str(tmp_path / "out")
    files = (str(example_files["original"]), str(example_files["released"]))
    _write(folder, "a.yaml", gate_config(*files, out, release_id="many-a"))
    _write(folder, "b.yml", gate_config(*files, out, release_id="many-b", policy={
        "version": 1, "checks": ["k_anonymity.k >= 1000"]}))
    (folder / "policy.yaml").write_text("version: 1\nchecks: ['reid.pRb <= 1']\n")  # skipped
    done = subprocess.run(RISKGATE + ["gate", "--config", str(folder), "--json"],
                          env=prefect_server.env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr  # the worst: REJECTED
    outcomes = json.loads(done.stdout)
    assert [(o["release_id"], o["verdict"]) for o in outcomes] == [
        ("many-a", "APPROVED"), ("many-b", "REJECTED")]
    for o in outcomes:  # a decision each, in its own release's folder
        decision = json.loads(Path(o["decision_url"]).read_text())
        assert decision["release_id"] == o["release_id"]
    assert "1 other YAML file(s) (policies, hierarchies) skipped" in done.stderr

    # a config that cannot be read is an ERROR of its own; the others are still judged
    broken = _write(tmp_path, "broken.yaml", {"release_id": "broken", "original": "x.csv"})
    done = subprocess.run(RISKGATE + ["gate", "--config", str(folder / "a.yaml"),
                                      str(broken)], env=prefect_server.env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "many-a" in done.stdout and "APPROVED" in done.stdout
    assert "worst verdict: ERROR" in done.stdout and "broken.yaml" in done.stdout

    # one release's tables cannot be named for several: one line, no run
    done = subprocess.run(RISKGATE + ["gate", "--config", str(folder), "--released", "x.csv"],
                          env=prefect_server.env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3
    assert "--released: one config only, and 2 were given" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_families_set_up_begins_before_the_flow_for_every_config(example_files, tmp_path):
    """``riskgate gate`` begins its families' set-up (imports) as soon as the configs are
    read, for every family of every config read; none for a config that could not be read,
    none when the families run on a Dask cluster (bench/gate.py: the imports otherwise ran
    beside the gate's load and checks)."""
    import argparse

    from riskcore.errors import ConfigError
    from riskcore.gate.config import load_gate
    from riskcore.measures import longest_first
    from riskgate.flows.cli.gate import _start_families

    files = (str(example_files["original"]), str(example_files["released"]), str(tmp_path))
    gate_a = load_gate(str(_write(tmp_path, "a.yaml", gate_config(*files, measures={
        "k_anonymity": {}, "suda": {}}))))
    gate_b = load_gate(str(_write(tmp_path, "b.yaml", gate_config(*files, measures={
        "utility": {}, "k_anonymity": {}, "alc": {}}))))
    args = argparse.Namespace(dask_address=None, dask_local=None)
    unread = ConfigError("c.yaml: not read")
    starting = _start_families(args, {"a.yaml": gate_a, "b.yaml": gate_b, "c.yaml": unread})
    assert starting is not None
    starting.join(timeout=120)
    assert not starting.is_alive() and not starting.cancelled
    # every config's families once (the policy's own added), those fitting models first
    both = set(gate_a.measures) | set(gate_b.measures)
    assert {"suda", "utility", "alc"} <= both
    assert starting.names == tuple(longest_first(sorted(both)))
    assert starting.names[:2] == ("alc", "utility")
    assert _start_families(args, {"c.yaml": unread}) is None
    for dask in ({"dask_address": "tcp://127.0.0.1:8786", "dask_local": None},
                 {"dask_address": None, "dask_local": 2}):
        assert _start_families(argparse.Namespace(**dask), {"a.yaml": gate_a}) is None
