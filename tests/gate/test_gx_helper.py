"""Great Expectations' helper process gives the checks this process would give, and when it is
gone the checks run here, with the same results."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

from riskcore.data import Roles
from riskcore.gate import gx_helper
from riskcore.gate.cleanliness import validate_tables

ROLES = Roles(("region", "age", "sex"), sensitive=("diagnosis",), weight="weight")


def _messy() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(4)
    n = 400
    original = pd.DataFrame({
        "region": rng.choice(["north", "south", "east"], n),
        "age": rng.integers(18, 90, n).astype(str),
        "sex": rng.choice(["f", "m"], n),
        "diagnosis": rng.choice(["a", "b", "c"], n),
        "weight": rng.uniform(1, 5, n).round(2).astype(str)})
    released = original.copy()
    released.loc[[3, 17], "age"] = "forty"  # text in a number column
    released.loc[5, "region"] = "no\x07rth"  # a control character
    released.loc[9, "diagnosis"] = "b\ufffd"  # undecodable in the declared encoding
    released["sex"] = np.nan  # an empty key column
    return {"original": original, "released": released}


def _validate_here(frames: dict[str, pd.DataFrame]) -> dict:
    gx_helper.stop()
    assert gx_helper.current() is None
    return validate_tables(frames, ROLES).to_dict()


def test_the_helper_gives_the_same_checks_as_this_process():
    frames = _messy()
    here = _validate_here(frames)
    gx_helper.start()
    helper = gx_helper.current()
    assert helper is not None and helper.proc.pid != os.getpid()
    there = validate_tables(frames, ROLES)
    assert there.to_dict() == here
    failed = {(c["table"], c["column"], c["check"]) for c in here["checks"]
              if not c["success"]}
    # the planted faults are found (the test would pass vacuously on a clean table)
    assert ("released", "age", "values are numbers") in failed
    assert ("released", "region", "no control or non-printable characters") in failed
    assert ("released", "diagnosis", "characters decodable in the declared encoding") in failed
    assert ("released", "sex", "key column is not empty") in failed
    assert not any(t == "original" for t, _, _ in failed)


def test_a_dead_helper_falls_back_to_this_process_with_the_same_checks():
    frames = _messy()
    here = _validate_here(frames)
    gx_helper.start()
    helper = gx_helper.current()
    assert helper is not None
    validate_tables(frames, ROLES)  # it answers once
    os.kill(helper.proc.pid, signal.SIGKILL)
    for _ in range(50):
        if helper.proc.poll() is not None:
            break
        time.sleep(0.1)
    assert gx_helper.current() is None
    again = validate_tables(frames, ROLES)
    assert again.to_dict() == here
    gx_helper.start()  # a new one replaces it
    assert gx_helper.current() is not None and gx_helper.current() is not helper


@pytest.fixture(autouse=True)
def _one_helper_per_test():
    yield
    gx_helper.stop()
    gx_helper.serve_families(False)


def test_starting_the_helper_loads_no_data_library() -> None:
    """The CLI starts the helper before anything else: importing it must not pull in pandas
    (or the config's pydantic models), whose import is what the helper is meant to overlap."""
    import subprocess
    import sys

    code = ("import sys, riskcore.gate.gx_helper; "
            "print(sorted(m for m in ('pandas', 'pyarrow', 'pydantic', 'riskcore.gate.config') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
    import riskcore.gate as gate

    assert sorted(gate.__all__) == sorted(gate._API)
    assert all(getattr(gate, name) is not None for name in gate.__all__)


def test_the_helper_imports_great_expectations_without_its_unused_back_ends() -> None:
    """In the helper, GX starts without SQLAlchemy and boto3, and with scipy.stats and altair
    (its KL-divergence expectation's charts) not imported until used (about a third less
    CPU beside the gate's read); both still work when something uses them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from riskcore.gate.gx_helper import OnFirstUse, _lighten\n"
        "_lighten()\n"
        "from riskcore.gate.gx_suites import gx_context\n"
        "gx_context()\n"
        "real = lambda m: sys.modules.get(m) is not None and "
        "not isinstance(sys.modules[m], OnFirstUse)\n"
        "print([m for m in ('sqlalchemy', 'boto3', 'scipy.stats', 'altair', 'altair.vegalite', "
        "'great_expectations') if real(m)])\n"
        "import scipy.stats\n"
        "print(float(scipy.stats.norm.cdf(0.0)), real('scipy.stats'))\n"
        "from great_expectations.expectations.core import "
        "expect_column_kl_divergence_to_be_less_than as kl\n"
        "print(kl.alt.Chart.__name__, real('altair'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    assert out == ["['great_expectations']", "0.5 True", "Chart True"]


def _same_reading(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.to_dict() == b.to_dict()
    assert (a.linked is None) == (b.linked is None)
    if a.linked is not None:
        assert np.array_equal(a.linked, b.linked)
        assert np.array_equal(a.links.original_row, b.links.original_row)
        assert np.array_equal(a.links.quality, b.links.quality)


def test_the_helper_reads_a_release_as_this_process_does() -> None:
    """The release's reading (riskgate diff) runs in the helper, on the other core, once the
    helper is ready: kinds, columns, evidence and every link are this process's, a mixed
    release read again on all its rows too; with the helper gone it is read here."""
    from riskcore.anatomy import read_release
    from riskcore.gate.run import _read_release
    from tests.anatomy.test_diff import as_read
    from tests.release_corpus import corpus

    original, control, releases = corpus(n=1500)
    helper = _ready_helper()
    kinds = set()
    for release in releases:
        if release.name not in ("k-anonymized", "synthetic", "mixed", "kept-dropped"):
            continue
        args = (as_read(original), as_read(release.released), as_read(control))
        kwargs = {"types": None, "markers": (), "seed": 5, "sample": 400}
        here = read_release(*args, **kwargs)
        there = helper.read_release(args, kwargs)
        _same_reading(there, here)
        kinds.add(there.kind)
        if there.kind == "mixed":
            assert not there.sampled and there.linked is not None  # every row linked
    assert kinds == {"kept", "synthetic", "mixed"}
    # in the gate: the helper reads it; with the helper gone, this process does, the same
    gate = _gate_for(original)
    frames = {"original": as_read(original), "released": as_read(releases[0].released),
              "control": None}
    asked: list[int] = []
    real = type(helper).read_release

    def counted(self, args, kwargs):  # type: ignore[no-untyped-def]
        asked.append(1)
        return real(self, args, kwargs)

    type(helper).read_release = counted  # type: ignore[method-assign]
    try:
        there = _read_release(gate, frames)
    finally:
        type(helper).read_release = real  # type: ignore[method-assign]
    assert asked == [1]
    gx_helper.stop()
    _same_reading(_read_release(gate, frames), there)


def test_the_helper_is_sent_the_released_rows_the_diff_links(monkeypatch) -> None:
    """The gate sends the helper the seeded sample of released rows the diff links, not every
    row (at 1M rows half the bytes it was sent), and reads what this process reads from the
    whole release; a mixed release is then sent whole, its every row linked (and its sample
    not linked again)."""
    from riskcore.anatomy import read_release
    from riskcore.gate import run
    from tests.anatomy.test_diff import as_read
    from tests.release_corpus import corpus

    monkeypatch.setattr(run, "DIFF_ROWS", 800)
    original, _, releases = corpus(n=1500)
    helper = _ready_helper()
    gate = _gate_for(original)
    sent: list[tuple[int, int | None, int | None]] = []
    real = type(helper).read_release

    def counted(self, args, kwargs):  # type: ignore[no-untyped-def]
        sent.append((len(args[1]), kwargs.get("of_rows"), kwargs.get("sample")))
        return real(self, args, kwargs)

    monkeypatch.setattr(type(helper), "read_release", counted)
    for name in ("kept-dropped", "mixed"):
        released = next(r for r in releases if r.name == name).released
        frames = {"original": as_read(original), "released": as_read(released),
                  "control": None}
        sent.clear()
        there = run._read_release(gate, frames)
        cols = list(gate.config.role_spec.measured_columns)
        here = read_release(frames["original"][cols], frames["released"][cols],
                            types={}, markers=(), seed=5, sample=800)
        _same_reading(there, here)
        if name == "mixed":
            assert there.kind == "mixed" and not there.sampled
            # the whole release read on every row, its sample not read again
            assert sent == [(800, len(released), 800), (len(released), None, None)]
        else:
            assert there.sampled and sent == [(800, len(released), 800)]


def test_the_helper_faults_in_the_diffs_memory_while_the_tables_are_prepared() -> None:
    """Once the tables are loaded, the helper is asked to fault in the memory the diff will
    take (200 bytes a row it reads), answers at once, and does it before the next request:
    its resident memory grows by that much, and the next request is served."""
    from riskcore.gate import run

    helper = _ready_helper()

    def resident_mb() -> float:
        with open(f"/proc/{helper.proc.pid}/status") as f:
            line = next(x for x in f if x.startswith("VmRSS"))
        return int(line.split()[1]) / 1024

    n = 150_000  # the original's rows, and the released sample's 20,000
    frames = {"original": pd.DataFrame({"x": np.arange(n)}),
              "released": pd.DataFrame({"x": np.arange(n)}), "control": None}
    before = resident_mb()
    run._reserve_for_diff(frames)
    helper.run_suites([])  # the next request: served once the memory is in
    grown = resident_mb() - before
    want = run.RESERVE_PER_ROW * (n + run.DIFF_ROWS) / 2**20
    assert want * 0.9 <= grown <= want + 48, (grown, want)


def _ready_helper() -> gx_helper.Helper:
    """A helper started and past its start-up (GX's import)."""
    gx_helper.start()
    helper = gx_helper.current()
    assert helper is not None
    for _ in range(600):
        if helper.ready():
            break
        time.sleep(0.1)
    assert helper.ready()
    return helper


def _gate_for(original: pd.DataFrame):  # type: ignore[no-untyped-def]
    """A gate on the corpus's columns (no table is read)."""
    from riskcore.gate.config import load_gate

    return load_gate({
        "release_id": "helper-diff", "original": "original.csv", "released": "released.csv",
        "output_url": "out", "seed": 5,
        "roles": {"quasi_identifiers": ["region", "zip", "age", "sex"],
                  "sensitive": ["diagnosis"]},
        "measures": {"k_anonymity": {}},
        "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}})


def test_the_alc_runs_in_the_helper_and_gives_this_process_figures(tmp_path, monkeypatch):
    """The ALC of a survey-sized gate, or of any gate when more follow in the process (several
    configs in one call), runs in the helper on an interpreter lock of its own, set up there
    first: the very figures and per-record predictions this process gives; not for a single
    small gate, nor above the rows the helper takes, and with the helper gone here again."""
    import numpy as np

    from riskcore.examples import census_population, write_example
    from riskcore.gate import run as gate_run
    from riskcore.gate.kernels import _encoded
    from riskcore.measures import family, run_measure

    write_example(tmp_path, n=1_500, seed=3)
    census_population(1_500, 4).to_csv(tmp_path / "control.csv", index=False)
    inputs = _encoded(tmp_path, "released", {}, 3)
    params = {"models": ["logistic_regression", "one_to_one"], "max_attacks": 300}
    here = run_measure("alc", inputs, params)
    helper = _ready_helper()
    gate = _gate_for(census_population(10))
    gate.measures["alc"] = gate.measures["k_anonymity"]
    small = {"original": census_population(1_500), "released": census_population(1_500)}
    large = {"original": census_population(10), "released": census_population(
        gate_run.HELPER_FROM_ROWS)}
    huge = {"original": census_population(10), "released": census_population(
        gate_run.HELPER_ROWS + 1)}
    assert gate_run._helper_families(gate, small) == []  # a single small gate: here
    assert gate_run._helper_families(gate, large) == ["alc"]
    assert gate_run._helper_families(gate, huge) == []
    gx_helper.serve_families()  # more gates follow: any size up to the helper's rows
    assert gate_run._helper_families(gate, small) == ["alc"]
    assert gate_run._helper_families(gate, huge) == []
    assert gate_run._helper_for("alc", inputs) is None  # not set up yet
    gate_run._start_helper_families(gate, small)
    for _ in range(600):
        if helper.has_families(["alc"]) and helper.ready():
            break
        time.sleep(0.1)
    assert gate_run._helper_for("alc", inputs) is helper
    assert gate_run._helper_for("copies", inputs) is None
    asked: list[int] = []
    real = type(helper).measure

    def counted(self, *args):  # type: ignore[no-untyped-def]
        asked.append(1)
        return real(self, *args)

    monkeypatch.setattr(type(helper), "measure", counted)
    there = gate_run.measure("alc", inputs, family("alc").parse(params))
    assert asked == [1]
    assert there.to_dict() == here.to_dict()
    assert here.records["alc_predictions"]  # the predictions per target, row for row
    for kind in ("per_record", "records"):
        ours, theirs = getattr(here, kind), getattr(there, kind)
        assert ours.keys() == theirs.keys()
        for key, value in ours.items():
            pairs = value.items() if isinstance(value, dict) else [("", value)]
            for column, array in pairs:
                other = theirs[key][column] if column else theirs[key]
                assert np.array_equal(np.asarray(array), np.asarray(other))
    monkeypatch.setattr(gate_run, "HELPER_ROWS", 1_000)  # above it: here
    assert gate_run._helper_for("alc", inputs) is None
    monkeypatch.undo()
    os.kill(helper.proc.pid, signal.SIGKILL)  # gone: here, the same
    for _ in range(50):
        if helper.proc.poll() is not None:
            break
        time.sleep(0.1)
    again = gate_run.measure("alc", inputs, family("alc").parse(params))
    assert again.to_dict() == here.to_dict()


def test_a_helper_taken_back_drops_what_its_last_user_left_unread() -> None:
    """What a standby does with the helper of a gate process that has exited
    (:meth:`gx_helper.Helper.take_back`): the start-up message and an answer nobody read are
    dropped, and the next user gets the checks it would get from a new helper. A request cut
    off mid-message (a process that ended while writing) makes the helper unusable: it is
    ended within the time given, never handed on."""
    frames = _messy()
    here = _validate_here(frames)
    helper = gx_helper.Helper()
    try:
        # a user that asked and ended before the answer came (it never read "ready" either):
        # read as this process's answer, that one would give it no checks at all
        gx_helper._send(helper.proc.stdin, ("suites", []))
        assert helper.take_back(60.0)
        gx_helper._HELPER[:] = [helper]  # this process's helper now, as in a forked gate
        assert validate_tables(frames, ROLES).to_dict() == here
        assert helper.take_back(5.0)  # idle: at once, again
        # half a request: the helper waits for the rest, the answer never comes
        helper.proc.stdin.write(gx_helper._HEADER.pack(10_000) + b"\x80\x05")
        helper.proc.stdin.flush()
        t0 = time.monotonic()
        assert not helper.take_back(1.0)
        assert time.monotonic() - t0 < 5 and not helper.alive()
    finally:
        gx_helper._HELPER[:] = []
        helper.close(wait_s=1)

