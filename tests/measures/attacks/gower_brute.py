"""Gower's distance by its definition, one pair of rows at a time: the reference the blocked
and compiled implementations are tested against (attacks and copies)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd


def brute_gower(q: pd.Series, c: pd.Series, num: Sequence[str],
                ranges: Mapping[str, float]) -> float:
    """Sum over columns: numbers |a - b| / range (both missing: 1; one missing: infinite),
    categories 0 when equal or both missing, else 1."""
    d = 0.0
    for col in q.index:
        a, b = q[col], c[col]
        if col in num:
            if pd.isna(a) and pd.isna(b):
                d += 1
            elif pd.isna(a) or pd.isna(b):
                return math.inf
            else:
                d += abs(a - b) / ranges[col]
        else:
            d += 0.0 if (pd.isna(a) and pd.isna(b)) or a == b else 1.0
    return d
