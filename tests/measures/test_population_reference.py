"""Population-uniqueness models against ARX 3.9.2 (docs/measures.md 4.3)."""

import json

import numpy as np
import pytest

from riskcore import Roles, encode_table, frequencies
from riskcore.errors import ConfigError
from riskcore.measures import MeasureInputs, run_measure
from riskcore.measures.population import pitman, population_uniqueness, zayatz
from tests.conftest import TESTDATA_KEYS

pytestmark = pytest.mark.golden  # compared with a peer's reference outputs

RUNS = ["testdata_pop22900_t0.2.json", "testdata_pop27548400_t0.1.json",
        "testdata_popUSA_t0.2.json", "testdata_subset458_of_testdata_pop4580_t0.2.json"]


@pytest.mark.parametrize("name", RUNS)
def test_models_match_arx(reference, testdata, name):
    ref = json.loads((reference / "outputs/arx" / name).read_text())
    data = testdata
    if ref["research_subset"]:
        rows = [int(x) for x in
                (reference / "outputs/arx/testdata_subset_rows_seed42.txt").read_text().split()]
        data = testdata.iloc[rows].reset_index(drop=True)
    assert len(data) == ref["n_rows_analysed"]
    freq = frequencies(encode_table(data, Roles(TESTDATA_KEYS)))
    res = population_uniqueness(freq.class_size, ref["population_size"])
    for model in ("ZAYATZ", "PITMAN", "DANKAR"):
        assert res.figures[model.lower()] == pytest.approx(ref[f"pop_uniques_{model}"],
                                                           rel=1e-6), model
        assert res.figures[f"{model.lower()}_fraction"] == pytest.approx(
            ref[f"pop_fraction_unique_{model}"] if f"pop_fraction_unique_{model}" in ref
            else ref[f"pop_uniques_{model}"] / ref["population_size"], rel=1e-6)
    # ARX's SNB solver fails on testdata and reports 0: riskgate says "not available"
    assert ref["pop_uniques_SNB"] == 0.0
    assert res.figures["snb"] is None and "snb" in res.details["not_available"]
    assert res.details["dankar_chosen_model"] == ref["dankar_chosen_model"].lower()


def test_no_sample_uniques_gives_zero_with_the_reason():
    """The safest case is 0 population uniques, said so; not 'unavailable'."""
    import pandas as pd

    sizes = np.array([2, 2, 3, 5])
    for model in (zayatz(sizes, 1000), pitman(sizes, 1000)):
        assert model.uniques == 0.0 and model.reason is None and "c1 = 0" in model.note
    table = pd.DataFrame({"a": ["x", "x", "y", "y", "y"], "b": [1, 1, 2, 2, 2]})
    inputs = MeasureInputs(released=encode_table(table, Roles(["a", "b"])))
    res = run_measure("population", inputs, {"population_size": 100})
    for model in ("zayatz", "pitman", "snb", "dankar", "loglinear", "best"):
        assert res.figures[model] == 0.0 and res.figures[f"{model}_fraction"] == 0.0, model
        assert "c1 = 0" in res.details["notes"][model]
    assert res.figures["loglinear_tau1"] == 0.0 and res.figures["loglinear_tau2"] == 0.0
    assert not res.unavailable and not res.warnings


def test_population_smaller_than_sample_is_an_error():
    with pytest.raises(ConfigError, match="smaller than the sample"):
        population_uniqueness(np.array([1, 1, 2]), 3)


def test_population_measure_needs_a_size(testdata):
    inputs = MeasureInputs(released=encode_table(testdata, Roles(TESTDATA_KEYS)))
    with pytest.raises(ConfigError, match=r"measures\.population\.population_size: Field "
                       "required"):
        run_measure("population", inputs)
    usa = run_measure("population", inputs, {"population_size": "USA"})
    assert usa.figures["pitman"] == pytest.approx(3632.211900607162, rel=1e-6)
