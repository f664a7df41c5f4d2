"""SUDA2 against sdcMicro 5.8.1 (docs/measures.md 3.6) and a brute-force MSU oracle."""

import json
import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riskcore import Roles, encode_table
from riskcore.measures import MeasureInputs, run_measure
from riskcore.measures.suda import attribute_level_contributions, msu_weights, suda2
from tests.conftest import TESTDATA_KEYS

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs

FRANC_KEYS = ("Key1", "Key2", "Key3", "Key4")
FREE1_KEYS = ("REGION", "SEX", "AGE", "MARSTAT", "KINDPERS")


def _codes(df, keys):
    table = encode_table(df, Roles(tuple(keys)))
    return table, table.codes(keys)


@pytest.mark.parametrize("original,suffix", [(True, ""), (False, "_ihsnscores")])
def test_testdata_scores_dis_and_contributions(reference, testdata, original, suffix):
    ref = pd.read_csv(reference / f"outputs/sdcmicro/testdata_suda2{suffix}.csv")
    table, codes = _codes(testdata, TESTDATA_KEYS)
    s = suda2(codes, TESTDATA_KEYS, original_scores=original)
    np.testing.assert_allclose(s.score, ref["score"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.dis, ref["dis_score"], rtol=1e-5, atol=1e-12)
    for j, key in enumerate(TESTDATA_KEYS):
        np.testing.assert_allclose(s.contribution[:, j], ref[f"{key}_contribution"], rtol=1e-9,
                                   atol=1e-12)
    attr = pd.read_csv(reference / "outputs/sdcmicro/"
                       f"testdata_suda2_attribute_contributions{suffix}.csv")
    np.testing.assert_allclose(s.attribute_contributions, attr["contribution"], rtol=1e-9)
    levels = pd.read_csv(reference / "outputs/sdcmicro/"
                         f"testdata_suda2_attribute_level_contributions{suffix}.csv")
    got = attribute_level_contributions(s, codes, [table.column(k).categories
                                                   for k in TESTDATA_KEYS])
    got_df = pd.DataFrame(got).rename(columns={"value": "attribute"})
    merged = levels.merge(got_df, on=["variable", "attribute"], how="outer",
                          suffixes=("_ref", "_ours"))
    assert len(merged) == len(levels) == len(got_df)
    np.testing.assert_allclose(merged["contribution_ours"], merged["contribution_ref"],
                               rtol=1e-9)


def test_testdata_headline_values(testdata):
    _, codes = _codes(testdata, TESTDATA_KEYS)
    s = suda2(codes, TESTDATA_KEYS)
    assert s.score.sum() == 4890
    assert s.score.max() == 720
    assert np.count_nonzero(s.score) == 157
    assert s.dis.sum() == pytest.approx(9.83109092127511, rel=1e-5)


def test_francdat_hand_checkable_table(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/francdat_reference.csv")
    _, codes = _codes(data, FRANC_KEYS)
    s = suda2(codes, FRANC_KEYS)
    np.testing.assert_array_equal(s.score, ref["suda_score"])
    np.testing.assert_allclose(s.dis, ref["dis_score"], rtol=1e-5)
    for j, key in enumerate(FRANC_KEYS):
        np.testing.assert_allclose(s.contribution[:, j], ref[f"{key}_contribution"])
    # row 4: one MSU of size 1 and one of size 2 (docs/measures.md 9)
    assert s.msu_counts[3, 1] == 1 and s.msu_counts[3, 2] == 1
    np.testing.assert_allclose(s.attribute_contributions, [53.85, 23.08, 0, 53.85], atol=0.005)
    ihsn = suda2(codes, FRANC_KEYS, original_scores=False)
    np.testing.assert_allclose(ihsn.score, ref["suda_score_ihsn"], rtol=1e-12)
    np.testing.assert_allclose(ihsn.dis, ref["dis_score_ihsn"], rtol=1e-5)


def test_two_keys_are_padded_to_three(reference):
    edge = json.loads((reference / "outputs/sdcmicro/edge_cases.json").read_text())
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat.csv")
    _, codes = _codes(data, FRANC_KEYS[:2])
    s = suda2(codes, FRANC_KEYS[:2])
    assert s.M == 3
    np.testing.assert_array_equal(s.score, edge["suda2_francdat_2keys"]["score"])
    np.testing.assert_allclose(s.dis, edge["suda2_francdat_2keys"]["dis"], rtol=1e-5)


def test_dis_fraction_zero_means_half(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat.csv")
    _, codes = _codes(data, FRANC_KEYS)
    a = suda2(codes, FRANC_KEYS, dis_fraction=0.0)
    b = suda2(codes, FRANC_KEYS, dis_fraction=0.5)
    np.testing.assert_array_equal(a.dis, b.dis)


def test_testdata_na_missing_is_never_part_of_an_msu(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/testdata_na.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/testdata_na_reference.csv")
    _, codes = _codes(data, TESTDATA_KEYS)
    s = suda2(codes, TESTDATA_KEYS)
    np.testing.assert_array_equal(s.score, ref["suda_score"])
    np.testing.assert_allclose(s.dis, ref["dis_score"], rtol=1e-5)
    assert s.score.sum() == 4932
    assert s.dis.sum() == pytest.approx(7.45215420889562, rel=1e-5)
    # a record's contribution from a variable where it is missing is 0
    assert np.all(s.contribution[codes < 0] == 0)


def test_free1(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/free1.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/free1_reference.csv")
    _, codes = _codes(data, FREE1_KEYS)
    s = suda2(codes, FREE1_KEYS)
    np.testing.assert_array_equal(s.score, ref["suda_score"])
    np.testing.assert_allclose(s.dis, ref["dis_score"], rtol=1e-5)
    assert s.score.sum() == 18870
    assert s.dis.sum() == pytest.approx(219.744131413532, rel=1e-5)


def brute_force_msus(codes: np.ndarray) -> list[list[tuple[int, ...]]]:
    """Every record's MSUs by the definition, over every subset of every record."""
    n, m = codes.shape
    out = []
    for r in range(n):
        unique_sets = set()
        for k in range(1, m + 1):
            for S in combinations(range(m), k):
                if (codes[r, list(S)] < 0).any():
                    continue
                others = np.all(codes[:, list(S)] == codes[r, list(S)], axis=1)
                if others.sum() == 1:
                    unique_sets.add(S)
        out.append([S for S in unique_sets
                    if not any(tuple(x for x in S if x != j) in unique_sets for j in S
                               if len(S) > 1)])
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(2, 40), st.integers(2, 4), st.integers(0, 2**31 - 1),
       st.integers(1, 5))
def test_matches_brute_force_oracle(m, n, card, seed, cap):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, card, size=(n, m))
    codes[rng.random((n, m)) < 0.1] = -1
    s = suda2(codes, max_msu_size=cap)
    M = max(m, 3)
    w = msu_weights(M)
    expected = np.zeros(n)
    contrib = np.zeros((n, m))
    for r, msus in enumerate(brute_force_msus(codes)):
        for S in msus:
            if len(S) <= cap:
                expected[r] += w[len(S)]
                contrib[r, list(S)] += w[len(S)]
    np.testing.assert_allclose(s.score, expected)
    np.testing.assert_allclose(s.contribution * s.score[:, None], contrib)


def test_suda_measure_refuses_too_many_keys_and_warns_on_fractions():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.integers(0, 3, size=(50, 18)), columns=[f"k{i}" for i in range(18)])
    keys = tuple(df.columns)
    inputs = MeasureInputs(released=encode_table(df, Roles(keys), name="released.csv"))
    with pytest.raises(Exception, match=r"max_msu_size"):
        run_measure("suda", inputs)
    capped = run_measure("suda", inputs, {"max_msu_size": 2})
    assert capped.parameters["max_msu_size"] == 2
    assert any(f"{math.comb(18, 1) + math.comb(18, 2):,}" in w for w in capped.warnings)
    frac = pd.DataFrame({"a": [1.5, 1.5, 2.0], "b": [1, 2, 2], "c": [0, 0, 1]})
    res = run_measure("suda", MeasureInputs(released=encode_table(frac, Roles(("a", "b", "c")))))
    assert any("non-integer" in w for w in res.warnings)
