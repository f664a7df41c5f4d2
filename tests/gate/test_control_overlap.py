"""The control-overlap check: a control is refused as "not held out" only when
it shares significantly more rows with the original than independent samples of the same data
do. Real data repeats itself: two disjoint halves of a realistic sample coincide on most rows
over a few coarse columns, and anonymeter's own holdout was refused (8,611 of 9,758 rows
"overlapping" over five columns, 10 over all fifteen)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from riskcore.equivalence import ControlOverlap, control_overlap_test
from riskcore.gate.cleanliness import _preconditions, _text_codes
from riskcore.roles import Roles

COARSE = ["age", "sex", "race", "education", "marital"]


@pytest.fixture(scope="module")
def adults(reference) -> tuple[pd.DataFrame, pd.DataFrame]:
    d = reference / "datasets/anonymeter"
    return (pd.read_csv(d / "adults_train_reconstructed.csv.gz"),
            pd.read_csv(d / "adults_control.csv.gz"))


def _test(original: pd.DataFrame, control: pd.DataFrame, cols: list[str]) -> ControlOverlap:
    codes_o, codes_c = _text_codes(original, control, cols)
    return control_overlap_test(codes_c, codes_o)[0]


def test_the_overlap_counts_and_expected_rate_by_hand():
    original = np.array([[0, 0], [0, 0], [1, 1], [2, 2]])  # one repeated row of four
    control = np.array([[0, 0], [3, 3], [1, 1], [4, 4]])
    test, rows = control_overlap_test(control, original)
    assert rows.tolist() == [0, 2] and test.overlapping == 2 and test.n_control == 4
    assert test.share == 0.5 and test.expected == 0.5  # rows 0 and 1 of the original repeat
    assert test.excess == 0 and not test.excessive


def test_anonymeters_holdout_passes_on_every_shared_column(adults):
    original, control = adults
    test = _test(original, control, list(original.columns))
    assert test.overlapping == 10 and not test.excessive, test.describe(15)
    coarse = _test(original, control, COARSE)  # 91 % coincide, as independent halves do
    assert coarse.share > 0.9 and abs(coarse.excess) < 0.01 and not coarse.excessive


def test_disjoint_halves_of_coarse_data_pass(adults):
    original, _ = adults
    coarse = original.copy()
    coarse["age"] = (coarse["age"] // 5) * 5  # 5-year bands
    rng = np.random.default_rng(0)
    order = rng.permutation(len(coarse))
    first, second = coarse.iloc[order[:20000]], coarse.iloc[order[20000:]]
    for cols in (COARSE, list(coarse.columns)):
        test = _test(first, second, cols)
        assert not test.excessive, test.describe(len(cols))


def test_a_control_holding_5_percent_of_the_original_fails_with_its_excess(adults):
    original, control = adults
    n = int(0.05 * len(control))
    leaky = pd.concat([control.iloc[n:], original.sample(n, random_state=1)],
                      ignore_index=True)
    test = _test(original, leaky, list(original.columns))
    assert test.excessive and test.excess > 0.04
    roles = Roles(quasi_identifiers=tuple(COARSE), sensitive=("income",))
    checks = _preconditions({"original": original.astype(str), "control": leaky.astype(str)},
                            roles, {})
    check = next(c for c in checks if c.check == "control rows do not overlap the original")
    assert not check.success and check.unexpected_count == test.overlapping
    assert "an excess of +4." in check.detail and "15 shared column(s)" in check.detail


def test_one_chance_match_in_a_one_row_control_is_not_significant():
    """The statistic's variance is the chance rate's under the null, pooled from both
    samples: one row of a one-row control equal to an original row, on data where a third of
    the original's rows repeat, is what chance gives (the control's own observed share of 1
    has no variance, which made this z = 91.7, p = 0)."""
    rng = np.random.default_rng(4)
    original = rng.integers(0, 12, size=(3000, 3))  # 1,728 combinations: some repeat
    control = original[:1].copy()
    test, rows = control_overlap_test(control, original)
    assert rows.tolist() == [0] and test.share == 1.0 and 0.2 < test.expected < 0.9
    pooled = (1 + round(test.expected * 3000)) / 3001
    z = (1.0 - test.expected) / np.sqrt(pooled * (1 - pooled) * (1 + 1 / 3000))
    assert test.z == pytest.approx(z) and test.z < 3.09  # p > 0.001
    assert not test.excessive
