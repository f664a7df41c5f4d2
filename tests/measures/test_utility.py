"""Utility beside risk: the shapes, pair trends and propensity against hand
computation and SDMetrics' QualityReport, IL1s against its formula on sdcMicro's microaggregated
free1, the information-loss figures of a generalized release, and the policy's "not useful"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_tables
from riskcore.gate.policy import Verdict, decide, parse_policy
from riskcore.measures import MeasureInputs, run_measure
from riskcore.results import Status

HERE = Path(__file__).resolve().parent


def _run(original: pd.DataFrame, released: pd.DataFrame, roles: Roles,
         control: pd.DataFrame | None = None, **params):
    frames = {"original": original, "released": released}
    if control is not None:
        frames["control"] = control
    t = encode_tables(frames, roles)
    inputs = MeasureInputs(released=t["released"], original=t["original"],
                           control=t.get("control"), seed=7)
    return run_measure("utility", inputs, params)


def test_shapes_and_pairs_by_hand():
    original = pd.DataFrame({"x": [1.0, 2, 3, 4], "y": [2.0, 4, 6, 8.5],
                             "c": ["a", "a", "b", "c"]})
    released = pd.DataFrame({"x": [2.0, 3, 3, 5], "y": [1.0, 1, 2, 0.5],
                             "c": ["a", "b", "b", None]})
    roles = Roles(quasi_identifiers=["x", "y", "c"])
    res = _run(original, released, roles, information_loss="off")
    f = res.figures
    # ECDFs at 1,2,3,4,5: original .25 .5 .75 1 1; release 0 .25 .75 .75 1 -> D = .25
    assert f["shape.x"] == pytest.approx(0.75)
    # y: original 2,4,6,8.5; release .5,1,1,2: at 2 the release is 1, the original .25
    assert f["shape.y"] == pytest.approx(0.25)
    # c (missing left out): original a .5 b .25 c .25; release a 1/3 b 2/3
    assert f["shape.c"] == pytest.approx(1 - 0.5 * (1 / 6 + 5 / 12 + 1 / 4))
    assert f["column_shapes"] == pytest.approx(np.mean([0.75, 0.25, f["shape.c"]]))
    pairs = {tuple(p["columns"]): p for p in res.details["worst_pairs"]}
    rho_o = np.corrcoef([1, 2, 3, 4], [2, 4, 6, 8.5])[0, 1]
    rho_r = np.corrcoef([2, 3, 3, 5], [1, 1, 2, 0.5])[0, 1]
    assert pairs[("x", "y")]["score"] == pytest.approx(1 - abs(rho_o - rho_r) / 2)
    assert pairs[("x", "y")]["metric"] == "correlation"
    assert f["column_pair_trends"] == pytest.approx(np.mean([p["score"] for p in pairs.values()]))


def test_mixed_pair_bins_the_number_at_the_originals_deciles():
    rng = np.random.default_rng(0)
    n = 2000
    original = pd.DataFrame({"x": rng.normal(0, 1, n), "c": rng.choice(["a", "b"], n)})
    shifted = original.assign(x=original["x"] + 1.0)  # same pairing, shifted numbers
    roles = Roles(quasi_identifiers=["x", "c"])
    ours = _run(original, shifted, roles, information_loss="off")
    score = ours.details["worst_pairs"][0]["score"]
    # by hand: deciles of the original, the same edges for both tables
    edges = np.unique(np.quantile(original["x"], np.linspace(0.1, 0.9, 9)))
    bo = np.searchsorted(edges, original["x"], side="right")
    br = np.searchsorted(edges, shifted["x"], side="right")
    jo = pd.Series(list(zip(bo, original["c"], strict=True))).value_counts(normalize=True)
    jr = pd.Series(list(zip(br, shifted["c"], strict=True))).value_counts(normalize=True)
    tvd = 0.5 * jo.sub(jr, fill_value=0).abs().sum()
    assert score == pytest.approx(1 - tvd)
    # SDMetrics' binning (each table its own range) does not see the shift at all
    theirs = _run(original, shifted, roles, information_loss="off", pair_bins="sdmetrics")
    assert theirs.details["worst_pairs"][0]["score"] == pytest.approx(1.0)
    assert score < 0.75


def test_figures_equal_sdmetrics_quality_report():
    """bench/utility.py's 5,000-row data (a damaged release with missing values); the
    reference is SDMetrics 0.21.0's QualityReport on it (``python -m bench.utility
    --reference``)."""
    from bench.utility import make_tables, pair_scores, riskgate_figures

    peer = json.loads((HERE.parent / "data" / "sdmetrics_quality_5000.json").read_text())
    _, ours = riskgate_figures(*make_tables(5000))
    for column, score in peer["shapes"].items():
        assert ours["figures"][f"shape.{column}"] == pytest.approx(score, abs=1e-6), column
    mine = pair_scores(ours)
    assert len(mine) == len(peer["pairs"]) == 21
    for pair, score in peer["pairs"].items():
        assert mine[pair] == pytest.approx(score, abs=1e-6), pair
    assert ours["figures"]["column_shapes"] == pytest.approx(peer["column_shapes"], abs=1e-6)
    assert ours["figures"]["column_pair_trends"] == pytest.approx(peer["column_pair_trends"],
                                                                  abs=1e-6)


def _people(n: int, seed: int) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": r.integers(18, 90, n), "hours": r.integers(1, 80, n).astype(float),
        "income": np.round(r.lognormal(10, 0.6, n), 0), "sex": r.choice(["f", "m"], n),
        "education": r.choice(list("abcdef"), n),
        "region": r.choice([f"r{i}" for i in range(12)], n)})


PEOPLE = Roles(quasi_identifiers=["age", "sex", "education", "region"],
               sensitive=["income", "hours"])


def test_a_sample_of_the_population_has_pmse_ratio_about_one():
    ratios = [_run(_people(4000, 10 + s), _people(3000, 20 + s), PEOPLE).figures["pmse_ratio"]
              for s in range(6)]
    assert 0.6 < float(np.mean(ratios)) < 1.5, ratios


def test_a_collapsed_column_is_seen_beside_the_control_yardstick():
    original, control = _people(5000, 1), _people(5000, 2)
    release = _people(5000, 3).assign(education="a")  # the synthesizer collapsed a column
    res = _run(original, release, PEOPLE, control=control)
    f = res.figures
    assert f["shape.education"] == pytest.approx(
        1 - 0.5 * (original["education"].value_counts(normalize=True)
                   .sub(pd.Series({"a": 1.0}), fill_value=0).abs().sum()))
    assert f["shape.education"] < 0.25 < f["column_shapes_control"] - 0.5
    assert f["column_shapes"] < f["column_shapes_control"]
    assert f["pmse_ratio"] > 50 > f["pmse_ratio_control"]
    # a synthetic release's rows are not the original's: no information loss figures
    assert "il1s" not in f
    assert "not applicable" in res.unavailable["il1s"]
    assert "synthetic release" in res.unavailable["il1s"]
    without = _run(original, release, PEOPLE)
    assert "no control table" in without.unavailable["column_shapes_control"]


def _free1() -> tuple[pd.DataFrame, pd.DataFrame]:
    from tests.conftest import reference_dir

    folder = reference_dir() / "datasets" / "sdcmicro"
    cols = ["INCOME", "MONEY", "ASSETS", "DEBTS"]
    x = pd.read_csv(folder / "free1.csv")[cols]
    z = pd.read_csv(folder / "free1_cols31-34_microagg_onedims3.csv")[cols]
    return x, z


def test_il1s_of_microaggregated_free1_equals_sdcmicros_formula():
    x, z = _free1()
    # sdcMicro's dUtility(method = "IL1s"): 1/(p n) sum |x - z| / (sqrt(2) sd(x)), R's sd
    expected = float((np.abs(x - z) / (math.sqrt(2) * x.std(ddof=1))).to_numpy().sum()
                     / (x.shape[0] * x.shape[1]))
    roles = Roles(quasi_identifiers=[], sensitive=list(x.columns))
    res = _run(x, z, roles)
    assert res.status is Status.OK
    assert res.figures["row_agreement"] > 0.5  # microaggregation keeps the rows
    assert res.figures["il1s"] == pytest.approx(expected, rel=1e-12)
    assert 0 < res.figures["il1s"] < 0.2
    assert res.figures["suppressed_share"] == 0


def test_generalized_and_suppressed_release_reports_its_information_loss():
    n = 400
    rng = np.random.default_rng(3)
    original = pd.DataFrame({"age": rng.integers(20, 60, n),
                             "sex": rng.choice(["f", "m"], n),
                             "zip": rng.choice(["12345", "12399", "12011"], n)})
    released = original.copy()
    released["age"] = [f"[{10 * (a // 10)},{10 * (a // 10) + 10})" for a in original["age"]]
    released["zip"] = released["zip"].str[:3] + "**"
    released.loc[:39, "sex"] = "*"  # 40 suppressed cells
    from riskcore.gate.config import tables_config
    from riskcore.gate.encoding import encode

    cfg = tables_config({"released": "released.csv", "original": "original.csv",
                         "roles": {"quasi_identifiers": ["age", "sex", "zip"]},
                         "generalization": {"age": "interval", "zip": {"mask": "*"}}}, "test")
    res = run_measure("utility", encode(cfg, {"original": original, "released": released}), {})
    assert res.status is Status.OK, res.reason
    f = res.figures
    assert f["suppressed.sex"] == pytest.approx(0.1)
    assert f["suppressed_share"] == pytest.approx(40 / (3 * n))
    # intervals of width 10 over the labels' range 20-60: 10/40 each
    assert f["granularity.age"] == pytest.approx(0.25)
    assert f["granularity.zip"] == pytest.approx(2 / 5)
    assert f["granularity.sex"] == pytest.approx(0.1)  # released as is, 40 cells suppressed
    assert f["generalization_intensity"] == pytest.approx((0.25 + 0.1 + 0.4) / 3)


def test_a_failed_utility_check_rejects_as_not_useful():
    original = _people(3000, 1)
    release = _people(3000, 3).assign(education="a")
    res = _run(original, release, PEOPLE)
    policy = parse_policy({"version": 1, "checks": ["utility.column_shapes >= 0.95"]})
    decision = decide(policy, {"utility": res})
    assert decision.verdict is Verdict.REJECTED
    assert "not useful" in decision.reasons[0]
    assert "not safe" not in decision.reasons[0]
