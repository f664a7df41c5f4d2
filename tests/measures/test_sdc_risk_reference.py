"""Individual, global and household risk against sdcMicro 5.8.1 (docs/measures.md 3.3-3.5)."""

import json

import mpmath as mp
import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_table, frequencies
from riskcore.errors import InputError
from riskcore.measures.sdc import global_risk, household_risk, individual_risk, sdc_risk
from tests.conftest import TESTDATA_KEYS

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs

FREE1_KEYS = ("REGION", "SEX", "AGE", "MARSTAT", "KINDPERS")
FRANC_KEYS = ("Key1", "Key2", "Key3", "Key4")


@pytest.fixture(scope="module")
def measure_risk_ref(reference):
    return pd.read_csv(reference / "outputs/sdcmicro/testdata_measure_risk.csv")


@pytest.fixture(scope="module")
def weighted(testdata):
    table = encode_table(testdata, Roles(TESTDATA_KEYS, weight="sampling_weight",
                                         household="ori_hid"))
    return table, frequencies(table)


def test_approx_risk_per_record(weighted, measure_risk_ref):
    _, freq = weighted
    r = individual_risk(freq.fk, freq.Fk)
    np.testing.assert_allclose(r, measure_risk_ref["rk_approx"], rtol=1e-9)
    np.testing.assert_allclose(r, measure_risk_ref["risk"], rtol=1e-9)


def test_global_and_household_risk(weighted, measure_risk_ref):
    table, freq = weighted
    res = sdc_risk(freq, household=table.column("ori_hid").codes, household_column="ori_hid",
                   weights=table.weights())
    assert res.figures["ER"] == pytest.approx(10.7782989187348, rel=1e-12)
    assert res.figures["global_risk"] == pytest.approx(0.00235334037526961, rel=1e-12)
    assert res.figures["hier_ER"] == pytest.approx(51.8129274359607, rel=1e-12)
    np.testing.assert_allclose(res.per_record["hier_risk"], measure_risk_ref["hier_risk"],
                               rtol=1e-9)
    # ER is below 1% of n: sdcMicro prints NA, riskgate says why
    assert res.details["threshold_status"] == "already_below"
    assert res.figures["threshold"] == pytest.approx(float(measure_risk_ref["risk"].max()))


def test_exact_risk_matches_sdcmicro_where_finite_and_mpmath_where_nan(weighted,
                                                                        measure_risk_ref):
    _, freq = weighted
    r = individual_risk(freq.fk, freq.Fk, method="exact")
    finite = measure_risk_ref["rk_exact"].notna().to_numpy()
    np.testing.assert_allclose(r[finite], measure_risk_ref["rk_exact"][finite], rtol=1e-9)
    nan_rows = np.flatnonzero(~finite)
    assert nan_rows.size > 0 and set(freq.fk[nan_rows]) == {176}
    assert np.all(np.isfinite(r))
    mp.mp.dps = 40
    i = nan_rows[0]
    f, p = mp.mpf(int(freq.fk[i])), mp.mpf(freq.fk[i]) / mp.mpf(freq.Fk[i])
    # E[1/F | f] = sum_{h >= f} (1/h) C(h-1, f-1) p^f (1-p)^(h-f), summed term by term in high
    # precision until the negative-binomial tail is negligible
    term, total, h = p**f, mp.mpf(0), f
    while True:
        total += term / h
        term *= h / (h - f + 1) * (1 - p)
        h += 1
        if h > f / p and term / h < total * mp.mpf(10) ** -25:
            break
    assert r[i] == pytest.approx(float(total), rel=1e-10)


@pytest.mark.parametrize("f,p", [(3, 1e-5), (40, 0.3), (1000, 0.02), (2.5, 0.01), (1.5, 0.2)])
def test_exact_risk_against_high_precision_integral(f, p):
    mp.mp.dps = 40
    pm = mp.mpf(p)
    expected = mp.quad(lambda s: s ** (f - 1) * pm / (pm + (1 - pm) * s), [0, pm, 0.5, 1])
    got = individual_risk(np.array([f]), np.array([f / p]), method="exact")[0]
    assert got == pytest.approx(float(expected), rel=1e-10)


def test_unweighted_threshold(testdata, measure_risk_ref):
    res = sdc_risk(frequencies(encode_table(testdata, Roles(TESTDATA_KEYS))))
    np.testing.assert_allclose(res.per_record["risk"], measure_risk_ref["risk_unweighted"],
                               rtol=1e-12)
    assert res.figures["ER"] == pytest.approx(412)  # unweighted ER = number of classes
    assert res.figures["threshold"] == pytest.approx(0.0106382978723404, rel=1e-12)
    assert res.details["threshold_status"] == "found"


def test_free1_global_risk_and_threshold(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/free1.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/free1_reference.csv")
    res = sdc_risk(frequencies(encode_table(data, Roles(FREE1_KEYS, weight="WEIGHT"))))
    np.testing.assert_allclose(res.per_record["risk"], ref["risk"], rtol=1e-9)
    assert res.figures["ER"] == pytest.approx(82.584576044263, rel=1e-12)
    assert res.figures["threshold"] == pytest.approx(0.00857387302276082, rel=1e-12)


def test_francdat_no_level_qualifies(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/francdat_reference.csv")
    res = sdc_risk(frequencies(encode_table(data, Roles(FRANC_KEYS, weight="w"))))
    np.testing.assert_allclose(res.per_record["risk"], ref["rk"], rtol=1e-9)
    assert res.figures["ER"] == pytest.approx(0.966526045199967, rel=1e-12)
    assert res.figures["threshold"] == 0
    assert res.details["threshold_status"] == "none_qualifies"


def test_na_wildcard_risk(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/testdata_na.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/testdata_na_reference.csv")
    freq = frequencies(encode_table(data, Roles(TESTDATA_KEYS, weight="sampling_weight")),
                       missing="wildcard")
    np.testing.assert_allclose(sdc_risk(freq).per_record["risk"], ref["risk"], rtol=1e-9)


def test_fractional_fk_sdcmicro_mode_and_riskgate_default(reference):
    edge = json.loads((reference / "outputs/sdcmicro/edge_cases.json").read_text())
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat_na.csv")
    freq = frequencies(encode_table(data, Roles(FRANC_KEYS, weight="w")), missing="wildcard",
                       alpha=0.5)
    expected = edge["francdat_na_alpha0.5"]["rk"]
    compat = individual_risk(freq.fk, freq.Fk, fractional="sdcmicro")
    np.testing.assert_allclose(compat, expected, rtol=1e-9)
    ours = individual_risk(freq.fk, freq.Fk)
    frac = (freq.fk > 1) & (freq.fk < 2)
    # sdcMicro gives 0 to 1 < fk < 2; riskgate gives the exact value, between the f=1 and f=2
    # risks of the same p
    assert np.all(compat[frac] == 0) and np.all(ours[frac] > 0)
    p = freq.fk[frac] / freq.Fk[frac]
    lo = individual_risk(np.full(p.size, 2.0), 2.0 / p, method="exact")
    hi = individual_risk(np.ones(p.size), 1.0 / p, method="exact")
    assert np.all((ours[frac] > lo) & (ours[frac] < hi))
    np.testing.assert_allclose(ours[~frac], compat[~frac])


def test_household_risk_is_stable_and_exact_at_one():
    r = np.array([1e-17, 1e-17, 0.5, 1.0, 0.2])
    hh = np.array([0, 0, 1, 1, 2])
    out = household_risk(r, hh)
    assert out[0] == pytest.approx(2e-17, rel=1e-12)  # 1 - (1-r)^2 would give 0
    assert out[2] == out[3] == 1.0
    assert out[4] == pytest.approx(0.2)


def test_threshold_rule_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(50):
        r = np.round(rng.random(rng.integers(5, 40)) ** 3, 2) + 1e-3
        target_rate = float(rng.uniform(0.01, 0.3))
        g = global_risk(r, target_rate)
        T = target_rate * r.size
        if r.sum() < T:
            assert g.threshold_status.value == "already_below"
            continue
        ok = [v for v in sorted(set(r), reverse=True)
              if sum(min(x, v) for x in r) < T]
        assert g.threshold == (ok[0] if ok else 0.0)


def test_household_with_inconsistent_weights_is_not_computable(testdata):
    data = testdata.copy()
    data.loc[0, "sampling_weight"] = 50.0  # one member of household ori_hid[0] differs
    table = encode_table(data, Roles(TESTDATA_KEYS, weight="sampling_weight",
                                     household="ori_hid"), name="released.csv")
    with pytest.raises(InputError, match=r"released.csv.*ori_hid.*different sample weights"):
        household_risk(np.full(table.n, 0.1), table.column("ori_hid").codes, table.weights(),
                       "released.csv", "ori_hid")
    res = sdc_risk(frequencies(table), household=table.column("ori_hid").codes,
                   household_column="ori_hid", weights=table.weights(), table="released.csv")
    assert res.figures["hier_risk"] is None and res.figures["ER"] > 0
    assert "different sample weights" in res.details["hier_risk_not_computable"]
    assert "hier_risk" not in res.per_record
