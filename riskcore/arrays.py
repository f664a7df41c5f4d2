"""Distinct values of an array, fast for integers.

numpy 2's ``np.unique`` without ``return_*`` takes a hash-table path for integer arrays that is
far slower than sorting: 0.77 s against 0.01 s for a million int64 row numbers (2.4.6, one
core; 32 s against 0.7 s for thirty million candidate pairs in the release anatomy's linkage).
The flags (``return_inverse`` and the like) and floats take the sorting path already.
"""

from __future__ import annotations

import numpy as np


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``values`` (flattened), as ``np.unique(values)`` gives
    them; integers and booleans by one sort and a comparison of neighbours."""
    a = np.asarray(values).ravel()
    if a.dtype.kind not in "iub" or a.size < 2:
        return np.unique(a)
    s = np.sort(a)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
