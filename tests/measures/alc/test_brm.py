"""The best-row-match attack against a per-target oracle, column typing, bad input."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from riskcore.errors import ConfigError, InputError
from riskcore.measures.alc import BestRowMatch, from_frames
from riskcore.measures.alc import brm as brm_module
from riskcore.measures.alc.inputs import is_smooth
from riskcore.measures.alc.targets import select_targets


def _tables(seed: int):
    rng = np.random.default_rng(seed)

    def table(n):
        df = pd.DataFrame({
            "c1": rng.choice(["a", "b", "c", None], n, p=[0.4, 0.3, 0.25, 0.05]),
            "c2": rng.choice(["x", "y"], n),
            "v": np.where(rng.random(n) < 0.05, np.nan, np.round(rng.normal(0, 1, n), 1)),
            "s": rng.choice(["s0", "s1", "s2"], n),
        })
        return df
    ori, rel1, rel2 = table(60), table(80), table(40)
    rel2 = rel2.drop(columns=["c2"])  # a known column absent from a released table
    return ori, rel1, rel2


def _oracle(ori, rels, known, secret, kinds):
    """The ALC paper's section 5.2, one target at a time, with the riskgate rules for missing
    values."""
    out = []
    for i in range(len(ori)):
        q = ori.iloc[i]
        best = None
        cands = []
        for rel in rels:
            rel = rel[rel[secret].notna()]
            cols = [c for c in known if c in rel.columns]
            absent = len(known) - len(cols)
            d = np.zeros(len(rel))
            for c in cols:
                x = rel[c].to_numpy()
                if kinds[c] == "continuous":
                    xs = x.astype(float)
                    lo = np.nanmin(np.r_[xs, q[c]])
                    hi = np.nanmax(np.r_[xs, q[c]])
                    rng = (hi - lo) or 1.0
                    dd = np.abs(xs - float(q[c])) / rng
                    d += np.where(np.isnan(dd), 1.0, dd)
                else:
                    d += np.array([1.0 if (pd.isna(q[c]) or pd.isna(e) or e != q[c]) else 0.0
                                   for e in x])
            dmin = d.min()
            g = (round(dmin / len(cols), 3) * len(cols) + absent) / len(known)
            cands.append((g, rel[secret].to_numpy()[d == dmin].tolist()))
        best = min(g for g, _ in cands)
        values = [v for g, vals in cands if g == best for v in vals]
        value, m = Counter(values).most_common(1)[0]
        out.append((value, round((1 - best) * m / len(values), 3)))
    return out


@pytest.mark.parametrize("path", ["rows", "groups", "numpy"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brm_matches_the_per_target_oracle(seed, path, monkeypatch):
    """Every path (the compiled kernel row by row, and over groups of rows alike; the NumPy
    matrix without numba) gives the oracle's predictions and rank scores: two released
    tables, one lacking a known column, missing values on both sides, ties."""
    assert brm_module._compiled() is not None  # numba is a dependency: the kernel is there
    if path == "numpy":
        monkeypatch.setattr(brm_module, "_compiled", lambda: None)
    # grouping always (even where it would not pay), or never
    monkeypatch.setattr(brm_module, "GROUPED_BELOW", 1.01 if path == "groups" else 0.0)
    ori, rel1, rel2 = _tables(seed)
    data = from_frames(ori, [rel1, rel2], types={"v": "continuous"})
    known = ["c1", "c2", "v"]
    brm = BestRowMatch(data, "s", known, max_cells=500)  # several blocks
    p = brm.predict(np.arange(len(ori)))
    labels = data.labels["s"]
    want = _oracle(ori, [rel1, rel2], known, "s", data.kinds)
    assert [labels[c] for c in p.predicted] == [v for v, _ in want]
    np.testing.assert_allclose(p.confidence, [c for _, c in want], atol=1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_groups_of_rows_alike_give_what_each_row_gives(seed):
    """A generalized release of many rows and few distinct known values (the case grouping
    is for): the search over its groups gives every target the same prediction, rank score,
    distance and number of matches as the search row by row, and the first row met breaks
    ties the same way (-0.0 and 0.0, and every NaN, are one value)."""
    rng = np.random.default_rng(seed)

    def table(n):
        v = rng.choice([0.0, -0.0, 1.5, 3.0, np.nan], n)
        return pd.DataFrame({"c1": rng.choice(["a", "b", None], n), "v": v,
                             "c2": rng.choice(["x", "y", "z"], n),
                             "s": rng.choice(["s0", "s1", "s2", "s3"], n)})
    ori, rel = table(300), table(5000)
    data = from_frames(ori, rel, types={"v": "continuous"})
    got = {}
    for grouped in (True, False):
        brm = BestRowMatch(data, "s", ["c1", "v", "c2"], grouped=grouped)
        got[grouped] = brm.predict(np.arange(len(ori)))
    assert brm_module._groups(*BestRowMatch(data, "s", ["c1", "v", "c2"])._stacked(
        "released"), BestRowMatch(data, "s", ["c1", "v", "c2"])._secret["released"],
        4) is not None  # the groups were searched
    for field in ("predicted", "confidence", "distance", "matches"):
        np.testing.assert_array_equal(getattr(got[True], field), getattr(got[False], field))


def test_an_exact_copy_is_found_with_rank_score_one():
    ori, rel1, _ = _tables(3)
    ori.loc[5, ["c1", "v"]] = ["a", 123.456]  # a value nobody else has
    rel = pd.concat([rel1, ori.iloc[[5]]], ignore_index=True)
    data = from_frames(ori, rel, types={"v": "continuous"})
    p = BestRowMatch(data, "s", ["c1", "c2", "v"]).predict(np.array([5]))
    assert p.distance[0] == 0.0 and p.matches[0] == 1 and p.confidence[0] == 1.0
    assert data.labels["s"][p.predicted[0]] == ori["s"][5]


def test_column_typing_follows_the_package_on_adult(reference):
    ori = pd.read_parquet(reference / "datasets/alc-paper/original/adult.parquet")
    data = from_frames(ori, ori.head(100))
    cont = sorted(c for c, k in data.kinds.items() if k == "continuous")
    assert cont == sorted(["age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                           "hours-per-week"])
    # a continuous secret becomes one of 20 equal-width bins over original and released
    codes = data.codes["original"]["hours-per-week"]
    assert codes.min() == 0 and codes.max() == 19
    v = ori["hours-per-week"].to_numpy()
    edges = np.linspace(v.min(), v.max(), 21)
    np.testing.assert_array_equal(codes, np.searchsorted(edges[1:-1], v, side="right"))


def test_smoothness_rules():
    assert is_smooth(np.arange(60.0))  # >= 50 distinct
    assert not is_smooth(np.arange(9.0))  # < 10 distinct
    assert not is_smooth(np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100] * 3, float))
    assert is_smooth(np.repeat(np.arange(20.0), np.arange(20, 0, -1)))  # monotone, dense


def test_bad_input_is_named():
    ori, rel1, _ = _tables(0)
    data = from_frames(ori, rel1)
    with pytest.raises(ConfigError, match="also a known column"):
        data.check("s", ["s", "c1"])
    with pytest.raises(InputError, match="nope"):
        data.check("nope", ["c1"])
    one = ori.assign(s="same")
    with pytest.raises(InputError, match="single value"):
        from_frames(one, rel1).check("s", ["c1"])
    with pytest.raises(InputError, match="numeric"):
        from_frames(ori, rel1.assign(v=rel1["v"].astype(str) + "x"))
    warn = from_frames(ori, rel1.drop(columns=["c2"])).check("s", ["c1", "c2"])
    assert any("absent" in w and "c2" in w for w in warn)
    allmiss = from_frames(ori.assign(c2=None), rel1).check("s", ["c1", "c2"])
    assert any("missing in every original row" in w for w in allmiss)


def test_target_queries():
    ori = pd.DataFrame({"income": [10.0, 50.0, 90.0, 90.0, 20.0, None], "sex": list("FMFMFF")})
    data = from_frames(ori, ori)
    assert select_targets(data, "top 20% income").tolist() == [2, 3]  # ties at the cut
    assert select_targets(data, "sex == 'F' and income >= 20").tolist() == [2, 4]
    assert select_targets(data, "sex != F").tolist() == [1, 3]
    with pytest.raises(ConfigError, match="cannot read"):
        select_targets(data, "income ~ 3")
    with pytest.raises(ConfigError, match="not numeric"):
        select_targets(data, "top 1% sex")
    with pytest.raises(ConfigError, match="unknown column"):
        select_targets(data, "zip == 3")
