"""What every registered measure family promises, run over the registry (no list of our own).

For each family on one small table pair: the result serializes to JSON that validates against
the measures schema and survives a round trip; every figure the family declares for its
parameters is reported (finite, or named as unavailable with a reason) with the declared
direction; no NaN or infinity reaches the document; the same seed gives the same document; and
the families computed from equivalence classes give the same figures when the rows are shuffled.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_tables
from riskcore.gate.outputs import measures_document
from riskcore.gate.schemas import validate
from riskcore.measures import FAMILIES, MeasureInputs, run_measure
from riskcore.measures.releases import Lineage, ReleaseTables
from riskcore.results import MeasureResult

ROLES = Roles.from_mapping({
    "quasi_identifiers": ["region", "sex", "education", "income"],
    "sensitive": ["diagnosis"], "weight": "weight", "household": "household_id",
    "types": {"income": "continuous"}})

#: parameters a family needs beyond its defaults (kept small so the suite stays quick)
PARAMS: dict[str, dict[str, Any]] = {
    "population": {"population_size": 40_000},
    "singling_out": {"n_attacks": 60},
    "linkability": {"aux_a": ["region", "sex"], "aux_b": ["education", "income"],
                    "n_attacks": 60},
    "inference": {"n_attacks": 60},
    "alc": {"max_attacks": 80, "per_secret": 1, "models": ["logistic_regression"]},
    "membership": {"n_targets": 40, "reference_size": 200},
    "utility": {"propensity_rows": 400},
}

#: families computed from the release's equivalence classes: row order cannot matter
CLASS_BASED = {"k_anonymity", "reid", "sdc", "suda", "l_diversity", "t_closeness", "population"}


def _tables(seed: int = 4, n: int = 500) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    original = pd.DataFrame({
        "region": rng.choice(["north", "south", "east", "west", "centre"], n),
        "sex": rng.choice(["f", "m"], n),
        "education": rng.choice(["primary", "secondary", "tertiary", "none"], n,
                                p=[0.3, 0.4, 0.25, 0.05]),
        "income": rng.lognormal(10, 0.4, n).round(0),
        "diagnosis": rng.choice(["a", "b", "c", "d", "e", "f"], n),
        "household_id": rng.integers(0, n // 2, n),
    })
    # one sample weight per household (sdcMicro's household risk needs it)
    original["weight"] = (20 + (original["household_id"] * 7919) % 100).astype(float)
    released = original.copy()
    released["income"] = (released["income"] * rng.normal(1, 0.05, n)).round(-2)
    control = original.iloc[::5].copy()
    return {"original": original, "released": released, "control": control}


def _lineage(frames: dict[str, pd.DataFrame]) -> Lineage:
    """For composition: an earlier release of the same people with incomes to the
    thousand (what the gate reads back from an earlier decision); the new release's incomes,
    noised, find no one, so its classes are on the other quasi-identifiers."""
    qis, sensitive = tuple(ROLES.quasi_identifiers), tuple(ROLES.sensitive)
    earlier = frames["original"].copy()
    earlier["income"] = pd.to_numeric(earlier["income"]).round(-3)
    return Lineage(frames["original"],
                   ReleaseTables("this release", frames["released"],
                                 tuple(c for c in qis if c != "income"), sensitive,
                                 original=frames["original"]),
                   (ReleaseTables("earlier", earlier, qis, sensitive,
                                  {"income": {"round": 1000}}),),
                   control=frames.get("control"))


def _inputs(tables: dict[str, pd.DataFrame], seed: int = 9) -> MeasureInputs:
    enc = encode_tables(tables, ROLES)
    return MeasureInputs(released=enc["released"], original=enc["original"],
                         control=enc["control"], seed=seed, lineage=_lineage(tables))


def _result(fam: Any, tables: dict[str, pd.DataFrame]) -> MeasureResult:
    return run_measure(fam.name, _inputs(tables), PARAMS.get(fam.name, {}))


def _document(fam: Any, tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    return _result(fam, tables).to_dict()


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return _tables()


@pytest.fixture(scope="module")
def results(tables) -> dict[str, MeasureResult]:
    return {fam.name: _result(fam, tables) for fam in FAMILIES}


@pytest.fixture(scope="module")
def documents(results) -> dict[str, dict[str, Any]]:
    return {name: r.to_dict() for name, r in results.items()}


def _finite_everywhere(value: Any, where: str) -> None:
    if isinstance(value, float):
        assert math.isfinite(value), where
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite_everywhere(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite_everywhere(v, f"{where}[{i}]")


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_every_declared_figure_is_reported_with_its_direction(fam, documents):
    doc = documents[fam.name]
    assert doc["measure"] == fam.name and doc["status"] == "ok", doc.get("reason")
    declared = fam.figures(fam.parse(PARAMS.get(fam.name, {})), ROLES)
    assert declared, f"{fam.name} declares no figure"
    for name, higher in declared.items():
        value = doc["figures"].get(name)
        if value is None:  # not available: the result says why
            assert name in doc.get("unavailable", {}), (fam.name, name)
        else:
            assert isinstance(value, (int, float)) and math.isfinite(value), (fam.name, name)
        want = "higher_is_riskier" if higher else "lower_is_riskier"
        assert doc["direction"][name] == want, (fam.name, name)


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_documents_validate_round_trip_and_hold_no_nan(fam, results, documents):
    doc = documents[fam.name]
    text = json.dumps(doc, allow_nan=False)  # raises on NaN or infinity anywhere
    assert json.loads(text) == doc
    _finite_everywhere(doc, fam.name)
    validate(measures_document("common", None, {fam.name: results[fam.name]}, {}))


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_the_same_seed_gives_the_same_document(fam, tables, documents):
    again = _document(fam, tables)
    assert json.dumps(again, sort_keys=True) == json.dumps(documents[fam.name], sort_keys=True)


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.name in CLASS_BASED],
                         ids=lambda f: f.name)
def test_class_based_figures_do_not_depend_on_row_order(fam, tables, documents):
    order = np.random.default_rng(1).permutation(len(tables["released"]))
    shuffled = {**tables, "released": tables["released"].iloc[order].reset_index(drop=True),
                "original": tables["original"].iloc[order].reset_index(drop=True)}
    doc = _document(fam, shuffled)
    for name, value in documents[fam.name]["figures"].items():
        if value is None:
            assert doc["figures"][name] is None, name
        else:
            assert doc["figures"][name] == pytest.approx(value, rel=1e-12, abs=1e-12), name


def test_the_registry_and_the_documents_agree():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    assert CLASS_BASED <= set(names)
    assert set(PARAMS) <= set(names)


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.needs], ids=lambda f: f.name)
def test_a_missing_table_gives_a_reason_not_a_crash(fam, tables):
    enc = encode_tables({"released": tables["released"]}, ROLES)
    doc = run_measure(fam.name, MeasureInputs(released=enc["released"]),
                      PARAMS.get(fam.name, {})).to_dict()
    assert doc["status"] != "ok"
    assert all(f"the {t} table" in doc["reason"] for t in fam.needs), doc["reason"]
    assert all(v is None for v in doc["figures"].values())


START_UP_CHECK = """
import json, sys
sys.path.insert(0, {here!r})
import test_common as tc
from riskcore.measures import FAMILIES, start_up
tables = tc._tables()
attacks = [f for f in FAMILIES if f.start_up is not None and not f.fits_models]
models = [f for f in FAMILIES if f.start_up is not None and f.fits_models]
out = {{}}
for group in (attacks, models):
    start_up([f.name for f in group]).join()
    for fam in group:
        before = set(sys.modules)
        tc._result(fam, tables)
        out[fam.name] = sorted(m for m in set(sys.modules) - before
                               if m.split(".")[0] in ("numba", "llvmlite", "scipy", "sklearn"))
    if group is attacks:
        out["scipy.stats after the attacks"] = "scipy.stats" in sys.modules
print(json.dumps(out))
"""


def test_a_familys_start_up_leaves_its_first_run_nothing_to_import():
    """Each family's one-off set-up (numba's registries, scipy.optimize, the
    models' scikit-learn) is its ``start_up``, which a gate runs while its tables load; the
    family's first run in a fresh process then imports none of numba, scipy or scikit-learn.
    The attack families never import scipy.stats (half a second of one thread): their normal
    tails come from the standard library."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", START_UP_CHECK.format(
        here=str(Path(__file__).parent))], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    with_start_up = {f.name for f in FAMILIES if f.start_up is not None}
    assert with_start_up >= {"singling_out", "linkability", "inference", "copies",
                             "membership", "alc", "utility"}
    assert out.pop("scipy.stats after the attacks") is False
    assert out == {name: [] for name in with_start_up}


def _read_as_the_gate_does(folder: Any, tables: dict[str, pd.DataFrame],
                           markers: list[str], per_column: dict[str, list[str]]
                           ) -> MeasureInputs:
    from riskcore.gate.config import tables_config
    from riskcore.gate.encoding import encode
    from riskcore.gate.inputs import load_input
    from riskcore.gate.prepare import prepare_tables

    for name, df in tables.items():
        df.to_csv(folder / f"{name}.csv", index=False)
    cfg = tables_config({**{n: str(folder / f"{n}.csv") for n in tables},
                         "roles": {"quasi_identifiers": list(ROLES.quasi_identifiers),
                                   "sensitive": list(ROLES.sensitive), "weight": ROLES.weight,
                                   "household": ROLES.household,
                                   "types": {"income": "continuous",
                                             "household_id": "categorical"},
                                   "missing_values": per_column},
                         "seed": 9, "missing_values": markers}, "test")
    frames, infos = {}, []
    for name in tables:
        frames[name], info = load_input(cfg, name)
        infos.append(info)
    frames, _ = prepare_tables(cfg, frames, infos)
    inputs = encode(cfg, frames)
    object.__setattr__(inputs, "lineage", _lineage(frames))
    return inputs


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_markers_declared_give_the_documents_of_missing_cells(fam, tmp_path):
    """Tables as survey tools write them (N in a text column, -9 in a numeric one, the
    release's codes as 1.0 where the original writes 1) give, with the markers declared, the
    very documents of the same tables with those cells empty and the codes alike."""
    base = _tables()
    rng = np.random.default_rng(11)
    clean = {name: df.copy() for name, df in base.items()}
    for df in clean.values():
        df["education"] = df["education"].where(rng.random(len(df)) > 0.05)
        df["income"] = df["income"].where(rng.random(len(df)) > 0.05)
    marked = {name: df.copy() for name, df in clean.items()}
    for name, df in marked.items():
        df["education"] = df["education"].fillna("N")
        df["income"] = df["income"].fillna(-9)
        if name == "released":  # household codes written as floats by a generator
            df["household_id"] = df["household_id"].astype(float)
    (tmp_path / "clean").mkdir()
    (tmp_path / "marked").mkdir()
    params = PARAMS.get(fam.name, {})
    want = run_measure(fam.name, _read_as_the_gate_does(tmp_path / "clean", clean, [], {}),
                       params).to_dict()
    got = run_measure(fam.name, _read_as_the_gate_does(tmp_path / "marked", marked, ["N"],
                                                       {"income": ["-9"]}), params).to_dict()
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_the_families_that_take_longest_start_first():
    """Behind fewer workers than families, the families that fit models start first, then
    the row attacks and copies, the whole-table families, and the equivalence classes last,
    each group in the config's order."""
    from riskcore.measures import longest_first

    names = ["k_anonymity", "reid", "copies", "alc", "singling_out", "utility", "suda"]
    assert longest_first(names) == ["alc", "utility", "copies", "singling_out", "suda",
                                    "k_anonymity", "reid"]
