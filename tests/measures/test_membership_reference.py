"""Never laxer than a plain attack: the membership family's worst case against the simplest
membership attack, one nearest neighbour over one-hot categories and standardized numbers
(Euclidean), every original row a member and every control row a non-member, written here in
a few lines of numpy. On releases with exact copies, near copies, integer codes an attacker
reads as codes, and honest synthetic rows, the family's AUC and TPR at 1 % false positives are
at least the plain attack's (within the sampling interval), and honest rows stay quiet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from riskcore.gate.config import tables_config
from riskcore.gate.encoding import encode
from riskcore.measures import run_measure
from riskcore.measures.membership import roc, tpr_at_fpr

N = 3000
CODES = ["zip", "region"]
CATEGORIES = ["sex", "education", *CODES]
NUMBERS = ["age", "hours", "income"]


def people(n: int, seed: int) -> pd.DataFrame:
    """A population with integer codes: a zip (about 300 values with gaps) and a region."""
    r = np.random.default_rng(seed)
    zips = np.random.default_rng(99).choice(np.arange(1000, 99000, 97), 300, replace=False)
    return pd.DataFrame({
        "age": r.integers(18, 90, n), "hours": r.integers(1, 80, n),
        "income": np.round(r.lognormal(10, 0.6, n), 0),
        "sex": r.choice(["f", "m"], n), "education": r.choice(list("abcdef"), n),
        "zip": r.choice(zips, n), "region": r.choice(np.arange(10, 130, 10), n)})


def release(kind: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    original, control, new = people(N, 1), people(N, 2), people(N, 3)
    rng = np.random.default_rng(4)
    k = int(0.15 * N)
    copied = original.iloc[rng.choice(N, k, replace=False)].copy()
    if kind == "near":
        copied["age"] += rng.choice([-1, 1], k)
        copied["hours"] += rng.choice([-1, 1], k)
        copied["income"] = np.round(copied["income"] * (1 + rng.uniform(-0.03, 0.03, k)))
    if kind == "honest":
        return original, new, control
    return original, pd.concat([new.iloc[k:], copied], ignore_index=True), control


def plain_attack(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame
                 ) -> tuple[float, float]:
    """AUC and TPR at 1 % FPR of the plain 1-NN attack: codes one-hot like every category,
    numbers standardized on the release, Euclidean distance to the closest released row."""
    def features(df: pd.DataFrame) -> np.ndarray:
        cats = [(df[c].to_numpy()[:, None] == np.unique(released[c])[None, :]).astype(float)
                for c in CATEGORIES]
        nums = [((df[c] - released[c].mean()) / released[c].std()).to_numpy()[:, None]
                for c in NUMBERS]
        return np.hstack([*cats, *nums])

    rel = features(released)

    def score(df: pd.DataFrame) -> np.ndarray:
        x = features(df)
        d2 = (x * x).sum(1)[:, None] + (rel * rel).sum(1)[None, :] - 2 * x @ rel.T
        return -d2.min(axis=1)

    pos, neg = score(original), score(control)
    auc = float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))
    fpr, tpr = roc(pos, neg)
    return auc, tpr_at_fpr(fpr, tpr, 0.01)


def family(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame):
    """The membership family as the gate runs it: the tables read, typed and encoded by the
    gate's own step (codes read as categories)."""
    text = {name: df.astype(str).astype("category") for name, df in
            (("original", original), ("released", released), ("control", control))}
    cfg = tables_config({"released": "r.csv", "original": "o.csv", "control": "c.csv",
                         "seed": 1, "roles": {"quasi_identifiers": ["age", "sex", "education",
                                                                     "zip", "region"],
                                              "sensitive": ["income", "hours"]}}, "test")
    inputs = encode(cfg, text)
    assert inputs.released.column("zip").values is None  # read as a code
    return run_measure("membership", inputs, {})


@pytest.mark.parametrize("kind", ["exact", "near"])
def test_the_worst_case_is_at_least_the_plain_attack(kind):
    original, released, control = release(kind)
    auc, tpr = plain_attack(original, released, control)
    result = family(original, released, control)
    f = result.figures
    assert f["auc_high"] >= auc and f["auc"] >= auc - 0.01, (f["auc"], auc)
    assert f["tpr_at_fpr_1pct_high"] >= tpr and f["tpr_at_fpr_1pct"] >= tpr - 0.02, (
        f["tpr_at_fpr_1pct"], tpr)
    assert f["tpr_at_fpr_1pct"] > 0.1  # the planted rows are found
    assert f["n_members"] == N and f["n_non_members"] == N  # every member, every non-member


def test_honest_rows_stay_below_the_bars():
    original, released, control = release("honest")
    auc, tpr = plain_attack(original, released, control)
    f = family(original, released, control).figures
    assert f["tpr_at_fpr_1pct"] < 0.05 and f["auc"] < 0.57, f
    assert tpr < 0.05 and auc < 0.57


def test_the_worst_case_holds_under_either_reading_of_the_codes():
    """An attacker may read zip and region as numbers too: the family measures them both ways
    and reports at least the plain attack under either reading."""
    original, released, control = release("near")
    global CATEGORIES, NUMBERS
    saved = CATEGORIES, NUMBERS
    CATEGORIES, NUMBERS = ["sex", "education"], [*saved[1], *CODES]
    try:
        auc, tpr = plain_attack(original, released, control)
    finally:
        CATEGORIES, NUMBERS = saved
    result = family(original, released, control)
    f = result.figures
    assert f["tpr_at_fpr_1pct_high"] >= tpr and f["tpr_at_fpr_1pct"] >= tpr - 0.02
    assert f["auc"] >= auc - 0.01
    assert set(result.details["readings"]["both_ways"]) >= {"zip", "region"}
