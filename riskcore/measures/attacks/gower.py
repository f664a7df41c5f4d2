"""Mixed-type distance and k-nearest-neighbour search (seed 002; anonymeter 1.1.0
``neighbors/mixed_types_kneighbors.py``; SPEC 5).

d(r0, r1) = sum over numeric columns of |a - b| / range + sum over categorical columns of [a != b],
where range = max - min over both tables (queries and candidates; 0 becomes 1). When both values
of a column are missing the column adds 1; a missing value against a present number makes the
distance undefined (the candidate is never a neighbour: +inf). Categorical missing values are a
category of their own (anonymeter label-encodes them). It is a sum, not a mean.

The search is vectorized over blocks of queries: a block of b queries against all m candidates
is a b x m matrix, with b chosen so that the matrix stays under ``max_cells`` entries; memory is
bounded and never n x m for large tables. Ties are broken by the candidate's row number, so the
result is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import progress
from ...compiled import compiled

if TYPE_CHECKING:
    from ...data import EncodedTable


DEFAULT_MAX_CELLS = 1_000_000
#: the code standing for "this column has no suppressed cells" (codes are >= -1)
NO_WILDCARD = -9


@dataclass(frozen=True)
class MixedMatrix:
    """Rows prepared for the distance: scaled numeric values and categorical codes."""

    numeric: np.ndarray  # (n, p) float64, scaled by range, NaN = missing
    categorical: np.ndarray  # (n, q) int32 codes, -1 = missing (a category of its own)
    columns: tuple[str, ...]
    n: int
    #: per categorical column the code of a suppressed cell ("any value"), or NO_WILDCARD
    wild: tuple[int, ...] = ()


def prepare(tables: Sequence[EncodedTable], columns: Sequence[str],
            rows: Sequence[np.ndarray | None] | None = None,
            wildcards: Mapping[str, int] | None = None) -> list[MixedMatrix]:
    """Scale and split jointly encoded tables over ``columns`` (ranges over all given tables).

    ``wildcards``: categorical column -> the code of the release's suppressed cells, which are
    at distance 0 from every value (riskcore.generalization)."""
    rows = rows or [None] * len(tables)
    num_cols = [c for c in columns if tables[0].column(c).values is not None]
    cat_cols = [c for c in columns if tables[0].column(c).values is None]
    nums, cats = [], []
    for t, r in zip(tables, rows):
        sel = slice(None) if r is None else r
        n = t.n if r is None else len(r)
        nums.append(np.column_stack([t.column(c).numbers()[sel] for c in num_cols])
                    if num_cols else np.empty((n, 0)))
        cats.append(np.column_stack([t.column(c).codes[sel] for c in cat_cols]).astype(np.int32)
                    if cat_cols else np.empty((n, 0), dtype=np.int32))
    if num_cols:
        allv = np.vstack(nums)
        with np.errstate(invalid="ignore"):
            lo = np.nanmin(allv, axis=0) if allv.size else np.zeros(len(num_cols))
            hi = np.nanmax(allv, axis=0) if allv.size else np.ones(len(num_cols))
        rng = hi - lo
        rng[~np.isfinite(rng) | (rng == 0)] = 1.0
        nums = [x / rng for x in nums]
    cols = tuple(num_cols) + tuple(cat_cols)
    wild = tuple(int((wildcards or {}).get(c, NO_WILDCARD)) for c in cat_cols)
    return [MixedMatrix(numeric=x, categorical=c, columns=cols, n=c.shape[0], wild=wild)
            for x, c in zip(nums, cats)]


def distances(queries: MixedMatrix, candidates: MixedMatrix) -> np.ndarray:
    """The full (nq, m) distance matrix (for small inputs and tests)."""
    return _block(queries.numeric, queries.categorical, candidates)


def _block(qn: np.ndarray, qc: np.ndarray, cand: MixedMatrix) -> np.ndarray:
    """The (b, m) distances of a block of queries: the numeric terms summed in float64 into
    one buffer, the categorical mismatches counted in small integers, then added once."""
    b, m = qc.shape[0], cand.n
    D = np.zeros((b, m))
    tmp = np.empty((b, m)) if qn.shape[1] else D
    for j in range(qn.shape[1]):
        q = qn[:, j][:, None]
        c = cand.numeric[:, j][None, :]
        np.subtract(q, c, out=tmp)
        np.abs(tmp, out=tmp)
        if np.isnan(qn[:, j]).any() or np.isnan(cand.numeric[:, j]).any():
            qnan = np.isnan(q)
            cnan = np.isnan(c)
            tmp[...] = np.where(qnan & cnan, 1.0, np.where(qnan | cnan, np.inf, tmp))
        D += tmp
    if qc.shape[1]:
        count = np.zeros((b, m), dtype=np.uint8 if qc.shape[1] < 255 else np.int32)
        for j in range(qc.shape[1]):
            q, c = qc[:, j][:, None], cand.categorical[:, j][None, :]
            w = cand.wild[j] if cand.wild else NO_WILDCARD
            if w != NO_WILDCARD:  # a suppressed cell on either side matches anything
                count += (q != c) & (q != w) & (c != w)
            else:
                count += q != c
        D += count
    return D


def kneighbors(queries: MixedMatrix, candidates: MixedMatrix, k: int,
               max_cells: int = DEFAULT_MAX_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest candidates of every query, nearest first (ties: lower row number first).

    Returns:
        (indices (nq, k) int64, distances (nq, k) float64).
    """
    m, nq = candidates.n, queries.n
    if not 1 <= k <= m:
        raise ValueError(f"k must lie in [1, {m}] (the number of candidates), got {k}")
    block = max(1, min(nq, max_cells // max(m, 1)))
    out_i = np.empty((nq, k), dtype=np.int64)
    out_d = np.empty((nq, k))
    kernel = _compiled()
    if kernel is not None:  # one pass per query, no b x m matrix
        block = max(1, min(nq, 256))
        cn = np.ascontiguousarray(candidates.numeric, dtype=np.float64)
        cc = np.ascontiguousarray(candidates.categorical, dtype=np.int32)
        wild = np.asarray(candidates.wild or (NO_WILDCARD,) * cc.shape[1], dtype=np.int32)
    for start in range(0, nq, block):
        progress.tick("nearest neighbours (queries)", start, nq)
        sl = slice(start, min(nq, start + block))
        if kernel is not None:
            kernel(np.ascontiguousarray(queries.numeric[sl], dtype=np.float64),
                   np.ascontiguousarray(queries.categorical[sl], dtype=np.int32),
                   cn, cc, wild, out_i[sl], out_d[sl])
            continue
        D = _block(queries.numeric[sl], queries.categorical[sl], candidates)
        idx, dist = _smallest_k(D, k)
        out_i[sl] = idx
        out_d[sl] = dist
    return out_i, out_d


def _compiled() -> Any:
    """The compiled kernel, or None without numba (the NumPy path gives the same result)."""
    return compiled(_knn_rows)


def _knn_rows(qn: np.ndarray, qc: np.ndarray, cn: np.ndarray, cc: np.ndarray,
              wild: np.ndarray, out_i: np.ndarray, out_d: np.ndarray) -> None:  # pragma: no cover
    """Per query the k nearest candidates, (distance, row) ascending, in one pass over the
    candidates: the same sums in the same order as :func:`_block` (numeric terms from 0.0,
    then the count of categorical mismatches), so the same float64 distances, and a sorted
    buffer of k where a later row never displaces an equal earlier one (ties: lower row)."""
    nq, p = qn.shape
    m, q = cc.shape
    k = out_i.shape[1]
    inf = np.inf
    for i in range(nq):
        filled = 0
        worst = inf  # the k-th distance so far; every term is >= 0, so a partial sum at or
        for j in range(m):  # above it already rules the candidate out
            d = 0.0
            for c in range(p):
                a = qn[i, c]
                b = cn[j, c]
                if a != a:
                    d += 1.0 if b != b else inf
                elif b != b:
                    d += inf
                else:
                    d += abs(a - b)
                if filled == k and d >= worst:
                    break
            if filled == k and d >= worst:
                continue
            count = 0
            for c in range(q):
                a2 = qc[i, c]
                b2 = cc[j, c]
                w = wild[c]
                if a2 != b2 and not (w != NO_WILDCARD and (a2 == w or b2 == w)):
                    count += 1
            if q:
                d += count
            if filled == k and not d < worst:
                continue
            pos = filled if filled < k else k - 1
            while pos > 0 and out_d[i, pos - 1] > d:
                if pos < k:
                    out_d[i, pos] = out_d[i, pos - 1]
                    out_i[i, pos] = out_i[i, pos - 1]
                pos -= 1
            out_d[i, pos] = d
            out_i[i, pos] = j
            if filled < k:
                filled += 1
            if filled == k:
                worst = out_d[i, k - 1]


def _smallest_k(D: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row the k smallest entries, ties broken by column index, sorted (distance, index)."""
    b, m = D.shape
    if k == 1:  # argmin returns the first (lowest-index) smallest entry
        idx = np.argmin(D, axis=1)[:, None]
        return idx, np.take_along_axis(D, idx, axis=1)
    if k == m:
        order = np.lexsort((np.broadcast_to(np.arange(m), D.shape), D), axis=1)
        return order, np.take_along_axis(D, order, axis=1)
    kth = np.partition(D, k - 1, axis=1)[:, k - 1][:, None]
    less = D < kth
    equal = D == kth
    n_less = less.sum(axis=1)
    take = less | equal
    spill = np.flatnonzero(n_less + equal.sum(axis=1) > k)  # ties at the k-th: lowest index
    if spill.size:
        eq = equal[spill]
        first = np.cumsum(eq, axis=1, dtype=np.int32) <= (k - n_less[spill])[:, None]
        take[spill] = less[spill] | (eq & first)
    rows, cols = np.nonzero(take)  # row-major: k entries per row, columns ascending
    idx = cols.reshape(b, k)
    dist = D[rows, cols].reshape(b, k)
    order = np.lexsort((idx, dist), axis=1)
    return np.take_along_axis(idx, order, axis=1), np.take_along_axis(dist, order, axis=1)
