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
