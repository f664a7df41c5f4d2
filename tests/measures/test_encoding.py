"""The encoding pass's shortcuts give what the plain pandas calls give (the speed and
memory work): sorted codes of numbers, and the rows whose text reads as an infinite number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_tables
from riskcore.data import infinite_rows, number_series, sorted_codes


@pytest.mark.parametrize("values", [
    np.array([3.0, np.nan, 1.0, -0.0, 0.0, 2.5, np.nan, 1e300, -7.0]),
    np.array([np.nan, np.nan]),
    np.array([5.0]),
    np.arange(1000, 0, -1, dtype=float) * 1e6,          # whole numbers, hashed as int64
    np.array([2.0**53, 2.0**53 + 2, 1.0, 2.0**60]),     # past int64's exact range: floats
    np.random.default_rng(3).integers(-50, 50, 5000).astype(float),
    np.round(np.random.default_rng(4).random(5000) * 40) / 7,
])
def test_sorted_codes_are_pandas_sorted_factorize(values: np.ndarray) -> None:
    codes, uniques = pd.factorize(values, sort=True, use_na_sentinel=True)
    got_codes, got_categories = sorted_codes(values)
    assert got_codes.dtype == np.int32
    np.testing.assert_array_equal(got_codes, codes)
    np.testing.assert_array_equal(got_categories, np.asarray(uniques, dtype=float))


def test_a_numeric_column_encodes_jointly_to_sorted_codes() -> None:
    roles = Roles(quasi_identifiers=("age",), weight="w")
    a = pd.DataFrame({"age": [30, 10, np.nan, 20], "w": [1.5, 2.0, 2.0, 1.0]})
    b = pd.DataFrame({"age": [20, 40], "w": [3.0, 1.5]})
    enc = encode_tables({"a": a, "b": b}, roles)
    age_a, age_b = enc["a"].column("age"), enc["b"].column("age")
    np.testing.assert_array_equal(age_a.categories, [10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(age_a.codes, [2, 0, -1, 1])
    np.testing.assert_array_equal(age_b.codes, [1, 3])
    np.testing.assert_array_equal(enc["b"].column("w").codes, [3, 1])


POOL = np.array(["1", "2.5", " 7 ", "1e400", "-1E999", "inf", "-Infinity", "nan", "abc",
                 "1" * 400, "1e5", "0.1e309", None, "1e-400", "INF", "x1e400"], dtype=object)


@pytest.mark.parametrize("dtype", [object, "str", "category"])
def test_infinite_rows_are_the_rows_number_series_reads_as_infinite(dtype: object) -> None:
    rng = np.random.default_rng(19)
    for _ in range(100):
        series = pd.Series(list(rng.choice(POOL, size=int(rng.integers(1, 40)))), dtype=dtype)
        expected = np.flatnonzero(np.isinf(number_series(series).to_numpy()))
        np.testing.assert_array_equal(infinite_rows(series), expected)


def test_infinite_rows_of_typed_numbers() -> None:
    series = pd.Series([1.0, np.inf, np.nan, -np.inf, 2.0])
    np.testing.assert_array_equal(infinite_rows(series), [1, 3])
    assert infinite_rows(pd.Series(["12", "40"], dtype="category")).size == 0


def test_a_gate_of_the_equivalence_families_leaves_the_original_unencoded(example_files,
                                                                          tmp_path):
    import json

    from riskcore.gate.config import load_gate
    from riskcore.gate.encoding import encode, measured_tables
    from riskcore.gate.run import LocalSteps
    from tests.conftest import gate_config

    files = (str(example_files["original"]), str(example_files["released"]), str(tmp_path))
    gate = load_gate(gate_config(*files))  # k-anonymity, re-identification, l-div., t-closeness
    assert measured_tables(gate) == {"released", "identification"}
    steps = LocalSteps()
    frames, _ = steps.load(gate, {})
    lean = steps.encode(gate, frames)
    full = encode(gate.config, frames)
    assert lean.original is None and full.original is not None
    assert lean.alignment == full.alignment  # the original is still aligned and checked
    ours, errors = steps.measures(gate, lean)
    theirs, _ = steps.measures(gate, full)
    assert not errors and set(ours) == set(gate.measures)
    for name, result in ours.items():  # the same figures and per-record risks to the bit
        assert json.dumps(result.figures, sort_keys=True) == json.dumps(
            theirs[name].figures, sort_keys=True), name
        for key, values in result.per_record.items():
            np.testing.assert_array_equal(values, theirs[name].per_record[key])
    # a family that reads the original gets it, and the control beside it
    reading = load_gate(gate_config(*files, measures={"copies": {}}))
    assert measured_tables(reading) == {"released", "identification", "original", "control"}
    assert steps.encode(reading, frames).original is not None


@pytest.mark.parametrize("cards", [(3, 4, 2), (200, 300, 500, 7), (2**20, 2**20, 2**20)])
def test_classes_are_numbered_by_first_occurrence_whatever_the_keys_range(cards):
    """group_rows numbers rows by arrays over the combined key's range where it is small and
    by a hash table where it is not (riskcore/equivalence.py): either way the class of a row
    is the order in which its class first occurs, a missing code (-1) is a value of its own,
    and the ids are those of a plain dictionary over the rows' tuples."""
    from riskcore.equivalence import group_rows

    rng = np.random.default_rng(sum(cards))
    n = 5_000
    codes = np.column_stack([rng.integers(-1, min(c, 40), n) if c < 2**20
                             else rng.integers(-1, c, n) for c in cards])
    seen: dict[tuple[int, ...], int] = {}
    expected = np.array([seen.setdefault(tuple(row), len(seen)) for row in codes.tolist()])
    ids, u = group_rows(codes)
    assert u == len(seen) and np.array_equal(ids, expected)
    ids32, _ = group_rows(codes.astype(np.int32))
    assert np.array_equal(ids32, expected)
