"""Membership inference: the figures against brute force, a planted near-copy
release caught while its exact-copy share stays 0, an independent resample of the same
population that shows no membership, and no control that is never a pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_tables
from riskcore.measures import MeasureInputs, run_measure
from riskcore.measures.copies import copies
from riskcore.measures.membership import attack_figures, auc_delong, membership, roc
from riskcore.results import Status

COLUMNS = ["age", "hours", "income", "sex", "education", "region"]
QIS = ["age", "sex", "education", "region"]
ROLES = Roles(quasi_identifiers=QIS, sensitive=["income", "hours"])


def _people(n: int, seed: int) -> pd.DataFrame:
    """The population bench/membership.py draws its tables from (independent columns)."""
    from bench.membership import people

    return people(n, seed)


def _near_copies(original: pd.DataFrame, synthetic: pd.DataFrame, share: float, seed: int
                 ) -> pd.DataFrame:
    """A leaky release: a synthetic table with ``share`` of it replaced by original rows
    with small noise (age +-1, hours +-1, income +-3 %)."""
    rng = np.random.default_rng(seed)
    k = int(share * len(synthetic))
    near = original.iloc[rng.choice(len(original), k, replace=False)].copy()
    near["age"] += rng.choice([-1, 1], k)
    near["hours"] += rng.choice([-1, 1], k)
    near["income"] = np.round(near["income"] * (1 + rng.uniform(-0.03, 0.03, k)))
    return pd.concat([synthetic.iloc[k:], near], ignore_index=True)


def _brute(pos: np.ndarray, neg: np.ndarray) -> tuple[float, dict[float, float], float]:
    """AUC by all pairs; TPR at FPR by every threshold; advantage by every threshold."""
    auc = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    thresholds = np.unique(np.r_[pos, neg, np.inf])
    points = [(np.mean(neg >= t), np.mean(pos >= t)) for t in thresholds]
    at = {a: max(t for f, t in points if f <= a) for a in (0.01, 0.001, 0.1)}
    adv = max(t - f for f, t in points)
    return float(auc), at, float(adv)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_and_tpr_at_fpr_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 30, 150).astype(float) + 3  # ties on purpose
    neg = rng.integers(0, 30, 200).astype(float)
    auc, at, adv = _brute(pos, neg)
    figs, _ = attack_figures(pos, neg, 0.95)
    assert figs["auc"] == pytest.approx(auc, abs=1e-12)
    assert figs["tpr_at_fpr_1pct"] == pytest.approx(at[0.01], abs=1e-12)
    assert figs["tpr_at_fpr_01pct"] == pytest.approx(at[0.001], abs=1e-12)
    assert figs["advantage"] == pytest.approx(adv, abs=1e-12)
    fpr, tpr = roc(pos, neg)
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)


def test_delong_variance_equals_the_pairwise_formula():
    """DeLong's variance from its structural components, by all pairs (no midranks)."""
    rng = np.random.default_rng(5)
    pos, neg = rng.normal(0.4, 1, 40), rng.normal(0, 1, 60)
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    se = np.sqrt(v10.var(ddof=1) / 40 + v01.var(ddof=1) / 60)
    auc, low, high = auc_delong(pos, neg, 0.95)
    assert auc == pytest.approx(psi.mean()) and (high - low) / 2 == pytest.approx(
        1.959963984540054 * se, rel=1e-9)


@pytest.fixture(scope="module")
def population() -> dict[str, pd.DataFrame]:
    return {"original": _people(4000, 1), "control": _people(4000, 2),
            "synthetic": _people(4000, 3), "resample": _people(4000, 4)}


def _run(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame | None,
         seed: int = 1):
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    t = encode_tables(tables, ROLES)
    return t, membership(t["original"], t["released"], t.get("control"), columns=COLUMNS,
                         qi_columns=QIS, seed=seed)


def test_planted_near_copies_are_caught_while_no_row_is_an_exact_copy(population):
    released = _near_copies(population["original"], population["synthetic"], 0.15, seed=3)
    t, res = _run(population["original"], released, population["control"])
    exact = copies(t["original"], t["released"], t["control"], columns=COLUMNS, seed=1)
    assert exact.figures["exact_share"] == 0.0
    f = res.figures
    # a nearest-neighbour attack is the strongest (which scaling wins is the data's)
    assert res.details["strongest"] in ("distance", "distance_std", "distance_l2")
    assert f["auc_low"] > 0.53 and f["auc"] > 0.56, f
    # the low-FPR regime: the planted members stand out with confidence (~15 % of them)
    assert f["tpr_at_fpr_1pct"] >= 0.10, f
    assert res.details["counts"]["members_above_1pct_threshold"] >= 150
    # the quasi-identifier-only attacker, with less to go on, sees less
    assert f["distance_qi.auc"] < f["distance.auc"]


def test_an_independent_resample_shows_no_membership(population):
    _, res = _run(population["original"], population["resample"], population["control"])
    f = res.figures
    assert f["auc_low"] <= 0.5 <= f["auc_high"], f
    for name in res.details["attacks"]:
        assert f[f"{name}.auc_low"] <= 0.5 + 0.02, (name, f[f"{name}.auc_low"])
    assert f["tpr_at_fpr_1pct"] < 0.05


def test_without_a_control_it_is_insufficient_evidence_never_a_pass(population):
    _, res = _run(population["original"], population["resample"], None)
    assert res.status is Status.INSUFFICIENT_EVIDENCE and "control" in (res.reason or "")
    from riskcore.gate.policy import decide, parse_policy

    policy = parse_policy({"version": 1, "checks": ["membership.auc <= 0.6"]})
    assert decide(policy, {"membership": res}, {}, {}).verdict.value != "APPROVED"


def test_the_scores_are_written_per_target_row_and_the_same_seed_gives_them_again(population):
    released = _near_copies(population["original"], population["synthetic"], 0.15, seed=3)
    _, a = _run(population["original"], released, population["control"], seed=7)
    _, b = _run(population["original"], released, population["control"], seed=7)
    scores = a.records["membership_scores"]
    m = a.figures["n_members"]
    assert len(scores["row"]) == 2 * m and scores["member"].sum() == m
    assert np.array_equal(scores["score"], b.records["membership_scores"]["score"])
    assert a.to_dict() == b.to_dict()


def test_through_the_registry_with_a_small_control(population):
    t = encode_tables({"original": population["original"], "released": population["resample"],
                       "control": population["control"].head(30)}, ROLES)
    res = run_measure("membership", MeasureInputs(released=t["released"],
                                                  original=t["original"],
                                                  control=t["control"], seed=3), {})
    assert res.status is Status.INSUFFICIENT_EVIDENCE and "too few" in (res.reason or "")


def test_a_release_searched_in_a_sample_says_its_figures_are_a_lower_bound(population):
    released = _near_copies(population["original"], population["synthetic"], 0.15, seed=3)
    t = encode_tables({"original": population["original"], "released": released,
                       "control": population["control"]}, ROLES)
    whole = membership(t["original"], t["released"], t["control"], columns=COLUMNS,
                       qi_columns=[], seed=1, attacks=("distance",))
    part = membership(t["original"], t["released"], t["control"], columns=COLUMNS,
                      qi_columns=[], seed=1, attacks=("distance",), released_size=1000)
    assert not any("searched in a seeded sample" in w for w in whole.warnings)
    assert any("1,000 of its 4,000 rows" in w and "lower bound" in w for w in part.warnings)
    assert part.figures["tpr_at_fpr_1pct"] < whole.figures["tpr_at_fpr_1pct"]


def test_numbers_enter_as_their_quantile_in_the_release():
    """Each number becomes its mid-rank quantile in the release, (#{r < x} + #{r <= x}) / 2n,
    missing kept missing: one extreme value no longer hides a heavy-tailed column."""
    from riskcore.measures.attacks.gower import MixedMatrix
    from riskcore.measures.membership import quantile_columns

    rng = np.random.default_rng(0)
    rel = np.round(rng.random((500, 2)) * 5)
    rel[rng.random((500, 2)) < 0.1] = np.nan
    rel[0, 0] = 1e9  # an extreme value: under range scaling every other difference is ~0
    tgt = np.round(rng.random((40, 2)) * 6)

    def mat(x):
        return MixedMatrix(numeric=x, categorical=np.zeros((len(x), 0), dtype=np.int32),
                           columns=("x", "y"), n=len(x), wild=())

    q_rel, q_tgt = quantile_columns([mat(rel), mat(tgt)], {})
    for j in range(2):
        ref = np.sort(rel[~np.isnan(rel[:, j]), j])
        for x, q in ((rel, q_rel), (tgt, q_tgt)):
            v = x[:, j]
            ok = ~np.isnan(v)
            want = (np.searchsorted(ref, v[ok], "left")
                    + np.searchsorted(ref, v[ok], "right")) / (2 * ref.size)
            np.testing.assert_allclose(q.numeric[ok, j], want)
            assert np.isnan(q.numeric[~ok, j]).all()
    assert q_rel.numeric[0, 0] == 1 - 0.5 / np.sum(~np.isnan(rel[:, 0]))


# ---------------------------------------------------------------- worst case and epsilon
def test_each_headline_figure_is_the_maximum_over_the_attacks(population):
    released = _near_copies(population["original"], population["synthetic"], 0.15, seed=3)
    _, res = _run(population["original"], released, population["control"])
    f, worst = res.figures, res.details["worst"]
    assert "distance_std" in res.details["attacks"]
    for figure in ("auc", "tpr_at_fpr_1pct", "tpr_at_fpr_01pct", "advantage"):
        values = {a: f[f"{a}.{figure}"] for a in res.details["attacks"]}
        assert f[figure] == max(values.values()), figure
        assert values[worst[figure]] == f[figure]


def test_a_plain_one_nearest_neighbour_attack_never_beats_the_family(population):
    """The audit most people run: one-hot categories, standardized numbers, the Euclidean
    distance to the closest released row. The family's worst case is at least its TPR at
    1 % false positives, on the very targets the family attacked."""
    from sklearn.neighbors import NearestNeighbors

    released = _near_copies(population["original"], population["synthetic"], 0.15, seed=3)
    _, res = _run(population["original"], released, population["control"])
    scores = res.records["membership_scores"]
    tables = {0: population["original"], 1: population["control"]}
    targets = pd.concat([tables[int(t)].iloc[[int(r)]] for t, r in
                         zip(scores["table"], scores["row"])], ignore_index=True)
    num, cat = ["age", "hours", "income"], ["sex", "education", "region"]
    dummies = pd.get_dummies(released[cat]).columns

    def encoded(df: pd.DataFrame) -> np.ndarray:
        z = (df[num] - released[num].mean()) / released[num].std()
        return np.hstack([z.to_numpy(float), pd.get_dummies(df[cat]).reindex(
            columns=dummies, fill_value=0).to_numpy(float)])

    d = NearestNeighbors(n_neighbors=1).fit(encoded(released)).kneighbors(
        encoded(targets))[0][:, 0]
    member = scores["member"].astype(bool)
    plain, _ = attack_figures(-d[member], -d[~member], 0.95)
    assert res.figures["tpr_at_fpr_1pct"] >= plain["tpr_at_fpr_1pct"] > 0.05


def test_the_epsilon_bound_uses_exact_clopper_pearson_intervals():
    """Against scipy's exact binomial intervals and the bound's formula by hand."""
    import math

    from scipy.stats import binomtest

    from riskcore.measures.membership import epsilon_bound
    from riskcore.stats import clopper_pearson

    for k, n in ((0, 50), (3, 50), (25, 50), (50, 50), (997, 1000)):
        ci = binomtest(k, n).proportion_ci(0.90, "exact")
        assert clopper_pearson(k, n, 0.05, "lower") == pytest.approx(ci.low, abs=1e-9)
        assert clopper_pearson(k, n, 0.05, "upper") == pytest.approx(ci.high, abs=1e-9)
    low, point, form = epsilon_bound(400, 500, 5, 500, 1e-5, 0.05)
    tpr = binomtest(400, 500).proportion_ci(0.95, "exact").low   # one-sided 97.5 %
    fpr = binomtest(5, 500).proportion_ci(0.95, "exact").high
    assert form == "tpr/fpr" and low == pytest.approx(math.log((tpr - 1e-5) / fpr))
    assert point == pytest.approx(math.log(0.8 / 0.01))
    # the other form: few false negatives
    low2, _, form2 = epsilon_bound(499, 500, 250, 500, 0.0, 0.05)
    fnr = 1 - binomtest(499, 500).proportion_ci(0.95, "exact").low
    tnr = 1 - binomtest(250, 500).proportion_ci(0.95, "exact").high
    assert form2 == "tnr/fnr" and low2 == pytest.approx(math.log(tnr / fnr))
    assert epsilon_bound(10, 500, 10, 500, 1e-5, 0.05)[0] == 0.0  # no signal: no bound


def test_the_audit_chooses_on_one_half_and_counts_on_the_other():
    from riskcore.measures.membership import epsilon_audit, epsilon_bound

    rng = np.random.default_rng(2)
    m = 400
    s = np.r_[rng.normal(1.5, 1, m), rng.normal(0, 1, m)]
    eps, audit = epsilon_audit({"a": (s[:m], s[m:]), "b": (-s[:m], -s[m:])}, seed=3,
                               delta=1e-5, confidence=0.95)
    assert audit["attack"] == "a" and audit["members"] == audit["non_members"] == m // 2
    pos = np.random.default_rng([3, 0xE95]).permutation(m)  # the audit's own split
    counted = s[pos[m // 2:]]
    assert audit["tp"] == int(np.sum(counted >= audit["threshold"]))
    low, _, _ = epsilon_bound(audit["tp"], m // 2, audit["fp"], m // 2, 1e-5, 0.05)
    assert eps["epsilon_low"] == pytest.approx(low) and low > 0.5


def test_verbatim_copies_give_a_large_bound_and_a_resample_one_near_zero(population):
    copied = pd.concat([population["original"].iloc[:2000], population["synthetic"].iloc[2000:]],
                       ignore_index=True)
    _, leaky = _run(population["original"], copied, population["control"])
    _, clean = _run(population["original"], population["resample"], population["control"])
    assert leaky.figures["epsilon_low"] > 1.0, leaky.details["epsilon"]
    assert clean.figures["epsilon_low"] < 0.3, clean.details["epsilon"]
    # the bound's own interval check: the resample's chosen test is within chance
    e = clean.details["epsilon"]
    if e:
        assert abs(e["tpr"] - e["fpr"]) < 0.1


def test_a_false_claim_of_differential_privacy_fails_the_gate(population, tmp_path):
    """claimed_epsilon: 0.5 on a release that copies members: the measured bound exceeds
    it, and the gate REJECTS with the reason, whatever else the policy checks."""
    from riskcore.gate.config import load_gate
    from riskcore.gate.run import LocalSteps, run_gate

    copied = pd.concat([population["original"].iloc[:2000], population["synthetic"].iloc[2000:]],
                       ignore_index=True)
    for name, df in (("original", population["original"]), ("released", copied),
                     ("control", population["control"])):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    cfg = {"release_id": "dp-claim", "original": str(tmp_path / "original.csv"),
           "released": str(tmp_path / "released.csv"), "control": str(tmp_path / "control.csv"),
           "output_url": str(tmp_path / "out"),
           "roles": {"quasi_identifiers": QIS, "sensitive": ["income", "hours"]},
           "measures": {"membership": {"claimed_epsilon": 0.5, "n_targets": 600}},
           "policy": {"version": 1, "checks": ["membership.auc <= 1"]}}
    outcome = run_gate(load_gate(cfg), "run-dp", steps=LocalSteps())
    assert outcome.verdict == "REJECTED", outcome.reasons
    line = next(r for r in outcome.reasons if "membership.claim" in r)
    assert "exceeds the claimed epsilon = 0.5: the differential-privacy claim is false" in line
    honest = {**cfg, "measures": {"membership": {"claimed_epsilon": 50, "n_targets": 600}}}
    (tmp_path / "out2").mkdir()
    honest["output_url"] = str(tmp_path / "out2")
    assert run_gate(load_gate(honest), "run-dp2", steps=LocalSteps()).verdict == "APPROVED"
