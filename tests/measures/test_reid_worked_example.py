"""Protegrity's worked example (docs/measures.md 2, typos corrected) and the model's properties."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riskcore import Roles, encode_tables, frequencies, reidentification_risk


def seed000_tables():
    population = pd.DataFrame({"q": list("a" * 10 + "b" * 8 + "c" * 14 + "d" * 4 + "e" * 2)})
    sample = pd.DataFrame({"q": list("a" * 4 + "b" * 3 + "c" * 2 + "d" * 1)})
    return sample, population


def test_seed000_worked_example():
    sample, population = seed000_tables()
    enc = encode_tables({"sample": sample, "population": population}, Roles(("q",)))
    f = reidentification_risk(frequencies(enc["sample"], population=enc["population"]),
                              threshold=0.33).figures
    assert f["jRa"] == 0.0
    assert f["jRb"] == pytest.approx(0.25)
    assert f["mRc"] == pytest.approx((0.4 + 0.375 + 2 / 14 + 0.25) / 10)
    assert f["mRc"] == pytest.approx(0.1167857, abs=1e-7)
    assert f["jRc"] == pytest.approx(5 / 38)
    assert f["jRc_arx"] == pytest.approx(max(4 / 36, f["mRc"]))
    assert f["pRa"] == pytest.approx(0.6)
    assert f["pRb"] == 1.0
    assert f["pRc"] == pytest.approx(0.4)


@st.composite
def sample_and_population(draw):
    n_keys = draw(st.integers(1, 3))
    card = draw(st.integers(1, 4))
    pop_n = draw(st.integers(1, 60))
    pop = np.array(draw(st.lists(st.lists(st.integers(0, card), min_size=n_keys,
                                          max_size=n_keys), min_size=pop_n, max_size=pop_n)))
    idx = draw(st.lists(st.integers(0, pop_n - 1), min_size=1, max_size=pop_n, unique=True))
    cols = [f"k{j}" for j in range(n_keys)]
    population = pd.DataFrame(pop, columns=cols)
    return population.iloc[sorted(idx)].reset_index(drop=True), population, tuple(cols)


@settings(max_examples=150, deadline=None)
@given(data=sample_and_population(), threshold=st.sampled_from([0.05, 0.1, 0.2, 0.33, 0.5]))
def test_prosecutor_dominates_journalist_dominates_marketer(data, threshold):
    sample, population, cols = data
    enc = encode_tables({"sample": sample, "population": population}, Roles(cols))
    f = reidentification_risk(frequencies(enc["sample"], population=enc["population"]),
                              threshold).figures
    eps = 1e-12
    assert f["pRa"] >= f["jRa"] - eps
    assert f["pRb"] >= f["jRb"] - eps
    assert f["jRc"] >= f["mRc"] - eps
    assert f["pRc"] >= f["mRc"] - eps
    for name in ("pRa", "pRb", "pRc", "jRa", "jRb", "jRc", "mRc"):
        assert 0.0 <= f[name] <= 1.0


@settings(max_examples=60, deadline=None)
@given(data=sample_and_population())
def test_without_population_journalist_equals_prosecutor(data):
    sample, _, cols = data
    enc = encode_tables({"sample": sample}, Roles(cols))
    f = reidentification_risk(frequencies(enc["sample"]), 0.2).figures
    assert f["jRa"] == f["pRa"] and f["jRb"] == f["pRb"]
    assert f["mRc"] == pytest.approx(f["pRc"]) and f["jRc"] == pytest.approx(f["pRc"])
