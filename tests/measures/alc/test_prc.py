"""PRC, ALC, Wilson precision and the best-pair search (the ALC paper, section 3.5, 4, A.3;
docs/measures.md 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riskcore.measures.alc.prc import (
    PRCParams,
    alc,
    alc_from_pr,
    band,
    best_prc,
    exposed_group,
    prc,
    prc_table,
    probabilistic_precision,
    recall_pretargeted,
    recall_pretargeted_population,
    recall_random,
    wilson_bounds,
)
from riskcore.stats import wilson

ALPHA2 = PRCParams(alpha=2.0)


@pytest.mark.parametrize("p,r", [(1.0, 1 / 676), (0.6, 1 / 43), (0.5, 1.0)])
def test_section_4_1_equal_prc_points_with_alpha_2(p, r):
    # Figure 4a's equal-PRC points were drawn with alpha = 2 (its caption says 3)
    assert prc(p, r, ALPHA2) == pytest.approx(0.5, abs=0.0015)


@pytest.mark.parametrize("p,r,expected", [(1.0, 1 / 676, 0.646), (0.6, 1 / 43, 0.559),
                                          (0.5, 1.0, 0.5)])
def test_section_4_1_points_with_the_papers_alpha_3(p, r, expected):
    assert prc(p, r) == pytest.approx(expected, abs=0.0006)


@pytest.mark.parametrize("base,atk,rel,absolute", [(0.1, 0.3, 0.22, 0.2), (0.75, 0.95, 0.8, 0.2),
                                                   (0.99, 0.999, 0.9, 0.009)])
def test_section_4_2_table(base, atk, rel, absolute):
    assert alc(atk, base) == pytest.approx(rel, abs=0.005)
    assert alc(atk, base, PRCParams(abs_weight=1.0)) == pytest.approx(absolute, abs=1e-9)


@pytest.mark.parametrize("recall,p_base,p_atk", [(1.0, 0.05, 0.54), (1.0, 0.9, 0.95),
                                                 (1.0, 0.99, 0.995), (0.001, 0.2, 0.96)])
def test_appendix_a3_table_3_rows_are_alc_one_half(recall, p_base, p_atk):
    # the table's precisions are printed with two digits: ALC 0.5 within that rounding
    assert alc_from_pr(p_atk, recall, p_base, recall) == pytest.approx(0.5, abs=0.02)


def test_prc_definition_points():
    assert prc(0.8, 1.0) == 0.8
    assert prc(1.0, 0.01) == pytest.approx(1 - 0.5 ** 3, abs=1e-4)
    assert prc(1.0, 0.001) == pytest.approx(1 - 0.75 ** 3, abs=1e-4)
    assert prc(0.9, 1e-4) == 1e-4  # at and below R_min, PRC = R (rounded to 4 decimals)
    assert prc(0.9, 3e-5) == 0.0


def test_alpha_r_min_and_weight_take_effect():
    # the package ignores its coefficient arguments; riskgate must not
    assert prc(0.6, 1 / 43, ALPHA2) != prc(0.6, 1 / 43)
    assert prc(0.6, 1 / 43, PRCParams(r_min=1e-6)) > prc(0.6, 1 / 43)
    assert alc(0.95, 0.75, PRCParams(abs_weight=0.5)) == pytest.approx(0.5 * 0.2 + 0.5 * 0.8)


def test_alc_caps_a_perfect_prc():
    assert alc(1.0, 1.0) == 0.0
    assert alc(1.0, 0.5) == pytest.approx(1.0, abs=1e-6)


def test_bands():
    assert [band(x) for x in (None, -3.0, 0.49, 0.5, 0.74, 0.75)] == [
        "insufficient", "safe", "safe", "at_risk", "at_risk", "serious"]


def test_probabilistic_precision_is_the_wilson_centre():
    for c, n in [(0, 10), (7, 10), (50, 50), (123, 400)]:
        assert probabilistic_precision(c, n) == pytest.approx(wilson(c, n).rate, abs=1e-4)
    lo, hi = wilson_bounds(np.array([50.0]), np.array([50.0]))
    assert hi[0] == 1.0 and lo[0] == round(50 / (50 + 1.959964 ** 2), 4)


def test_recall_modes():
    assert recall_random(30, 120) == 0.25
    assert recall_pretargeted(200, 50) == 0.75  # eq. 5
    assert recall_pretargeted_population(200, 50, 300, 30_000) == pytest.approx(0.0075)  # eq. 4


def _oracle_best(conf, correct, max_width, params=PRCParams()):
    """The package's compute_best_prc, transcribed as a loop (stable order within ties)."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    best, used = 0.0, None
    for n in range(1, len(conf) + 1):
        c = sum(correct[i] for i in order[:n])
        lo, hi = wilson_bounds(c, n)
        if hi - lo < max_width:
            v = prc(lo + (hi - lo) / 2, n / len(conf), params)
            if v > best:
                best, used = v, conf[order[n - 1]]
    if used is None:
        return None
    rows = [i for i in range(len(conf)) if conf[i] >= used]
    c = sum(correct[i] for i in rows)
    lo, hi = wilson_bounds(c, len(rows))
    p = round(float(lo + (hi - lo) / 2), 4)
    return p, round(len(rows) / len(conf), 4), prc(p, round(len(rows) / len(conf), 4), params)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=1, max_size=400),
       st.sampled_from([0.1, 0.25]))
def test_best_prc_matches_the_loop(rows, width):
    conf = [c / 8 for c, _ in rows]
    correct = [k for _, k in rows]
    got = best_prc(np.array(conf), np.array(correct), width)
    want = _oracle_best(conf, correct, width)
    if want is None:
        assert got is None
    else:
        assert (got.precision, got.recall, got.prc) == pytest.approx(want)
        assert got.n == sum(1 for c in conf if c >= got.threshold)  # ties included


def test_prc_table_is_monotone_in_recall():
    rng = np.random.default_rng(0)
    conf = np.round(rng.random(2000), 2)
    correct = rng.random(2000) < conf
    table = prc_table(conf, correct, max_rows=30)
    recalls = [p.recall for p in table]
    assert recalls == sorted(recalls) and recalls[-1] == 1.0 and len(table) <= 30
    assert all(p.n == int((conf >= p.threshold).sum()) for p in table)  # ties complete


def test_exposed_group_needs_a_small_precise_unconfirmed_top_group():
    conf = np.r_[np.ones(6), np.linspace(0.9, 0.1, 44)]
    good = np.r_[np.ones(6, bool), np.zeros(44, bool)]
    g = exposed_group(conf, good, base_prc=0.5, min_correct=3)
    assert g is not None and g.n == 6 and g.correct == 6
    assert exposed_group(conf, good, base_prc=0.5, min_correct=7) is None
    mixed = good.copy()
    mixed[:3] = False  # half of the top group wrong: precision 0.5 is no exposure
    assert exposed_group(conf, mixed, base_prc=0.5) is None
    assert math.isclose(g.recall, 6 / 50)
