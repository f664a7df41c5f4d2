"""Signals and children: a SIGTERMed gate stops within 10 s with an ERROR
decision (never a half-written folder), and neither Great Expectations' helper nor the private
Prefect server outlives the gate, under SIGTERM or SIGKILL. The console script runs as a user
runs it, in its own process; the processes are looked for in /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

RISKGATE = str(Path(sys.executable).with_name("riskgate"))


def _config(tmp_path: Path, files: dict[str, Path]) -> Path:
    """The example config (every family, the ALC included: seconds of measures to land in)."""
    cfg = yaml.safe_load((ROOT / "examples/gate.yaml").read_text())
    cfg.update(release_id="signals", original=str(files["original"]),
               released=str(files["released"]), output_url=str(tmp_path / "runs"),
               policy=str(ROOT / "examples/policy.yaml"))
    cfg["generalization"] = {"age": "interval"}
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children...)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(p)
    return alive


def _start(config: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([RISKGATE, "gate", "--verbose", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=config.parent)


def _wait_for(proc: subprocess.Popen[str], marker: str, timeout: float = 240) -> list[str]:
    """The output lines up to the first that holds ``marker``."""
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"'{marker}' never came:\n" + "".join(lines[-30:]))


def _children_with_names(pid: int) -> dict[int, str]:
    names = {}
    for p in _descendants(pid):
        try:
            names[p] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return names


def test_sigterm_mid_run_ends_in_an_error_decision_within_10_s(tmp_path, example_files,
                                                              prefect_server):
    proc = _start(_config(tmp_path, example_files), prefect_server.env())
    _wait_for(proc, "  encode: ")  # the CLI's own step line: the measures run now
    children = _children_with_names(proc.pid)
    assert any("gx_helper" in c for c in children.values()), children
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert proc.returncode == 3, out[-3000:]
    assert took < 10, took
    assert "stopped (SIGTERM" in out
    deadline = time.monotonic() + 10  # the helper leaves when its pipe closes: on a busy
    while _alive(set(children)) and time.monotonic() < deadline:  # machine, a moment later
        time.sleep(0.2)
    assert not _alive(set(children)), children
    decisions = list((tmp_path / "runs").rglob("decision.json"))
    assert len(decisions) == 1  # one run, and its folder is finished: a decision, last
    decision = json.loads(decisions[0].read_text())
    if decision["verdict"] == "ERROR":  # stopped before the verdict: the decision says so
        assert "stopped (SIGTERM" in " ".join(decision["reasons"])
    else:  # the verdict was written in the meantime: the whole folder is there
        names = {p.name for p in decisions[0].parent.iterdir()}
        assert {"report.html", "measures.json", "validation.json"} <= names


@pytest.mark.parametrize("when", ["starting", "running"])
def test_no_child_outlives_a_sigkilled_gate(tmp_path, example_files, when):
    """A private Prefect server (no PREFECT_API_URL) and the helper, killed with their gate:
    right after the start (Great Expectations still importing) and while the flow runs."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    proc = _start(_config(tmp_path, example_files), env)
    if when == "starting":
        for _ in range(100):
            children = _children_with_names(proc.pid)
            if any("gx_helper" in c for c in children.values()):
                break
            time.sleep(0.05)
    else:
        _wait_for(proc, "  load: ")  # the flow runs: its first step is done
        children = _children_with_names(proc.pid)
        assert any("uvicorn" in c or "prefect" in c for c in children.values()), children
    assert any("gx_helper" in c for c in children.values()), children
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(set(children)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: children[p] for p in _alive(set(children))}
    assert not left, left
