"""Text of plain digits read by Arrow's character tests (riskcore.data.digit_codes) answers
as the number and code patterns do, for every value; anything else falls back to them."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from riskcore.anatomy.reading import marker_candidates, read_column
from riskcore.data import CODE_PATTERN, NUMBER_PATTERN, digit_codes, looks_numeric, written_as_code

DIGITS = ["0", "7", "00", "007", "01000", "10", "999999999999999", "1000000000000000",
          "0000000000000000", "12345678901234567890", "9" * 400]


def _text(values: list[str]) -> pd.Series:
    return pd.Series(values, dtype="str")


def test_plain_digits_are_codes_exactly_where_the_code_pattern_says():
    rng = np.random.default_rng(5)
    drawn = ["".join(rng.choice(list("0123456789"), size=int(rng.integers(1, 20))))
             for _ in range(3000)]
    for values in (DIGITS, drawn):
        codes = digit_codes(_text(values))
        assert codes is not None
        assert codes.tolist() == [re.match(CODE_PATTERN, v) is not None for v in values]
        assert all(re.match(NUMBER_PATTERN, v) for v in values)


@pytest.mark.parametrize("odd", ["", " 12", "12 ", "+12", "-12", "1.5", "1e3", "١٢", "１２",
                                 "12\n", "x"])
def test_anything_but_plain_digits_is_left_to_the_patterns(odd):
    assert digit_codes(_text([*DIGITS, odd])) is None
    # and the readers answer as before: one odd value decides for the column
    column = pd.Series([*DIGITS[:6], odd] * 3, dtype="category")
    text = [*DIGITS[:6], odd]
    numbers = all(re.match(NUMBER_PATTERN, v) for v in text if v)
    assert looks_numeric(column) == (numbers and not any(
        re.match(CODE_PATTERN, v) for v in text if v))
    assert written_as_code(column) == any(re.match(CODE_PATTERN, v) for v in text)


def test_columns_of_digits_read_as_the_patterns_read_them(monkeypatch):
    """Each reader answers the same with the character tests and with the patterns alone:
    dense identifiers, sparse codes, one written 007, a -9 beside them, 16-digit numbers."""
    from riskcore import data
    from riskcore.anatomy import reading

    rng = np.random.default_rng(11)
    columns = {
        "household": pd.Series(np.arange(1, 5001).astype(str), dtype="category"),
        "zip": pd.Series(rng.choice(np.arange(10000, 99999, 37), 4000).astype(str),
                         dtype="category"),
        "count": pd.Series(rng.integers(0, 12, 4000).astype(str), dtype="category"),
        "coded": pd.Series([*map(str, range(1, 300)), "007"], dtype="category"),
        "marked": pd.Series([*map(str, range(1, 300)), "-9"], dtype="category"),
        "card": pd.Series([str(4000000000000000 + i) for i in range(50)], dtype="category"),
    }

    def answers() -> dict[str, tuple]:
        return {name: (looks_numeric(col), written_as_code(col), marker_candidates(col),
                       read_column(name, [col]))
                for name, col in columns.items()}

    fast = answers()
    assert digit_codes(_text(list(columns["household"].cat.categories))) is not None
    monkeypatch.setattr(data, "digit_codes", lambda text: None)
    monkeypatch.setattr(reading, "digit_codes", lambda text: None)
    assert fast == answers()
    assert fast["marked"][2] == ("-9",) and fast["coded"][1] and fast["card"][1]
