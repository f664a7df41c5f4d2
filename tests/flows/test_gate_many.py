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
