"""Mixed-type distance and k-nearest-neighbour search (anonymeter 1.1.0
``neighbors/mixed_types_kneighbors.py``; docs/measures.md 5).

d(r0, r1) = sum over numeric columns of |a - b| / range + sum over categorical columns of [a != b],
where range = max - min over both tables (queries and candidates; 0 becomes 1). When both values
of a column are missing the column adds 1; a missing value against a present number makes the
distance undefined (the candidate is never a neighbour: +inf). Categorical missing values are a
category of their own (anonymeter label-encodes them). It is a sum, not a mean.

With numba, the search is compiled and pruned (:func:`_search`): the candidates grouped by
their categorical codes, each group's rows cut into leaves with a box around their numbers,
and a leaf skipped when its box is farther than the k-th nearest found; the same distances,
summed in the same order, and the same neighbours. Without it, the search is vectorized over
blocks of queries: a block of b queries against all m candidates is a b x m matrix, with b
chosen so that the matrix stays under ``max_cells`` entries; memory is bounded and never
n x m for large tables. Ties are broken by the candidate's row number, so the result is
deterministic.

Candidates alike (the same numbers and codes: a generalized release has a few thousand
distinct rows on an attack's columns among millions) are at the same distance from every
query; the compiled search then runs over one row per group (its first), finds the k nearest
groups by (distance, first row), and takes the k nearest rows from their members: the same
rows and distances as the search row by row (rows at one distance come in row order, and
each comes from a group whose first row is no later).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ... import progress
from ...compiled import compiled
from ...equivalence import group_rows
from ...threads import in_chunks

if TYPE_CHECKING:
    from ...data import EncodedTable


DEFAULT_MAX_CELLS = 1_000_000
#: candidates are searched by groups of rows alike when there are at most this share of their
#: rows' number of groups (else row by row: grouping would not pay)
GROUPED_BELOW = 0.5
#: the code standing for "this column has no suppressed cells" (codes are >= -1)
NO_WILDCARD = -9
#: the nearest-distance search's leaves: at most this many rows of a group share a box
LEAF_ROWS = 64
#: a group of at most this many rows (one leaf) is searched row by row, without its box
BOX_FROM_ROWS = 8


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
               max_cells: int = DEFAULT_MAX_CELLS, grouped: bool = True
               ) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest candidates of every query, nearest first (ties: lower row number first);
    ``grouped``: candidates alike searched once (see the module doc), when it pays.

    Returns:
        (indices (nq, k) int64, distances (nq, k) float64).
    """
    m, nq = candidates.n, queries.n
    if not 1 <= k <= m:
        raise ValueError(f"k must lie in [1, {m}] (the number of candidates), got {k}")
    kernel = _compiled()
    groups = _alike(candidates) if grouped and kernel is not None and nq else None
    if groups is not None:
        return _by_groups(queries, candidates, k, *groups)
    if kernel is not None:  # the search by groups of codes and leaves, ties in row order
        idx, dist = _search([(queries, candidates, False)], k, True, kernel)
        return idx[:, 0], dist[:, 0]
    block = max(1, min(nq, max_cells // max(m, 1)))
    out_i = np.empty((nq, k), dtype=np.int64)
    out_d = np.empty((nq, k))
    for start in range(0, nq, block):
        progress.tick("nearest neighbours (queries)", start, nq)
        sl = slice(start, min(nq, start + block))
        D = _block(queries.numeric[sl], queries.categorical[sl], candidates)
        idx, dist = _smallest_k(D, k)
        out_i[sl] = idx
        out_d[sl] = dist
    return out_i, out_d


def _alike(candidates: MixedMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The candidates' groups of rows alike (a number by its value: -0.0 is 0.0, every NaN
    one value, as the distance reads them): each group's first row (ascending), the rows by
    group (in row order within one) and each group's start among them; None when there are
    too many groups for grouping to pay."""
    m = candidates.n
    parts = [pd.factorize(candidates.numeric[:, j])[0] for j in range(
        candidates.numeric.shape[1])] + [candidates.categorical[:, j] for j in range(
            candidates.categorical.shape[1])]
    if m < 2 or not parts:
        return None
    ids, g = group_rows(np.column_stack(parts))
    if g > GROUPED_BELOW * m:
        return None
    # ids follow first occurrence: group i's first row is the i-th first row met
    # a stable sort of small integers is a radix sort (numpy), several times faster
    members = np.argsort(ids.astype(np.uint16) if g <= 1 << 16 else ids, kind="stable")
    starts = np.searchsorted(ids[members], np.arange(g + 1))
    return members[starts[:-1]], members, starts


def _by_groups(queries: MixedMatrix, candidates: MixedMatrix, k: int, first: np.ndarray,
               members: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kneighbors` over the groups of rows alike (:func:`_alike`): the k nearest groups
    by (distance, first row), then the k nearest of their first k rows each."""
    reps = MixedMatrix(numeric=candidates.numeric[first],
                       categorical=candidates.categorical[first], columns=candidates.columns,
                       n=first.size, wild=candidates.wild)
    kg = min(k, first.size)
    gi, gd = kneighbors(queries, reps, kg, grouped=False)
    sizes = np.diff(starts)
    offsets = np.arange(k)
    valid = offsets[None, None, :] < sizes[gi][:, :, None]  # (nq, kg, k)
    pos = np.minimum(starts[gi][:, :, None] + offsets[None, None, :], members.size - 1)
    rows = np.where(valid, members[pos], np.iinfo(np.int64).max).reshape(queries.n, -1)
    dist = np.where(valid, gd[:, :, None], np.inf).reshape(queries.n, -1)
    order = np.lexsort((rows, dist), axis=1)[:, :k]
    return np.take_along_axis(rows, order, axis=1), np.take_along_axis(dist, order, axis=1)


def _compiled() -> Any:
    """The compiled search and the cutting of leaves, or None without numba (the NumPy path
    gives the same result)."""
    kernel, cut = compiled(_nearest_rows), compiled(_leaves)
    return None if kernel is None or cut is None else (kernel, cut)


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


# ---------------------------------------------------------------- the nearest distance alone
def nearest_distance(queries: MixedMatrix, candidates: MixedMatrix, squared: bool = False
                     ) -> np.ndarray:
    """Per query the distance to its nearest candidate: ``kneighbors(queries, candidates,
    1)[1][:, 0]``, the same float64 values, found without comparing every pair. With
    ``squared``, the squared Euclidean distance over one-hot categories and the numbers as
    given instead (a category mismatch adds 2, a number its squared difference; a missing
    number against a present one: +inf, two missing: 1). See :func:`nearest_distances`."""
    return nearest_distances([(queries, candidates, squared)])[:, 0]


def nearest_distances(metrics: Sequence[tuple[MixedMatrix, MixedMatrix, bool]]
                      ) -> np.ndarray:
    """Per query, its nearest candidate's distance under each of several metrics in one
    search: (n queries, k metrics). Each metric is (queries, candidates, squared), the same
    rows, categorical codes and missing cells in every one (the release's quantiles,
    z-scores), and one search serves all (the attacks share it instead of each searching
    anew).

    The candidates are grouped by their categorical codes (every row of a group has the same
    codes, so one mismatch count per group and query), and each group's rows are cut into
    leaves of at most :data:`LEAF_ROWS` rows by halving along the numeric column of widest
    range, a k-d tree's leaves (:func:`_leaves`). Each leaf keeps, per metric and column, the
    range of its present numbers: a box. Every term of a distance is at least 0, so a row's
    distance is at least its group's mismatch count plus, column by column, the query's
    distance to the box (a query's missing number: 1, as it is 1 or +inf against any row; a
    column missing in every row of the leaf: +inf, as it is against each). A query visits the
    groups by their mismatch count, fewest first, and stops at the first whose count is no
    better than the nearest found under every metric; in a group it visits first the leaf
    with the lowest bound, then every other leaf whose bound is still below the nearest found
    under some metric; it leaves a distance's sum as soon as its partial sum is no better.
    Bounds and distances are summed in the same column order, and rounding is monotone, so a
    bound never exceeds the distance it bounds; the distances computed are summed in the same
    order as :func:`_block`, so each minimum is the same number.
    Queries with the same categorical codes are searched one after another, and the groups'
    mismatch counts and order are made once for each run of them. Without numba, the block
    search.
    """
    kernel = _compiled()
    if kernel is None or metrics[0][1].n == 0:
        return np.column_stack([
            _nearest_squared_blocks(q, c) if sq else kneighbors(q, c, 1)[1][:, 0]
            for q, c, sq in metrics])
    return _search(metrics, 1, False, kernel)[1][:, :, 0]


def _search(metrics: Sequence[tuple[MixedMatrix, MixedMatrix, bool]], k: int, ties: bool,
            kernel: tuple[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The compiled search (:func:`nearest_distances` describes it): per query and metric
    the k nearest candidates, (indices, distances) each (n queries, metrics, k), nearest
    first. With ``ties``, a candidate at the k-th distance is kept over a later row (the
    k nearest by (distance, row), as :func:`_smallest_k`), and a bound equal to the k-th
    distance does not rule a leaf out; without, only the distances are exact."""
    search, cut = kernel
    first_q, first_c, _ = metrics[0]
    cc = np.asarray(first_c.categorical, dtype=np.int32)
    m, q = cc.shape
    p = np.asarray(first_c.numeric).reshape(m, -1).shape[1]
    group_keys, group = _groups(cc)
    order = np.argsort(group, kind="stable")
    n_groups = group_keys.shape[0]
    starts = np.searchsorted(group[order], np.arange(n_groups + 1)).astype(np.int64)
    # each group's rows in leaves (``rows``: the candidates by group, then leaf by leaf), the
    # numbers copied once in that order, and each leaf's box per metric (fmin/fmax skip
    # missing numbers; a column missing in every row of a leaf stays NaN)
    rows = order.astype(np.int64)
    first_numbers = np.ascontiguousarray(np.asarray(first_c.numeric, dtype=np.float64)
                                         .reshape(m, p))
    leaf_starts, group_leaves = cut(first_numbers, starts, LEAF_ROWS, rows)
    cs = np.stack([np.asarray(c.numeric, dtype=np.float64).reshape(m, p)[rows]
                   for _, c, _ in metrics])
    if p:
        lo = np.ascontiguousarray(np.fmin.reduceat(cs, leaf_starts[:-1], axis=1))
        hi = np.ascontiguousarray(np.fmax.reduceat(cs, leaf_starts[:-1], axis=1))
    else:
        lo = hi = np.zeros((len(metrics), leaf_starts.size - 1, 0))
    wild = np.asarray(first_c.wild or (NO_WILDCARD,) * q, dtype=np.int32)
    nq, n_metrics = first_q.n, len(metrics)
    out_i = np.empty((nq, n_metrics, k), dtype=np.int64)
    out_d = np.empty((nq, n_metrics, k))
    # queries with the same categorical codes side by side: the search counts each group's
    # mismatches once for a run of them (the counts depend on the codes alone)
    codes = np.asarray(first_q.categorical, dtype=np.int32).reshape(nq, q)
    # (and from one run to the next, the columns whose codes are shared by fewest groups
    # change most often: the kernel's update goes over the groups holding the codes that
    # changed, so the column of fewest codes sorts first)
    spread = [np.unique(group_keys[:, c]).size for c in range(q)]
    alike = np.lexsort(codes.T[np.argsort(spread, kind="stable")[::-1]]) if q and nq > 1 \
        else np.arange(nq)
    qn = np.ascontiguousarray(np.stack([np.asarray(qm.numeric, dtype=np.float64).reshape(
        nq, p)[alike] for qm, _, _ in metrics]))
    qc = np.ascontiguousarray(codes[alike])
    keys = np.ascontiguousarray(group_keys, dtype=np.int32)
    # per column, the groups ordered by their code there: the groups holding a code are one
    # run of it (what the kernel updates when a query's code in that column changes)
    by_code = np.ascontiguousarray(np.argsort(keys, axis=0, kind="stable").T)
    code_sorted = np.ascontiguousarray(np.take_along_axis(keys, by_code.T, axis=0).T)
    squared = np.asarray([sq for _, _, sq in metrics], dtype=np.bool_)
    # each query's own group, where no column has suppressed cells (one would match others)
    exact = _own_group(keys, qc) if q and (wild == NO_WILDCARD).all() else np.full(nq, -1)

    def run(sl: slice) -> None:
        search(qn[:, sl], qc[sl], cs, rows, keys, by_code, code_sorted, group_leaves,
               leaf_starts, lo, hi, wild, squared, ties, exact[sl], out_i[sl], out_d[sl])

    in_chunks(nq, run, 512, lambda done: progress.tick("nearest neighbours (queries)", done, nq))
    found_i, found_d = np.empty_like(out_i), np.empty_like(out_d)
    found_i[alike], found_d[alike] = out_i, out_d
    return found_i, found_d


def _own_group(keys: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per row of ``codes``, the row of ``keys`` (distinct rows) equal to it, or -1: rows
    compared as bytes, one sort and one binary search."""
    if codes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    width = np.dtype((np.void, 4 * keys.shape[1]))
    kv = np.ascontiguousarray(keys, dtype=np.int32).view(width).ravel()
    qv = np.ascontiguousarray(codes, dtype=np.int32).view(width).ravel()
    order = np.argsort(kv)
    pos = np.minimum(np.searchsorted(kv[order], qv), kv.size - 1)
    return np.where(kv[order][pos] == qv, order[pos], -1).astype(np.int64)


def _nearest_squared_blocks(queries: MixedMatrix, candidates: MixedMatrix) -> np.ndarray:
    """:func:`nearest_distance` with ``squared`` without numba: blocks of queries against
    every candidate."""
    out = np.empty(queries.n)
    block = max(1, DEFAULT_MAX_CELLS // max(candidates.n, 1))
    for start in range(0, queries.n, block):
        sl = slice(start, min(queries.n, start + block))
        qn, qc = queries.numeric[sl], queries.categorical[sl]
        D = np.zeros((qc.shape[0], candidates.n))
        for j in range(qn.shape[1]):
            a, b = qn[:, j][:, None], candidates.numeric[:, j][None, :]
            term = (a - b) ** 2
            an, bn = np.isnan(a), np.isnan(b)
            D += np.where(an & bn, 1.0, np.where(an | bn, np.inf, term))
        mismatches = np.zeros_like(D)
        for j in range(qc.shape[1]):
            q, c = qc[:, j][:, None], candidates.categorical[:, j][None, :]
            w = candidates.wild[j] if candidates.wild else NO_WILDCARD
            mismatches += (q != c) if w == NO_WILDCARD else (q != c) & (q != w) & (c != w)
        if qc.shape[1]:  # added once, after the numbers, as the compiled search adds it
            D += 2.0 * mismatches
        out[sl] = D.min(axis=1)
    return out


def _groups(cc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of categorical codes (one per group, any order) and each row's
    group: the codes as one mixed-radix integer per row, so one integer sort instead of
    ``np.unique(axis=0)``'s sort of byte strings."""
    m, q = cc.shape
    if q == 0:
        return np.zeros((1, 0), dtype=np.int32), np.zeros(m, dtype=np.int64)
    low = cc.min(axis=0).astype(np.int64)
    shifted = cc.astype(np.int64) - low  # every code >= 0
    radix = shifted.max(axis=0) + 1
    if float(np.prod(radix.astype(np.float64))) >= 2.0**62:
        keys, group = np.unique(cc, axis=0, return_inverse=True)
        return keys.astype(np.int32), np.asarray(group).ravel()
    key = np.zeros(m, dtype=np.int64)
    for c in range(q):
        key = key * radix[c] + shifted[:, c]
    uniq, group = np.unique(key, return_inverse=True)
    keys = np.empty((uniq.size, q), dtype=np.int64)
    rest = uniq.copy()
    for c in range(q - 1, -1, -1):
        keys[:, c] = rest % radix[c]
        rest //= radix[c]
    return (keys + low).astype(np.int32), np.asarray(group).ravel()


def _leaves(x: np.ndarray, starts: np.ndarray, leaf: int, perm: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Each group's rows (``perm[starts[g]:starts[g+1]]``, rows of ``x``, rows by columns)
    cut into leaves of at most ``leaf`` rows: a range of more is halved at the median of its
    column of widest range among its present numbers (missing ones count as the largest; a
    selection, not a sort), or halved as it is when no column varies. Reorders ``perm`` in
    place, leaf by leaf; returns the leaves' starts in ``perm`` (and the end) and each
    group's first leaf (and the end)."""
    m, p = x.shape
    n_groups = starts.size - 1
    leaf_starts = np.empty(m + n_groups + 1, dtype=np.int64)
    group_leaves = np.empty(n_groups + 1, dtype=np.int64)
    stack = np.empty((130, 2), dtype=np.int64)  # halving: depth <= log2(m) + 1
    n_leaves = 0
    for g in range(n_groups):
        group_leaves[g] = n_leaves
        stack[0, 0], stack[0, 1] = starts[g], starts[g + 1]
        top = 1
        while top > 0:
            top -= 1
            lo, hi = stack[top, 0], stack[top, 1]
            if hi - lo <= leaf:
                leaf_starts[n_leaves] = lo
                n_leaves += 1
                continue
            widest, width = -1, 0.0
            for c in range(p):
                small, large = np.inf, -np.inf
                for j in range(lo, hi):
                    v = x[perm[j], c]
                    if v < small:
                        small = v
                    if v > large:
                        large = v
                if large - small > width:
                    widest, width = c, large - small
            mid = (lo + hi) // 2
            if widest >= 0:  # the rows below the median before it, the others after it
                key = np.empty(hi - lo)
                for j in range(lo, hi):
                    v = x[perm[j], widest]
                    key[j - lo] = v if v == v else np.inf
                rows = perm[lo:hi].copy()
                left, right, kth = 0, hi - lo - 1, mid - lo
                while left < right:  # Hoare's selection, the pivot a median of three
                    a, b, c = key[left], key[(left + right) // 2], key[right]
                    pivot = max(min(a, b), min(max(a, b), c))
                    i, j = left, right
                    while i <= j:
                        while key[i] < pivot:
                            i += 1
                        while key[j] > pivot:
                            j -= 1
                        if i <= j:
                            key[i], key[j] = key[j], key[i]
                            rows[i], rows[j] = rows[j], rows[i]
                            i += 1
                            j -= 1
                    if kth <= j:
                        right = j
                    elif kth >= i:
                        left = i
                    else:
                        break
                perm[lo:hi] = rows
            stack[top, 0], stack[top, 1] = mid, hi  # the left half is cut first
            stack[top + 1, 0], stack[top + 1, 1] = lo, mid
            top += 2
    group_leaves[n_groups] = n_leaves
    leaf_starts[n_leaves] = m
    return leaf_starts[:n_leaves + 1].copy(), group_leaves


def _nearest_rows(qn: np.ndarray, qc: np.ndarray, cn: np.ndarray, rows: np.ndarray,
                  keys: np.ndarray, by_code: np.ndarray, code_sorted: np.ndarray,
                  group_leaves: np.ndarray, leaf_starts: np.ndarray,
                  lo: np.ndarray, hi: np.ndarray, wild: np.ndarray, squared: np.ndarray,
                  ties: bool, exact: np.ndarray, out_i: np.ndarray, out_d: np.ndarray
                  ) -> None:  # pragma: no cover
    """:func:`_search`'s kernel: ``cn`` (metrics, rows, columns) leaf by leaf, position j
    being candidate ``rows[j]``; group g's leaves group_leaves[g]:group_leaves[g+1], leaf l's
    rows leaf_starts[l]:leaf_starts[l+1] and its box lo[:, l], hi[:, l]. A metric with
    ``squared`` sums squared differences and weighs a mismatch 2. Per query and metric a
    buffer of the k nearest, sorted by (distance, row). ``exact[i]``: the group with query
    i's own codes (-1: none, or a column has suppressed cells), searched first; when every
    metric's k-th nearest is then nearer than one mismatch, no other group can hold a nearer
    one (nor one as near), and the groups' mismatches are not counted. The counts of the
    codes last counted are kept: for the next codes only the columns that changed are
    updated, each over the groups holding the old code or the new one there (``by_code``,
    the groups by code per column, ``code_sorted`` their codes), not over every group and
    column again (half the kernel's time on a national survey's 7,724 groups before); a
    change to or from a suppressed cell updates that column over every group. One function on
    purpose: numba compiles it as one loop nest, and the pruning bounds it keeps across
    groups would be arguments and calls in the innermost loop if it were split."""
    k, nq, p = qn.shape
    n_groups, q = keys.shape
    kk = out_d.shape[2]
    inf = np.inf
    weight = np.empty(k)
    for t in range(k):
        weight[t] = 2.0 if squared[t] else 1.0
    mism = np.empty(n_groups, dtype=np.int64)
    by_mism = np.empty(n_groups, dtype=np.int64)
    tally = np.empty(q + 2, dtype=np.int64)
    worst = np.empty(k)  # per metric the k-th distance so far (+inf until k are found)
    filled = np.empty(k, dtype=np.int64)
    most = 1
    for g in range(n_groups):
        most = max(most, group_leaves[g + 1] - group_leaves[g])
    bound = np.empty((most, k))
    visit = np.empty(most, dtype=np.int64)
    counted = False  # mism and by_mism hold the counts of the current run of codes
    have = False  # mism holds the counts of the codes in ``last``
    last = np.empty(q, dtype=np.int64)
    for i in range(nq):
        again = i > 0  # the previous query's codes (the caller puts them side by side)
        if again:
            for c in range(q):
                if qc[i, c] != qc[i - 1, c]:
                    again = False
                    break
        if not again:
            counted = False
        for t in range(k):
            worst[t] = inf
            filled[t] = 0
            for x in range(kk):  # what stays unfilled (every candidate at +inf, ruled out)
                out_d[i, t, x] = inf
                out_i[i, t, x] = -1
        own = exact[i]
        step = -1 if own >= 0 else 0
        while step < n_groups:
            if step == 0 and own >= 0:  # the query's own group searched: any other is at
                nearer = True  # least one mismatch away
                for t in range(k):
                    if not worst[t] < weight[t]:
                        nearer = False
                if nearer:
                    break
            if step == 0 and not counted:
                if not have:
                    for g in range(n_groups):
                        count = 0
                        for c in range(q):
                            a2 = qc[i, c]
                            b2 = keys[g, c]
                            w = wild[c]
                            if a2 != b2 and not (w != NO_WILDCARD and (a2 == w or b2 == w)):
                                count += 1
                        mism[g] = count
                    have = True
                else:
                    for c in range(q):
                        old, new = last[c], qc[i, c]
                        if old == new:
                            continue
                        w = wild[c]
                        if w != NO_WILDCARD and (old == w or new == w):
                            for g in range(n_groups):  # every group's term may change
                                b2 = keys[g, c]
                                was = old != b2 and not (old == w or b2 == w)
                                now = new != b2 and not (new == w or b2 == w)
                                mism[g] += (1 if now else 0) - (1 if was else 0)
                            continue
                        # the groups holding the old code now mismatch, those holding the
                        # new one now match (a group's suppressed cell matches both)
                        for j in range(np.searchsorted(code_sorted[c], old),
                                       np.searchsorted(code_sorted[c], old, side="right")):
                            mism[by_code[c, j]] += 1
                        for j in range(np.searchsorted(code_sorted[c], new),
                                       np.searchsorted(code_sorted[c], new, side="right")):
                            mism[by_code[c, j]] -= 1
                for c in range(q):
                    last[c] = qc[i, c]
                tally[:] = 0
                for g in range(n_groups):
                    tally[mism[g] + 1] += 1
                # the groups by mismatch count, fewest first (a counting sort): the nearest
                # found fall soonest, and the first group whose count is no better under
                # every metric ends the search, as every later one has at least as many
                for c in range(q + 1):
                    tally[c + 1] += tally[c]
                for g in range(n_groups):
                    by_mism[tally[mism[g]]] = g
                    tally[mism[g]] += 1
                counted = True
            if step < 0:
                g, mg = own, 0
            else:
                g = by_mism[step]
                mg = mism[g]
            step += 1
            if step > 0 and g == own:
                continue  # searched first
            useful = False
            for t in range(k):
                least = weight[t] * mg
                if least < worst[t] or (ties and least == worst[t]):
                    useful = True
            if not useful:
                break
            l0, l1 = group_leaves[g], group_leaves[g + 1]
            n_visit = 0
            if l1 - l0 == 1 and leaf_starts[l1] - leaf_starts[l0] <= BOX_FROM_ROWS:
                visit[0] = l0  # a few rows: their distances cost what a bound would
                n_visit = 1
            else:
                # every leaf's bound; the lowest (first metric) first, then the rest in order
                first, first_bound = -1, inf
                for leaf in range(l0, l1):
                    below = False
                    for t in range(k):
                        acc = 0.0
                        for c in range(p):
                            a = qn[t, i, c]
                            if a != a:
                                acc += 1.0
                                continue
                            low = lo[t, leaf, c]
                            if low != low:  # missing in every row of the leaf
                                acc += inf
                                continue
                            if a < low:
                                gap = low - a
                            elif a > hi[t, leaf, c]:
                                gap = a - hi[t, leaf, c]
                            else:
                                gap = 0.0
                            acc += gap * gap if squared[t] else gap
                        if q:
                            acc += weight[t] * mg
                        bound[leaf - l0, t] = acc
                        if acc < worst[t] or (ties and acc == worst[t]):
                            below = True
                    if below and (first < 0 or bound[leaf - l0, 0] < first_bound):
                        first, first_bound = leaf, bound[leaf - l0, 0]
                if first < 0:
                    continue
                visit[0] = first
                n_visit = 1
                for leaf in range(l0, l1):
                    if leaf != first:
                        visit[n_visit] = leaf
                        n_visit += 1
            for v in range(n_visit):
                leaf = visit[v]
                if v > 0:  # still within the k nearest found under some metric?
                    below = False
                    for t in range(k):
                        least = bound[leaf - l0, t]
                        if least < worst[t] or (ties and least == worst[t]):
                            below = True
                    if not below:
                        continue
                for j in range(leaf_starts[leaf], leaf_starts[leaf + 1]):
                    r = rows[j]
                    for t in range(k):
                        acc = 0.0
                        add = weight[t] * mg if q else 0.0
                        limit = worst[t]
                        for c in range(p):
                            a = qn[t, i, c]
                            b = cn[t, j, c]
                            if a != a:
                                acc += 1.0 if b != b else inf
                            elif b != b:
                                acc += inf
                            elif squared[t]:
                                acc += (a - b) * (a - b)
                            else:
                                acc += abs(a - b)
                            # every term is >= 0 and rounding is monotone: a partial sum
                            # already past the k-th found stays so (the sum's order is
                            # unchanged, so each distance is the same number)
                            part = acc + add
                            if part > limit or (not ties and part == limit):
                                break
                        if q:
                            acc += add
                        if filled[t] == kk and not (acc < limit or (
                                ties and acc == limit and r < out_i[i, t, kk - 1])):
                            continue
                        # into the sorted buffer: (distance, row) ascending
                        pos = filled[t] if filled[t] < kk else kk - 1
                        while pos > 0 and (out_d[i, t, pos - 1] > acc or (
                                out_d[i, t, pos - 1] == acc and out_i[i, t, pos - 1] > r)):
                            out_d[i, t, pos] = out_d[i, t, pos - 1]
                            out_i[i, t, pos] = out_i[i, t, pos - 1]
                            pos -= 1
                        out_d[i, t, pos] = acc
                        out_i[i, t, pos] = r
                        if filled[t] < kk:
                            filled[t] += 1
                        if filled[t] == kk:
                            worst[t] = out_d[i, t, kk - 1]
