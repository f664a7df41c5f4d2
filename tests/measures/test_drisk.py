"""dRisk (docs/measures.md 3.8) on free1's microaggregated columns, against a per-record oracle."""

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_tables
from riskcore.errors import InputError
from riskcore.measures import MeasureInputs, run_measure
from riskcore.measures.drisk import drisk


def oracle(x: np.ndarray, xm: np.ndarray, k: float) -> float:
    sd = [np.std(xm[~np.isnan(xm[:, j]), j], ddof=1) for j in range(x.shape[1])]
    hits = 0
    for i in range(x.shape[0]):
        if all(xm[i, j] - k * sd[j] <= x[i, j] <= xm[i, j] + k * sd[j]
               for j in range(x.shape[1])):
            hits += 1
    return hits / x.shape[0]


@pytest.mark.parametrize("method", ["onedims3", "pca3"])
@pytest.mark.parametrize("k", [0.01, 0.05, 0.2])
def test_drisk_on_microaggregated_free1(reference, method, k):
    ori = pd.read_csv(reference / "datasets/sdcmicro/free1.csv").iloc[:, 30:34]
    masked = pd.read_csv(reference / f"datasets/sdcmicro/free1_cols31-34_microagg_{method}.csv")
    masked.columns = ori.columns
    x, xm = ori.to_numpy(float), masked.to_numpy(float)
    res = drisk(x, xm, list(ori.columns), k)
    assert res.figures["dRisk"] == pytest.approx(oracle(x, xm, k), abs=1e-12)
    wider = drisk(x, xm, list(ori.columns), 2 * k)
    assert wider.figures["dRisk"] >= res.figures["dRisk"]  # a wider interval catches more


def test_drisk_measure_via_registry_and_misaligned_tables(reference):
    ori = pd.read_csv(reference / "datasets/sdcmicro/free1.csv").iloc[:, 30:34]
    masked = pd.read_csv(reference / "datasets/sdcmicro/free1_cols31-34_microagg_onedims3.csv")
    masked.columns = ori.columns
    cols = tuple(ori.columns)
    enc = encode_tables({"original": ori, "released": masked}, Roles.from_mapping(
        {"qi": list(cols), "types": {c: "continuous" for c in cols}}))
    res = run_measure("drisk", MeasureInputs(released=enc["released"], original=enc["original"]))
    assert res.figures["dRisk"] == pytest.approx(
        oracle(ori.to_numpy(float), masked.to_numpy(float), 0.05))
    with pytest.raises(InputError, match="row-aligned"):
        drisk(np.zeros((3, 2)), np.zeros((4, 2)), ["a", "b"])
