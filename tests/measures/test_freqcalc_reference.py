"""fk / Fk against sdcMicro 5.8.1 freqCalc (docs/measures.md 3.1, 3.2)."""

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_table, frequencies, k_anonymity
from tests.conftest import TESTDATA_KEYS

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs


def test_testdata_fk_Fk_match_freqcalc_per_record(reference, testdata):
    ref = pd.read_csv(reference / "outputs/sdcmicro/testdata_freqcalc.csv")
    table = encode_table(testdata, Roles(TESTDATA_KEYS, weight="sampling_weight"))
    freq = frequencies(table)
    np.testing.assert_array_equal(freq.fk, ref["fk"].to_numpy())
    np.testing.assert_allclose(freq.Fk, ref["Fk"].to_numpy(), rtol=1e-12)


def test_testdata_headline_k_anonymity_figures(testdata):
    table = encode_table(testdata, Roles(TESTDATA_KEYS))
    figures = k_anonymity(frequencies(table)).figures
    assert figures["n1"] == 157
    assert figures["violations_k2"] == 157
    assert figures["violations_k3"] == 281
    assert figures["n1"] + figures["n2"] == 281
    assert figures["n_classes"] == 412
    assert figures["k"] == 1


def test_class_size_histogram_matches_arx(reference, testdata):
    import json

    ref = json.loads((reference / "outputs/arx/testdata_pop22900_t0.2.json").read_text())
    expected = json.loads(ref["class_size_histogram_[size,count]"])
    result = k_anonymity(frequencies(encode_table(testdata, Roles(TESTDATA_KEYS))))
    assert result.details["class_size_histogram"] == expected


@pytest.mark.parametrize("alpha,suffix", [(1.0, "a1"), (0.5, "a05"), (0.1, "a01")])
def test_francdat_na_wildcard_counts(reference, alpha, suffix):
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat_na.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/francdat_na_reference.csv")
    table = encode_table(data, Roles(("Key1", "Key2", "Key3", "Key4"), weight="w"))
    freq = frequencies(table, missing="wildcard", alpha=alpha)
    np.testing.assert_allclose(freq.fk, ref[f"fk_{suffix}"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(freq.Fk, ref[f"Fk_{suffix}"].to_numpy(), rtol=1e-12)


def test_francdat_edge_case_alpha_half(reference):
    import json

    edge = json.loads((reference / "outputs/sdcmicro/edge_cases.json").read_text())
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat_na.csv")
    table = encode_table(data, Roles(("Key1", "Key2", "Key3", "Key4"), weight="w"))
    freq = frequencies(table, missing="wildcard", alpha=0.5)
    np.testing.assert_allclose(freq.fk, edge["francdat_na_alpha0.5"]["fk"])
    np.testing.assert_allclose(freq.Fk, edge["francdat_na_alpha0.5"]["Fk"])


def test_testdata_na_wildcard_counts(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/testdata_na.csv")
    ref = pd.read_csv(reference / "outputs/sdcmicro/testdata_na_reference.csv")
    table = encode_table(data, Roles(TESTDATA_KEYS, weight="sampling_weight"))
    freq = frequencies(table, missing="wildcard", alpha=1.0)
    np.testing.assert_array_equal(freq.fk, ref["fk"].to_numpy())
    np.testing.assert_allclose(freq.Fk, ref["Fk"].to_numpy(), rtol=1e-12)


def test_missing_as_own_value_differs_from_wildcard(reference):
    data = pd.read_csv(reference / "datasets/sdcmicro/francdat_na.csv")
    table = encode_table(data, Roles(("Key1", "Key2", "Key3", "Key4"), weight="w"))
    own = frequencies(table, missing="own")
    # row 3 (Key3 missing) is alone in its class when missing is its own value
    assert own.fk[2] == 1
    assert frequencies(table, missing="wildcard").fk[2] == 4


def test_all_missing_key_counts_every_record():
    data = pd.DataFrame({"a": [1, 1, 2, None], "b": [1, 2, 2, None]})
    table = encode_table(data, Roles(("a", "b")))
    freq = frequencies(table, missing="wildcard", alpha=0.5)
    assert freq.fk[3] == 4
    # a complete record gains alpha times the all-missing record
    assert freq.fk[0] == pytest.approx(1.5)
