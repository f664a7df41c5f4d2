"""The encoding runs beside the cleanliness checks when the steps can, and the
checks still decide: unclean data is REJECTED for what the checks found, whatever the
encoding beside them gave, and a run never ends with the encoding still going."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from riskcore.errors import InputError
from riskcore.gate.cleanliness import CleanlinessReport
from riskcore.gate.config import Gate, load_gate
from riskcore.gate.encoding import encode_measured
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.measures import MeasureInputs
from tests.conftest import gate_config


class EncodesBeside(LocalSteps):
    """LocalSteps that start the encoding before the checks and say in which order things
    happened; ``fail_encoding`` makes the encoding raise, as unclean data can make it."""

    def __init__(self, fail_encoding: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_encoding = fail_encoding

    def start_encode(self, gate: Gate, frames: dict[str, pd.DataFrame]
                     ) -> Callable[[bool], MeasureInputs]:
        self.calls.append("start_encode")

        def result(checks_passed: bool) -> MeasureInputs:
            self.calls.append(f"encode_result, checks passed: {checks_passed}")
            if self.fail_encoding:
                raise InputError("column 'age' of table 'released' holds text")
            return encode_measured(gate, frames)
        return result

    def validate(self, gate: Gate, frames: dict[str, pd.DataFrame]) -> CleanlinessReport:
        self.calls.append("validate")
        return super().validate(gate, frames)

    def encode(self, gate: Gate, frames: dict[str, Any]) -> MeasureInputs:
        raise AssertionError("a step that can start the encoding is never asked to encode")


def _decision(outcome: Any) -> dict[str, Any]:
    return json.loads(Path(outcome.decision_url).read_text())  # type: ignore[no-any-return]


def test_the_encoding_beside_the_checks_gives_the_same_figures(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    alone = run_gate(load_gate(cfg), "run-alone", steps=LocalSteps())
    steps = EncodesBeside()
    beside = run_gate(load_gate(cfg), "run-beside", steps=steps)
    assert steps.calls == ["start_encode", "validate", "encode_result, checks passed: True"]
    assert beside.verdict == alone.verdict and beside.checks == alone.checks
    timings = _decision(beside)["timings"]
    assert "encode_beside" in timings and 0.0 <= timings["encode_beside"] <= timings["encode"]
    assert "encode_beside" not in _decision(alone)["timings"]


def test_unclean_data_is_rejected_for_the_checks_whatever_the_encoding_gave(
        example_files, tmp_path):
    released = pd.read_csv(example_files["released"], dtype=str)
    released.loc[3, "region"] = "no\x07rth"  # a control character: the checks fail
    path = tmp_path / "released.csv"
    released.to_csv(path, index=False)
    cfg = gate_config(str(example_files["original"]), str(path), str(tmp_path / "out"))
    steps = EncodesBeside(fail_encoding=True)
    outcome = run_gate(load_gate(cfg), "run-unclean", steps=steps)
    assert outcome.verdict == "REJECTED"
    assert any("no control or non-printable characters" in r for r in outcome.reasons)
    assert not any("holds text" in r for r in outcome.reasons)
    # the encoding was waited for, told the checks failed (nothing keeps running after the
    # verdict), and dropped
    assert steps.calls == ["start_encode", "validate", "encode_result, checks passed: False"]


def test_an_encoding_error_of_clean_data_is_the_run_s_error(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-error", steps=EncodesBeside(fail_encoding=True))
    assert outcome.verdict == "ERROR"
    assert any("holds text" in r for r in outcome.reasons)


def test_work_beside_records_its_span_and_hands_over_its_error():
    """The thread runs in the caller's context (its work span reaches the run's record) and
    its error is raised by whoever waits."""
    import pytest

    from riskcore import progress
    from riskcore.threads import Beside

    spans = progress.WorkSpans()

    def encode() -> int:
        with progress.working("encode"):
            return 7

    with progress.recording(spans):
        work = Beside(encode)
        assert work.wait() == 7
    assert spans.pop("encode") is not None

    def broken() -> int:
        raise InputError("column 'age' of table 'released' holds text")

    with pytest.raises(InputError, match="holds text"):
        Beside(broken).wait()


def test_the_families_start_up_begins_with_the_run_and_ends_before_it_returns(
        example_files, tmp_path, monkeypatch):
    """A run begins its families' one-off set-up (riskcore.measures.start_up) as it
    starts, beside the load and the checks, for the families it measures, when they run in
    its process; when the run ends, what was not begun is cancelled (unclean data is never
    measured) and the thread has ended when the run returns, its verdict written."""
    from riskcore.gate import run as gate_run
    from riskcore.measures import StartUp, start_up

    begun: list[tuple[list[str], StartUp]] = []

    def recording(names: Any) -> StartUp:
        started = start_up(names)
        begun.append((list(names), started))
        return started

    monkeypatch.setattr(gate_run, "start_up", recording)
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    cfg["measures"] = {**cfg["measures"], "singling_out": {"n_attacks": 50}, "alc": {}}
    gate = load_gate(cfg)
    outcome = run_gate(gate, "run-start-up", steps=LocalSteps())
    assert [names for names, _ in begun] == [list(gate.measures)]
    assert not begun[0][1].is_alive() and Path(outcome.decision_url).exists()

    class Elsewhere(LocalSteps):
        measures_here = False  # e.g. a Dask task runner's processes

    run_gate(load_gate(cfg), "run-elsewhere", steps=Elsewhere())
    assert len(begun) == 1

    dirty = pd.read_csv(example_files["released"], dtype=str)
    dirty.loc[3, "weight"] = "heavy"
    dirty.to_csv(tmp_path / "dirty.csv", index=False)
    outcome = run_gate(load_gate({**cfg, "released": str(tmp_path / "dirty.csv")}), "run-dirty",
                       steps=LocalSteps())
    assert outcome.verdict == "REJECTED"
    assert begun[1][1].cancelled and not begun[1][1].is_alive()


def _reading_beside(monkeypatch: Any, fail: bool = False) -> list[tuple[str, bool]]:
    """Record each reading of the release against its original (the diff): whether it ran
    in the gate's main thread and whether it had ended when the run returned."""
    import threading

    from riskcore.gate import run as gate_run

    calls: list[tuple[str, bool]] = []
    real = gate_run.read_release

    def reading(gate: Gate, frames: Any) -> Any:
        calls.append(("main" if threading.current_thread() is threading.main_thread()
                      else "beside", False))
        if fail:
            raise InputError("column 'region' of table 'released' cannot be read")
        out = real(gate, frames)
        calls[-1] = (calls[-1][0], True)
        return out

    monkeypatch.setattr(gate_run, "read_release", reading)
    return calls


def test_the_release_is_read_against_its_original_beside_the_checks(example_files, tmp_path,
                                                                   monkeypatch):
    """The diff (2-3 s of a 1M-row gate) runs in a thread beside the checks and gives what
    it gives alone: the same validation record's release section, its span recorded."""
    from riskcore.gate.run import read_release

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    gate = load_gate(cfg)
    frames = {"original": pd.read_csv(example_files["original"]),
              "released": pd.read_csv(example_files["released"])}
    from riskcore.gate.prepare import prepare_tables

    alone = read_release(gate, prepare_tables(gate.config, frames, [])[0])
    calls = _reading_beside(monkeypatch)
    outcome = run_gate(gate, "run-diff-beside", steps=LocalSteps())
    assert calls == [("beside", True)]
    folder = Path(outcome.decision_url).parent
    written = json.loads((folder / "validation.json").read_text())["release"]
    assert alone is not None and written["kind"] == alone.kind == "kept"
    assert written == json.loads(json.dumps(alone.to_dict()))
    timings = _decision(outcome)["timings"]
    assert 0.0 <= timings["diff_beside"] <= timings["diff"]


def test_unclean_data_is_rejected_for_the_checks_whatever_the_diff_gave(
        example_files, tmp_path, monkeypatch):
    released = pd.read_csv(example_files["released"], dtype=str)
    released.loc[3, "region"] = "no\x07rth"
    path = tmp_path / "released.csv"
    released.to_csv(path, index=False)
    calls = _reading_beside(monkeypatch, fail=True)
    cfg = gate_config(str(example_files["original"]), str(path), str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-unclean-diff", steps=LocalSteps())
    assert outcome.verdict == "REJECTED"
    assert not any("cannot be read" in r for r in outcome.reasons)
    assert len(calls) == 1
    assert "release" not in json.loads(
        (Path(outcome.folder) / "validation.json").read_text())


def test_a_diff_error_of_clean_data_is_the_run_s_error(example_files, tmp_path, monkeypatch):
    _reading_beside(monkeypatch, fail=True)
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-diff-error", steps=LocalSteps())
    assert outcome.verdict == "ERROR"
    assert any("column 'region' of table 'released' cannot be read" in r
               for r in outcome.reasons), outcome.reasons


def test_the_per_record_file_is_encoded_beside_the_report_and_its_error_is_the_run_s(
        example_files, tmp_path, monkeypatch):
    """per_record.parquet is encoded in a thread while the report renders (pyarrow writes
    without the interpreter's lock): the file written holds the run's per-record frame, its
    encoding ran outside the main thread, and the run waited for it before it returned; an
    encoding that fails ends the run ERROR, its reason written, and no partial outputs."""
    import threading

    import pyarrow as pa

    from riskcore.gate import run as gate_run

    real = gate_run.parquet_bytes
    threads: list[bool] = []

    def encoding(frame: pd.DataFrame) -> bytes:
        threads.append(threading.current_thread() is threading.main_thread())
        return real(frame)

    monkeypatch.setattr(gate_run, "parquet_bytes", encoding)
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-per-record", steps=LocalSteps())
    assert outcome.verdict != "ERROR" and threads == [False]
    written = pd.read_parquet(Path(outcome.folder) / "per_record.parquet")
    assert len(written) == 3000 and list(written["row"]) == list(range(3000))
    assert "k_anonymity.fk" in written.columns

    def failing(frame: pd.DataFrame) -> bytes:
        raise pa.ArrowInvalid("cannot encode column 'k_anonymity.fk'")

    monkeypatch.setattr(gate_run, "parquet_bytes", failing)
    outcome = run_gate(load_gate(cfg), "run-per-record-fails", steps=LocalSteps())
    assert outcome.verdict == "ERROR" and outcome.written
    assert any("ArrowInvalid" in r and "cannot encode" in r for r in outcome.reasons), \
        outcome.reasons
    folder = Path(outcome.folder)
    assert json.loads((folder / "decision.json").read_text())["verdict"] == "ERROR"
    assert not (folder / "per_record.parquet").exists()
    assert not (folder / "measures.json").exists()


def test_the_preparation_checks_and_encoding_share_one_memo_of_distinct_values(
        example_files, tmp_path, monkeypatch):
    """Each column's distinct values are found once for the preparation, the checks and the
    encoding (riskcore.data.factorized_once around the three), not once per step."""
    import riskcore.data as data
    import riskcore.gate.run as run

    seen: dict[str, int | None] = {}

    def watched(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            memo = data._ONCE.get()
            seen[name] = None if memo is None else id(memo)
            return real(*args, **kwargs)
        return step

    for name in ("prepare_tables", "validate_tables", "encode_measured"):
        monkeypatch.setattr(run, name, watched(name, getattr(run, name)))
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-memo", steps=LocalSteps())
    assert outcome.verdict != "ERROR", outcome.reasons
    assert set(seen) == {"prepare_tables", "validate_tables", "encode_measured"}
    assert None not in seen.values() and len(set(seen.values())) == 1
    assert data._ONCE.get() is None  # the memo ends with the encoding


def test_the_per_record_row_numbers_are_delta_encoded_and_the_risks_keep_their_dictionaries():
    """per_record.parquet's ``row`` column (0 .. n-1) is delta-encoded, the risks (a class's
    value repeated on each of its records) keep their dictionaries: the file reads back the
    same frame and is smaller than with the row numbers dictionary-encoded (at 1M rows a
    dictionary filled and given up: 15.5 -> 11.3 MB)."""
    import io

    import numpy as np
    import pyarrow.parquet as pq

    from riskcore.gate.outputs import parquet_bytes

    n = 200_000
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"row": np.arange(n, dtype=np.int64),
                          "k_anonymity.fk": rng.integers(1, 400, n).astype(float),
                          "copies.dcr": rng.random(n)})
    data = parquet_bytes(frame)
    assert pd.read_parquet(io.BytesIO(data)).equals(frame)
    chunks = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    encodings = {chunks.column(i).path_in_schema: chunks.column(i) for i in range(3)}
    assert "DELTA_BINARY_PACKED" in encodings["row"].encodings
    assert not encodings["row"].has_dictionary_page
    assert encodings["k_anonymity.fk"].has_dictionary_page
    plain = io.BytesIO()
    frame.to_parquet(plain, index=False)
    assert len(data) < len(plain.getvalue()) - 4 * n // 2  # the row numbers' 1.6 MB, mostly
