"""The report's earlier runs (riskcore.gate.history.earlier_figures) are the newest, found
from the store's listing without reading every run a release ever had."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import riskcore.gate.history as history
from riskcore.gate.history import earlier_figures
from riskcore.storage import filesystem


def _runs(put: Any, n: int) -> None:
    """``n`` finished runs of release ``r1``, run i finishing at minute i (its utility
    figure i)."""
    for i in range(n):
        run = f"r1/run-{(i * 7) % n:03d}-{i}"  # folder names in no time order
        put(f"{run}/measures.json", {"measures": [{"measure": "utility",
                                                   "figures": {"u": i}}]})
        put(f"{run}/decision.json", {"flow_run_id": run.split("/")[1],
                                     "finished_at": f"2026-01-01T00:{i:02d}:00+00:00",
                                     "verdict": "APPROVED"}, i)


def test_the_twenty_newest_are_read_and_no_more(tmp_path, monkeypatch):
    def put(key: str, doc: dict[str, Any], minute: int | None = None) -> None:
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
        if minute is not None:  # the store's write time, as the run's own
            os.utime(path, (1_767_225_600 + 60 * minute,) * 2)

    _runs(put, 50)
    read: list[str] = []
    real = history._read

    def counted(fs: Any, key: str) -> Any:
        read.append(key)
        return real(fs, key)

    monkeypatch.setattr(history, "_read", counted)
    newest = earlier_figures("r1", str(tmp_path), {}, exclude=f"run-{49 * 7 % 50:03d}-49")
    assert [r["figures"]["utility"]["u"] for r in newest] == list(range(48, 28, -1))
    assert newest[0]["finished_at"] == "2026-01-01T00:48:00+00:00"
    assert len(read) == 2 * 20  # a decision and its figures for each of the 20, nothing else


def test_object_storage_lists_its_write_times(s3):
    client = s3.client()
    client.create_bucket(Bucket="history")

    def put(key: str, doc: dict[str, Any], minute: int | None = None) -> None:
        client.put_object(Bucket="history", Key=f"out/{key}", Body=json.dumps(doc).encode())

    _runs(put, 25)
    fs, _ = filesystem("s3://history/out", s3.options())
    info = fs.info("history/out/r1/run-000-0/decision.json")
    assert history._stored_at(info) is not None
    newest = earlier_figures("r1", "s3://history/out", s3.options())
    # written within a second or two: the runs that tie are all read, the newest kept
    assert [r["figures"]["utility"]["u"] for r in newest] == list(range(24, 4, -1))


def test_a_listing_without_times_is_read_whole(tmp_path, monkeypatch):
    def put(key: str, doc: dict[str, Any], minute: int | None = None) -> None:
        path = Path(tmp_path) / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))

    _runs(put, 25)
    monkeypatch.setattr(history, "_stored_at", lambda info: None)
    newest = earlier_figures("r1", str(tmp_path), {}, limit=5)
    assert [r["figures"]["utility"]["u"] for r in newest] == [24, 23, 22, 21, 20]


def test_a_gate_reads_its_earlier_runs_beside_its_work_and_maps_them(example_files, tmp_path,
                                                                     monkeypatch):
    """A gate that measures utility reads its release's earlier runs in a thread begun at its
    start (not on its path once its figures are known), and its report's risk-utility map
    shows them; a store that cannot be read there leaves the map without them, the run
    unharmed."""
    import threading

    from riskcore.gate.config import load_gate
    from riskcore.gate.run import LocalSteps, run_gate
    from tests.conftest import gate_config

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="mapped",
                      measures={"reid": {"threshold": 0.1}, "utility": {}})
    threads: list[str] = []
    real = history.earlier_figures

    def noted(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(history, "earlier_figures", noted)
    first = run_gate(load_gate(cfg), "run-1", steps=LocalSteps())
    second = run_gate(load_gate(cfg), "run-2", steps=LocalSteps())
    assert threads == ["riskgate-history", "riskgate-history"]
    assert first.verdict != "ERROR" and second.verdict != "ERROR", second.reasons
    assert "and 0 earlier run(s)" in (Path(first.folder) / "report.html").read_text()
    report = (Path(second.folder) / "report.html").read_text()
    assert "and 1 earlier run(s)" in report and "run-1 (" in report

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the store went away")

    monkeypatch.setattr(history, "earlier_figures", broken)
    third = run_gate(load_gate(cfg), "run-3", steps=LocalSteps())
    assert third.verdict == second.verdict
    assert "and 0 earlier run(s)" in (Path(third.folder) / "report.html").read_text()
