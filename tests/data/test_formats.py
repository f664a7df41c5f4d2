"""Numbers written one way before tables are compared (riskcore.formats.canonical_numbers):
a typed integer column becomes the text each of its values is written as, value by value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from riskcore.formats import _canonical, canonical_numbers
from riskcore.roles import ColumnType


@pytest.mark.parametrize("column", [
    pd.Series(np.random.default_rng(3).integers(-10**12, 10**12, 4000)),
    pd.Series(pd.array([3, None, -7, 3, 0, None], dtype="Int64")),
    pd.Series(np.array([2**40, 5, 2**33, 5], dtype=np.uint64)),
    pd.Series(pd.array([9, 8, None, 9], dtype="int64[pyarrow]")),
    pd.Series(np.array([7, 1, 7, 2], dtype=np.uint8)),
], ids=["int64", "Int64-missing", "uint64", "arrow-int", "uint8"])
def test_a_typed_integer_column_is_written_as_each_value_alone_writes(column):
    released = pd.DataFrame({"household": pd.Series(
        [str(v) for v in column.dropna().unique()], dtype="category")})
    out, formats = canonical_numbers({"original": pd.DataFrame({"household": column}),
                                      "released": released}, ["household"],
                                     {"household": ColumnType.CATEGORICAL})
    got = out["original"]["household"]
    assert isinstance(got.dtype, pd.CategoricalDtype)
    expected = [None if pd.isna(v) else _canonical(int(v)) for v in column]
    assert [None if pd.isna(v) else v for v in got.astype(object)] == expected
    firsts = list(dict.fromkeys(v for v in expected if v is not None))
    assert list(got.cat.categories) == firsts  # in first appearance, as map_distinct orders
    assert formats["household"].how.startswith("numbers compared by value")
