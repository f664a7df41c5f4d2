"""Prosecutor / journalist / marketer against ARX 3.9.2 (docs/measures.md 2, 4.1)."""

import json

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_table, encode_tables, frequencies, reidentification_risk
from riskcore.measures.reid import effective_threshold_size
from tests.conftest import TESTDATA_KEYS

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs


@pytest.mark.parametrize("name,threshold", [
    ("testdata_pop22900_t0.2", 0.2),
    ("testdata_pop27548400_t0.1", 0.1),
    ("testdata_pop27548400_t0.2", 0.2),
])
def test_prosecutor_figures_on_testdata(reference, testdata, name, threshold):
    ref = json.loads((reference / f"outputs/arx/{name}.json").read_text())
    result = reidentification_risk(frequencies(encode_table(testdata, Roles(TESTDATA_KEYS))),
                                   threshold)
    f = result.figures
    assert f["pRa"] == pytest.approx(ref["prosecutor_records_at_risk"], rel=1e-12)
    assert f["pRb"] == pytest.approx(ref["prosecutor_highest_risk"], rel=1e-12)
    assert f["pRc"] == pytest.approx(ref["prosecutor_success_rate"], rel=1e-12)
    # no population table: journalist = prosecutor, marketer = prosecutor success
    assert f["jRa"] == pytest.approx(ref["journalist_records_at_risk"], rel=1e-12)
    assert f["jRc_arx"] == pytest.approx(ref["journalist_success_rate"], rel=1e-12)
    assert f["mRc"] == pytest.approx(ref["marketer_success_rate"], rel=1e-12)


def test_journalist_with_ten_percent_subset_and_identification_table(reference, testdata):
    ref = json.loads(
        (reference / "outputs/arx/testdata_subset458_of_testdata_pop4580_t0.2.json").read_text())
    text = (reference / "outputs/arx/testdata_subset_rows_seed42.txt").read_text()
    rows = [int(x) for x in text.replace(",", " ").split()]
    enc = encode_tables({"sample": testdata.iloc[rows], "population": testdata},
                        Roles(TESTDATA_KEYS))
    freq = frequencies(enc["sample"], population=enc["population"])
    f = reidentification_risk(freq, 0.2).figures
    assert f["pRa"] == pytest.approx(ref["prosecutor_records_at_risk"], rel=1e-12)
    assert f["pRc"] == pytest.approx(ref["prosecutor_success_rate"], rel=1e-12)
    assert f["pRb"] == pytest.approx(ref["prosecutor_highest_risk"], rel=1e-12)
    assert f["jRa"] == pytest.approx(ref["journalist_records_at_risk"], rel=1e-12)
    assert f["jRb"] == pytest.approx(ref["journalist_highest_risk"], rel=1e-12)
    assert f["jRc_arx"] == pytest.approx(ref["journalist_success_rate"], rel=1e-12)
    assert f["mRc"] == pytest.approx(ref["marketer_success_rate"], rel=1e-12)
    assert 1.0 / freq.Fk.max() == pytest.approx(ref["journalist_lowest_risk"], rel=1e-12)


@pytest.mark.parametrize("name,csv,keys", [
    ("testdata", "testdata_na_star.csv", TESTDATA_KEYS),
    ("francdat", "francdat_na_star.csv", ("Key1", "Key2", "Key3", "Key4")),
])
def test_arx_wildcard_model_equals_freqcalc_alpha_one(reference, name, csv, keys):
    ref = json.loads((reference / f"outputs/arx/{name}_na_wildcard_t0.2.json").read_text())
    data = pd.read_csv(reference / "datasets/sdcmicro" / csv, dtype=str, keep_default_na=False)
    data = data.replace("*", np.nan)
    freq = frequencies(encode_table(data, Roles(keys)), missing="wildcard", alpha=1.0)
    risk = 1.0 / freq.fk
    assert risk.mean() == pytest.approx(ref["average_risk"], rel=1e-12)
    assert risk.max() == pytest.approx(ref["highest_risk"], rel=1e-12)
    assert risk.min() == pytest.approx(ref["lowest_risk"], rel=1e-12)
    s = effective_threshold_size(ref["threshold"])
    assert np.mean(freq.fk < s) == pytest.approx(ref["records_at_risk"], rel=1e-12)


def test_effective_threshold_size():
    assert effective_threshold_size(0.2) == 5
    assert effective_threshold_size(0.1) == 10
    assert effective_threshold_size(0.33) == 4  # 1/3 - 0.33 >= 0.0033
