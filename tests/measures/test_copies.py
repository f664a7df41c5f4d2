"""The copies family: planted cases with known answers, brute force on small tables,
missing values and mixed types, determinism across processes, and the gate's outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from riskcore.examples import census_population
from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.copies import copies, holdout_test, nndr
from tests.measures.attacks.gower_brute import brute_gower

COLS = ["region", "age", "sex", "education", "occupation", "income", "diagnosis"]
N = 6000


@pytest.fixture(scope="module")
def population():
    pop = census_population(2 * N, seed=5)[COLS]
    original = pop.iloc[:N].reset_index(drop=True)
    control = pop.iloc[N:].reset_index(drop=True)
    fresh = census_population(N, seed=77)[COLS]  # a generator that learned the distribution
    return original, control, fresh


def run(original, released, control, **kw):
    enc = encode_attack_tables(original, released, control, COLS)
    return copies(enc["original"], enc["released"], enc.get("control"), columns=COLS, seed=0,
                  **kw)


def test_a_release_copying_15_percent_is_caught(population):
    original, control, fresh = population
    k = int(0.15 * N)
    planted = fresh.copy()
    planted.iloc[:k] = original.sample(k, random_state=3).to_numpy()
    f = run(original, planted, control).figures
    chance = run(original, fresh.iloc[k:].reset_index(drop=True), control).figures
    # the planted copies plus the few rows that chance makes equal (income is continuous)
    assert f["exact_share"] == pytest.approx(0.15, abs=0.004)
    assert f["exact_share_control"] < 0.004
    assert f["holdout_share"] > 0.55 and f["holdout_share_ci_low"] > 0.5
    assert f["holdout_p_value"] < 1e-6
    # the same release without the copies: at the chance level, holdout share ~ 0.5
    assert chance["exact_share"] == pytest.approx(chance["exact_share_control"], abs=0.003)
    assert chance["holdout_share_ci_low"] <= 0.5 <= chance["holdout_share_ci_high"]
    assert chance["holdout_p_value"] > 0.01


def test_a_release_identical_to_the_original_is_all_copies(population):
    original, control, _ = population
    f = run(original, original, control).figures
    assert f["exact_share"] == 1.0 and f["original_reproduced_share"] == 1.0
    # ties (a control row equal to the copied one) count half: just under 1
    assert f["holdout_share"] > 0.999 and f["holdout_p_value"] < 1e-12
    assert f["dcr_original_median"] == 0.0 and f["near_share"] == 1.0


def test_a_release_of_control_rows_sits_on_the_control(population):
    original, control, _ = population
    rel = control.sample(N, replace=True, random_state=4).reset_index(drop=True)
    f = run(original, rel, control).figures
    assert f["exact_share_control"] == 1.0
    assert f["exact_share"] < 0.004  # the original's chance level
    assert f["holdout_share"] < 0.01


def test_without_control_the_holdout_share_is_unavailable_with_the_reason(population):
    original, _, fresh = population
    r = run(original, fresh, None)
    assert r.figures["holdout_share"] is None
    assert "control table" in r.unavailable["holdout_share"]
    assert r.figures["exact_share"] is not None


def _brute_gower(a: pd.DataFrame, b: pd.DataFrame, numeric: list[str]) -> np.ndarray:
    """Gower distances by the definition, one pair at a time (mean over columns)."""
    both = pd.concat([a, b])
    rng = {c: (both[c].max() - both[c].min()) or 1.0 for c in numeric}
    out = np.zeros((len(a), len(b)))
    for i, (_, x) in enumerate(a.iterrows()):
        for j, (_, y) in enumerate(b.iterrows()):
            out[i, j] = brute_gower(x, y, numeric, rng) / len(a.columns)
    return out


def test_blocked_dcr_and_nndr_equal_brute_force_with_missing_and_mixed_types():
    rng = np.random.default_rng(11)

    def table(n):
        return pd.DataFrame({
            "num": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n).round(2)),
            "cat": rng.choice(["a", "b", "c", None], size=n),
            "int": rng.integers(0, 5, size=n).astype(float)})

    ori, rel, ctl = table(40), table(25), table(40)
    cols = list(ori.columns)
    enc = encode_attack_tables(ori, rel, ctl, cols)
    res = copies(enc["original"], enc["released"], enc["control"], columns=cols, seed=3,
                 sample_size=25, reference_size=40, near=0.1)
    brute_o = np.sort(_brute_gower(rel, ori, ["num", "int"]), axis=1)
    brute_c = np.sort(_brute_gower(rel, ctl, ["num", "int"]), axis=1)
    np.testing.assert_allclose(res.per_record["dcr"], brute_o[:, 0])
    want_nndr = nndr(brute_o[:, 0], brute_o[:, 1])
    assert res.figures["nndr_original_median"] == pytest.approx(np.median(want_nndr))
    share, ci, p = holdout_test(brute_o[:, 0], brute_c[:, 0])
    assert res.figures["holdout_share"] == pytest.approx(share)
    assert res.figures["near_share"] == pytest.approx(np.mean(brute_o[:, 0] <= 0.1))
    # exact copies by the definition: missing equals missing
    want = [any(all((pd.isna(x[c]) and pd.isna(y[c])) or x[c] == y[c] for c in cols)
                for _, y in ori.iterrows()) for _, x in rel.iterrows()]
    assert res.per_record["exact_copy"].tolist() == [int(w) for w in want]


def test_nndr_and_holdout_edge_cases():
    np.testing.assert_array_equal(nndr(np.array([0.0, 0.1, 0.2, np.inf]),
                                       np.array([0.0, 0.2, np.inf, np.inf])),
                                  [1.0, 0.5, 0.0, 1.0])
    share, ci, p = holdout_test(np.array([0.0, 0.1, 0.2, 0.3]), np.array([0.0, 0.2, 0.1, 0.3]))
    assert share == 0.5 and p == pytest.approx(0.5) and ci[0] < 0.5 < ci[1]


SCRIPT = """
import json, sys
import pandas as pd
from riskcore.examples import census_population
from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.copies import copies
cols = ["region", "age", "sex", "education", "income"]
ori = census_population(800, seed=1)[cols]
rel = census_population(700, seed=2)[cols]
ctl = census_population(600, seed=3)[cols]
enc = encode_attack_tables(ori, rel, ctl, cols)
r = copies(enc["original"], enc["released"], enc["control"], columns=cols, seed=9,
           sample_size=300, reference_size=500)
print(json.dumps({"f": r.figures, "dcr": [None if x != x else x for x in r.per_record["dcr"]]}))
"""


def test_the_same_seed_gives_the_same_figures_in_another_process():
    outs = [subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": str(h), "PATH": ""}).stdout
            for h in (1, 2)]
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert doc["f"]["n_compared"] == 300 and doc["f"]["n_reference"] == 500
    assert sum(x is not None for x in doc["dcr"]) == 300  # the sample, keyed by row number


def test_copies_count_even_when_their_sources_are_outside_the_reference_sample(population):
    """A reference sample of 500 of 6,000 rows holds few of the copied rows' sources; the
    copies, found by hashing over the whole size-m tables, still put the share above 1/2."""
    original, control, fresh = population
    k = int(0.15 * N)
    planted = fresh.copy()
    planted.iloc[:k] = original.sample(k, random_state=3).to_numpy()
    f = run(original, planted, control, reference_size=500, sample_size=3000).figures
    assert f["n_reference"] == 500 and f["n_holdout_size"] == N
    assert f["holdout_share_ci_low"] > 0.5 and f["holdout_p_value"] < 1e-6
    assert f["dcr_original_p05"] == 0.0  # the copies sit at distance 0
