"""Record linkage: each row of a query table (the release, the control, the original itself)
linked to the original row it comes from, or to none; linear-logarithmic in the rows.

**Candidates (blocking).** Rows are compared only with the original rows that share their
values on a few columns: one pass on every comparable column (exact copies, generalized rows),
then one pass per *key*, a short run of columns starting at each column in turn and long
enough that a key's value holds a handful of original rows (expected block size at most
:data:`BLOCK`, from the columns' collision rates), so that a row whose values changed in some
columns (swapping, PRAM, noise) still meets its source through a key that avoids them; and,
for numeric columns, the nearest original rows in sorted order (sorted neighbourhood), so that
noise does not hide a row. A block with more than :data:`CAP` original rows is passed over
(its rows are alike; another key separates them). A key is made over the original rows that
hold some query row's value in its most selective column alone (no other row can share it):
a sample of the release against a large original reads a few percent of its rows per key.

**Scores.** Each candidate pair is scored as Fellegi and Sunter do (JASA 1969): per column, the
log-likelihood ratio of agreeing (log2 m/u) or disagreeing (log2 (1-m)/(1-u)), u the chance two
random rows agree (the column's collision rate), m the chance a true pair does (0.95); a
suppressed or missing cell says nothing (0). Numbers agree by degrees: fully within
``tolerance`` (the column's resolution), not at all beyond four times it.

**Assignment.** Each original row is linked to one query row at most: in rounds, every query
row proposes its best free candidate and every original row accepts its best proposal, until
no proposal is left (a greedy matching, vectorized).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..arrays import stable_order, unique
from .domain import ColumnDomain

#: the running key's bound (mixed radix, before it is made dense)
_SAFE = 2**62
#: the expected number of original rows a key's value holds
BLOCK = 3.0
#: a block with more original rows is passed over
CAP = 16
#: the pass on every column keeps larger blocks (identical rows)
CAP_ALL = 400
#: at most this many keys
MAX_KEYS = 8
#: the neighbours taken on each side in sorted order, per numeric column
WINDOW = 2
#: the chance a true pair agrees on a column (Fellegi-Sunter m)
M = 0.95
#: rounds of the assignment
ROUNDS = 12


@dataclass(frozen=True)
class Links:
    """The linkage of a query table to the original.

    Attributes:
        original_row: per query row, the original row it is assigned (-1: none).
        score: its Fellegi-Sunter score (-inf: none).
        quality: the score over the best a row with the same cells shown could get (1: every
            compared column agrees).
        agree: the columns that agree (fully) with the assigned row.
        compared: the columns compared (shown in both).
        best_quality: the quality of each row's best candidate, whatever the other rows took
            (how well a row matches someone: what chance is measured on, row by row, so that
            it does not depend on how many rows compete for the same original rows).
    """

    original_row: np.ndarray
    score: np.ndarray
    quality: np.ndarray
    agree: np.ndarray
    compared: np.ndarray
    best_quality: np.ndarray


#: what a matrix derives from its numbers alone (:meth:`Matrix.keep_numbers_from`)
NUMBERS_ONLY = ("order", "sorted columns", "tolerances", "bins")


@dataclass(frozen=True)
class Matrix:
    """The comparable columns of one table: codes (n, m) and numbers (n, k); ``memo`` keeps
    what is derived from them once (an original linked to several queries: the release,
    chance's rows)."""

    codes: np.ndarray
    numbers: np.ndarray
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def derived(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per matrix and ``key``."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def keep_numbers_from(self, earlier: Matrix | None) -> None:
        """What ``earlier`` derived from its numbers alone (their sorted orders), where they
        are these numbers (labels learned change codes, never numbers)."""
        if earlier is None or earlier.numbers.shape != self.numbers.shape or \
                not np.array_equal(earlier.numbers, self.numbers, equal_nan=True):
            return
        for key, value in earlier.memo.items():
            if key in NUMBERS_ONLY or (isinstance(key, tuple) and key[0] in NUMBERS_ONLY):
                self.memo.setdefault(key, value)


def _by_column(arrays: Sequence[np.ndarray], dtype: type) -> np.ndarray:
    """(n, m), each column contiguous (Fortran order): keys and scores read whole columns."""
    n = arrays[0].shape[0] if arrays else 0
    out: np.ndarray = np.empty((n, len(arrays)), dtype=dtype, order="F")
    for j, a in enumerate(arrays):
        out[:, j] = a
    return out


def matrices(columns: Sequence[ColumnDomain], table: str) -> Matrix:
    codes = _by_column([c.codes[table] for c in columns], np.int64)
    numeric = [c.numbers[table] for c in columns if c.numbers is not None]
    numbers = _by_column(numeric, np.float64) if numeric else np.zeros((codes.shape[0], 0))
    return Matrix(codes, numbers)


@dataclass(frozen=True)
class Weights:
    """Per column: the agree and disagree weights; per numeric column its tolerance."""

    agree: np.ndarray
    disagree: np.ndarray
    numeric: np.ndarray  # index into the columns of each numeric column
    tolerance: np.ndarray
    collision: np.ndarray


def weights(columns: Sequence[ColumnDomain], original: Matrix, seed: int = 0) -> Weights:
    """Fellegi-Sunter weights from the original's values (u: two random rows agree)."""
    m = len(columns)
    u = np.empty(m)
    for j in range(m):
        codes = original.codes[:, j]
        shown = codes[codes >= 0]
        counts = np.bincount(shown) if shown.size else np.zeros(1)
        p = counts / max(counts.sum(), 1)
        u[j] = float(np.sum(p * p))
    numeric_index = np.array([j for j, c in enumerate(columns) if c.numbers is not None],
                             dtype=np.int64)
    tolerance, agree_near = original.derived(("tolerances", seed),
                                             partial(_tolerances, original.numbers, seed))
    u[numeric_index] = np.maximum(u[numeric_index], agree_near)
    u = np.clip(u, 1e-6, 0.999)
    return Weights(np.log2(M / u), np.log2((1 - M) / (1 - u)), numeric_index, tolerance, u)


def _tolerances(numbers: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per numeric column: its tolerance (the larger of its resolution, the smallest step
    between its values, and 2 % of its 10-90 % spread) and the chance two random rows agree
    within it (a seeded sample of pairs). From the numbers alone: a matrix whose labels were
    learned keeps them (:meth:`Matrix.keep_numbers_from`)."""
    k_all = numbers.shape[1]
    tolerance, near = np.zeros(k_all), np.zeros(k_all)
    rng = np.random.default_rng(seed)
    for k in range(k_all):
        x = numbers[:, k]
        x = x[np.isfinite(x)]
        if x.size < 2:
            continue
        values = unique(x)
        step = float(np.min(np.diff(values))) if values.size > 1 else 0.0
        spread = float(np.subtract(*np.quantile(x, [0.9, 0.1])))
        tolerance[k] = max(step, 0.02 * spread)
        a, b = rng.choice(x, 4000), rng.choice(x, 4000)
        near[k] = float(np.mean(np.abs(a - b) <= tolerance[k]))
    return tolerance, near


def _rank_in(wanted: np.ndarray, keys: np.ndarray, span: int) -> np.ndarray:
    """Per key (in [0, span), or -1), its index in ``wanted`` (sorted distinct keys), -1 where
    it is not there: where the keys span few values, a table of them (one gather instead of a
    hash probe per row; -1 reads the table's last cell, -1); else a hash of ``wanted``, probed
    only by the keys whose low bits some wanted key has (a gather in a bit table first: most
    of an original's keys are no query row's, and a probe costs several gathers)."""
    if span <= 2 * keys.size + 4096:
        table = np.full(span + 1, -1, dtype=np.int64)
        table[wanted] = np.arange(wanted.size)
        at: np.ndarray = table[keys]
        return at
    if keys.size < max(1 << 16, 16 * wanted.size):  # few keys, or most wanted: probe them all
        return np.asarray(pd.Index(wanted).get_indexer(keys), dtype=np.int64)
    mask = (1 << max(16, min(24, int(wanted.size * 32).bit_length()))) - 1
    seen = np.zeros(mask + 1, dtype=bool)
    seen[wanted & mask] = True
    maybe = np.flatnonzero(seen[keys & mask])
    found = np.full(keys.size, -1, dtype=np.int64)
    found[maybe] = pd.Index(wanted).get_indexer(keys[maybe])
    return found


def _pairs_on(key_q: np.ndarray, key_o: np.ndarray, span: int, cap: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """(query row, original row) pairs that share a key (-1: no key), blocks of at most ``cap``
    original rows; the original's keys are looked up among the query's few (:func:`_rank_in`),
    and only the original rows whose key some query row holds are sorted."""
    ok_q = np.flatnonzero(key_q >= 0)
    if ok_q.size == 0 or key_o.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    wanted = unique(key_q[ok_q])
    at = _rank_in(wanted, key_o, span)  # -1 where no query row holds the key
    hit = np.flatnonzero(at >= 0)
    if hit.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = hit[_stable_order(at[hit], wanted.size)]  # by key, rows in order within one
    counts = np.bincount(at[hit], minlength=wanted.size)
    starts = np.cumsum(counts) - counts
    block = np.searchsorted(wanted, key_q[ok_q])
    size = counts[block]
    keep = (size > 0) & (size <= cap)
    q, lo, size = ok_q[keep], starts[block[keep]], size[keep]
    if q.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    rep_q = np.repeat(q, size)
    offsets = np.repeat(lo - np.concatenate(([0], np.cumsum(size)[:-1])), size)
    pos = np.arange(rep_q.size) + offsets
    return rep_q, order[pos]


def _stable_order(values: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of values in [0, bound): in 16 bits when they fit,
    where numpy sorts by radix (linear) instead of merging."""
    if bound <= 1 << 16:
        return np.argsort(values.astype(np.uint16), kind="stable")
    return np.argsort(values, kind="stable")


#: a table's columns, each a 1-d array of codes (views of a matrix's, or bins)
Columns = Sequence[np.ndarray]


def columns(codes: np.ndarray) -> list[np.ndarray]:
    """A matrix's codes as columns (views: each is contiguous in the Fortran-ordered
    matrix)."""
    return [codes[:, j] for j in range(codes.shape[1])]


def binned(m: Matrix, w: Weights, shift: bool) -> list[np.ndarray]:
    """The codes' columns with each numeric column's numbers in bins of four tolerances
    (``shift``: the grid moved by half a bin): two rows within two tolerances share a bin in
    one of the two grids, so that noise does not keep a row from its source's key. The other
    columns are the matrix's own (no copy); each column's bins are made once per matrix."""
    out = columns(m.codes)
    for k, j in enumerate(w.numeric):
        width = 4 * max(float(w.tolerance[k]), 1e-12)
        out[j] = m.derived(("bins", k, shift, width),
                           partial(_bins, m.numbers[:, k], m.codes[:, j], width, shift))
    return out


def _bins(x: np.ndarray, codes: np.ndarray, width: float, shift: bool) -> np.ndarray:
    """Numbers in bins of ``width`` (moved by half a bin with ``shift``); a cell without a
    number keeps its code (missing or suppressed: no key). In an original's matrix a numeric
    column's code is missing exactly where its number is (:mod:`.domain`), so its bins are its
    numbers' alone: a matrix whose labels were learned keeps them."""
    x = x + (width / 2 if shift else 0.0)
    ok = np.isfinite(x) & (codes >= 0)
    return np.where(ok, np.floor(np.where(ok, x, 0) / width), codes).astype(np.int64)


def _holding(col_q: np.ndarray, col_o: np.ndarray) -> np.ndarray | None:
    """The original rows whose code in one column some query row holds, in order; None when
    that is most of them (the column separates little) or its codes span too wide a range for
    a table of them. A row outside cannot share a key that holds this column with any query
    row, so a key's pairs and blocks are the same on these rows alone."""
    held = col_q[col_q >= 0]
    if held.size == 0 or col_o.size == 0:
        return np.empty(0, np.int64)
    low, top = min(int(col_o.min()), 0), int(col_o.max())
    if top - low > 4 * col_o.size + (1 << 16):
        return None
    table = np.zeros(top - low + 1, dtype=bool)  # a code below 0 (missing, wild) holds nothing
    held = held[held <= top]
    table[held - low] = True
    rows = np.flatnonzero(table[col_o - low] if low else table[col_o])
    return rows if 2 * rows.size <= col_o.size else None


class _Subsets:
    """Per leading column of a key, the original rows that may share it with a query row
    (:func:`_holding`), and their codes in each column, gathered once for every key led by
    that column: the keys are then made over those rows alone, not over every original row
    (a release's sample of 20,000 rows against 1M original rows linked through a household
    number: 46,000 rows)."""

    def __init__(self, codes_q: Columns, codes_o: Columns) -> None:
        self.codes_q, self.codes_o = codes_q, codes_o
        self._rows: dict[int, np.ndarray | None] = {}
        self._columns: dict[tuple[int, int], np.ndarray] = {}

    def on(self, lead: int, cols: Sequence[int]) -> tuple[np.ndarray | None, Columns]:
        """The rows (None: all) and the original's columns over them, for a key of ``cols``
        led by ``lead`` (the columns outside ``cols`` are left empty)."""
        if lead not in self._rows:
            self._rows[lead] = _holding(self.codes_q[lead], self.codes_o[lead])
        rows = self._rows[lead]
        if rows is None:
            return None, self.codes_o
        empty = np.empty(0, np.int64)
        out = [empty] * len(self.codes_o)
        for j in cols:
            if (lead, j) not in self._columns:
                self._columns[lead, j] = self.codes_o[j][rows]
            out[j] = self._columns[lead, j]
        return rows, out


def _keys(codes_q: Columns, codes_o: Columns, cols: Sequence[int]
          ) -> tuple[np.ndarray, np.ndarray, int]:
    """Joint keys of the query and original rows on ``cols`` (-1 where a cell is missing or
    suppressed), and their span (every key is below it): each row's codes read as one number
    in mixed radix, the running key made dense (a hash pass) only where the next column would
    overflow it; equal keys, equal cells."""
    n_q, n_o = codes_q[cols[0]].shape[0], codes_o[cols[0]].shape[0]
    key_q = np.zeros(n_q, np.int64)
    key_o = np.zeros(n_o, np.int64)
    gone_q = np.zeros(n_q, bool)
    gone_o = np.zeros(n_o, bool)
    span = 1
    for j in cols:
        a, b = codes_q[j], codes_o[j]
        gone_q |= a < 0
        gone_o |= b < 0
        radix = max(int(a.max(initial=0)), int(b.max(initial=0))) + 1
        if span > _SAFE // radix:
            dense, kinds = pd.factorize(np.concatenate([key_q, key_o]))
            key_q, key_o = dense[:n_q].astype(np.int64), dense[n_q:].astype(np.int64)
            span = max(len(kinds), 1)
        # in place (no array of a million keys made per column); a missing cell's -1 only
        # shifts the key of a row that ends as no key
        for key, c in ((key_q, a), (key_o, b)):
            np.multiply(key, radix, out=key)
            np.add(key, c, out=key)
        span *= radix
    key_q[gone_q] = -1
    key_o[gone_o] = -1
    return key_q, key_o, span


def key_columns(w: Weights, n_original: int, m: int) -> list[list[int]]:
    """The blocking keys: from each column in turn (most informative first), the columns
    after it until a key's value is expected to hold at most :data:`BLOCK` original rows."""
    order = list(np.argsort(w.collision))  # most informative first
    keys: list[list[int]] = []
    for start in range(len(order)):
        cols, expected = [], float(n_original)
        for step in range(len(order)):
            j = int(order[(start + step) % len(order)])
            cols.append(j)
            expected *= float(w.collision[j])
            if expected <= BLOCK:
                break
        key = sorted(cols)
        if key not in keys and len(key) < m:
            keys.append(key)
        if len(keys) >= MAX_KEYS:
            break
    return keys


def candidates(query: Matrix, original: Matrix, w: Weights, rows: np.ndarray,
               fuzzy: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (query row, original row) of the query rows ``rows``, distinct: on
    exact values (the pass on every column and the keys), or, ``fuzzy``, on numbers binned and
    in sorted order (rows whose numbers carry noise)."""
    sub = Matrix(query.codes[rows], query.numbers[rows])
    m = sub.codes.shape[1]
    found_q, found_o = [], []
    numeric = set(int(j) for j in w.numeric)
    if fuzzy:
        grids = [(binned(sub, w, shift), binned(original, w, shift))
                 for shift in (False, True)]
    else:
        grids = [(columns(sub.codes), columns(original.codes))]
    keys = ([list(range(m))] + key_columns(w, original.codes.shape[0], m)) if m else []
    subsets: list[_Subsets] = [_Subsets(codes_q, codes_o) for codes_q, codes_o in grids]
    for i, cols in enumerate(keys):
        if fuzzy and not numeric & set(cols):
            continue  # the same key as the exact pass's
        lead = min(cols, key=lambda j: float(w.collision[j]))  # its most selective column
        for subset in subsets:
            held, codes_o = subset.on(lead, cols)
            kq, ko, span = _keys(subset.codes_q, codes_o, cols)
            q, o = _pairs_on(kq, ko, span, CAP_ALL if i == 0 else CAP)
            found_q.append(q)
            found_o.append(o if held is None else held[o])
    if fuzzy:
        for k in original.derived("sorted columns", partial(_sorted_columns, original)):
            order, x_o = original.derived(("order", k), partial(_order, original.numbers[:, k]))
            x_q = sub.numbers[:, k]  # sorted neighbourhood
            ok_q = np.flatnonzero(np.isfinite(x_q))
            pos = np.searchsorted(x_o, x_q[ok_q])
            for d in range(-WINDOW, WINDOW):
                at = pos + d
                good = (at >= 0) & (at < order.size)
                found_q.append(ok_q[good])
                found_o.append(order[at[good]])
    if not found_q:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    n_o = original.codes.shape[0]
    pair = unique(np.concatenate(found_q).astype(np.int64) * n_o
                  + np.concatenate(found_o).astype(np.int64))
    return rows[pair // n_o], pair % n_o


#: the numeric columns searched in sorted order: the few with the most distinct values
SORTED_COLUMNS = 2


def _order(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows with a finite number in the numbers' order (ties by row), and the numbers
    so sorted."""
    ok = np.flatnonzero(np.isfinite(x))
    order = ok[stable_order(x[ok])]
    return order, x[order]


def _sorted_columns(original: Matrix) -> list[int]:
    counts = [unique(original.numbers[:, k][np.isfinite(original.numbers[:, k])]).size
              for k in range(original.numbers.shape[1])]
    ranked = [k for k in np.argsort(counts)[::-1] if counts[k] >= 50]
    return [int(k) for k in ranked[:SORTED_COLUMNS]]


#: the candidates kept per query row for the assignment (its best)
KEEP = 6


def _row_blocks(q: np.ndarray, s: np.ndarray) -> np.ndarray | None:
    """Where each query row's block of pairs starts, when the pairs are sorted by query row
    and every score is a number; else None (the caller sorts)."""
    if q.size == 0 or not bool(np.all(q[1:] >= q[:-1])) or bool(np.isnan(s).any()):
        return None
    return np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1]


def _best(q: np.ndarray, o: np.ndarray, s: np.ndarray
          ) -> np.ndarray:
    """The indices of each query row's :data:`KEEP` best pairs, by query row, best first
    (equal scores in the pairs' order): ``np.lexsort((-s, q))`` cut at :data:`KEEP` a row.

    The candidates come sorted by query row; each row's best is then taken in :data:`KEEP`
    rounds over the row blocks (a block's highest score, its first pair holding it), with no
    sort of the pairs: a synthetic release's rows have up to 60 candidates each, and the sort
    of 2.7 million pairs was a fifth of the diff of 100,000 rows (0.55 s; the rounds 0.12)."""
    n = q.size
    starts = _row_blocks(q, s)
    if starts is not None:
        block = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
        alive = np.ones(n, dtype=bool)
        picks = np.full((starts.size, KEEP), -1, dtype=np.int64)
        for r in range(KEEP):
            top = np.maximum.reduceat(np.where(alive, s, -np.inf), starts)
            at = np.flatnonzero(alive & (s == top[block]))
            if at.size == 0:
                break
            first = at[np.r_[True, block[at][1:] != block[at][:-1]]]
            picks[block[first], r] = first
            alive[first] = False
        kept = picks.ravel()
        return kept[kept >= 0]
    order = np.lexsort((-s, q))
    qs = q[order]
    start = np.r_[0, np.flatnonzero(qs[1:] != qs[:-1]) + 1]
    rank = np.arange(qs.size) - np.repeat(start, np.diff(np.r_[start, qs.size]))
    return order[rank < KEEP]


def score(query: Matrix, original: Matrix, w: Weights, q: np.ndarray, o: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: the score, the best a pair with these shown cells could get, the columns
    that agree and the columns compared. A pair's column, where both cells are shown, adds
    ``d * agree + (1 - d) * disagree`` (d: 1 for equal labels, 0 for others; for numbers
    1 within the tolerance t, falling to 0 at 4 t: ``clip(1 - max(|x - y| - t, 0) / 3t)``),
    and ``agree`` to the best.

    Written in place, a column at a time (tens of millions of pairs for a synthetic release
    of a million rows: each temporary array is a pass over them)."""
    total = np.zeros(q.size)
    best = np.zeros(q.size)
    agree = np.zeros(q.size, dtype=np.int32)
    compared = np.zeros(q.size, dtype=np.int32)
    numeric = {int(j): k for k, j in enumerate(w.numeric)}
    for j in range(query.codes.shape[1]):
        a = np.take(query.codes[:, j], q)
        b = np.take(original.codes[:, j], o)
        shown = a >= 0
        shown &= b >= 0
        if j in numeric:
            k = numeric[j]
            tol = max(float(w.tolerance[k]), 1e-12)
            degree = np.take(query.numbers[:, k], q)
            degree -= np.take(original.numbers[:, k], o)
            np.abs(degree, out=degree)
            degree -= tol
            np.maximum(degree, 0.0, out=degree)
            degree /= 3 * tol
            np.subtract(1.0, degree, out=degree)
            np.clip(degree, 0.0, 1.0, out=degree)
            degree[~np.isfinite(degree)] = 0.0
            full = degree >= 1.0
            part = degree * w.agree[j]
            np.subtract(1.0, degree, out=degree)
            degree *= w.disagree[j]
            part += degree
        else:
            full = a == b
            part = np.where(full, w.agree[j], w.disagree[j])
        np.add(total, part, out=total, where=shown)
        np.add(best, w.agree[j], out=best, where=shown)
        full &= shown
        agree += full
        compared += shown
    return total, best, agree, compared


#: the largest block of one query row's pairs :func:`_by_row_and_score` ranks by comparing
#: its pairs (two stages' :data:`KEEP` best: 12 at most from :func:`link_each`)
BLOCK_RANKED = 32


def _by_row_and_score(q: np.ndarray, s: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """``np.lexsort((spread, -s, q))``: the pairs by query row, best score first, equal
    scores by ``spread`` (then in their order).

    The pairs come sorted by query row, in blocks of a few: each pair's place in its block
    is the count of the block's pairs before it, found by comparing every pair with the one
    ``d`` places on, for each ``d`` below the largest block (0.65 s for the 7 million pairs
    of a synthetic release of a million rows, where the sort of all of them took 3.9 s).
    Unsorted rows, a larger block or a missing score: the sort itself."""
    n = q.size
    starts = _row_blocks(q, s)
    sizes = np.diff(np.r_[starts, n]) if starts is not None else np.zeros(0, np.int64)
    biggest = int(sizes.max(initial=0))
    if starts is None or biggest > BLOCK_RANKED:
        return np.lexsort((spread, -s, q))
    place = np.zeros(n, dtype=np.int64)
    for d in range(1, biggest):
        same = q[d:] == q[:-d]
        later_first = (s[d:] > s[:-d]) | ((s[d:] == s[:-d]) & (spread[d:] < spread[:-d]))
        later_first &= same
        place[:-d] += later_first
        same &= ~later_first
        place[d:] += same
    index = np.empty(n, dtype=np.int64)
    index[np.repeat(starts, sizes) + place] = np.arange(n)
    return index


def assign(q: np.ndarray, o: np.ndarray, s: np.ndarray, n_query: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """A greedy one-to-one assignment: in rounds, each free query row proposes its best free
    candidate, each original row accepts its best proposal. Equal scores are ordered by a hash
    of the pair, so that rows alike (a block of identical rows) propose to different original
    rows and a round matches most of them. Returns per query row the original row (-1) and
    the index of the pair taken (-1)."""
    taken_o = np.full(n_query, -1, dtype=np.int64)
    taken_pair = np.full(n_query, -1, dtype=np.int64)
    if q.size == 0:
        return taken_o, taken_pair
    spread = ((o.astype(np.uint64) * np.uint64(2654435761)
               + q.astype(np.uint64) * np.uint64(40503)) % np.uint64(1 << 31)).astype(np.int64)
    index = _by_row_and_score(q, s, spread)
    q, o, s, spread = q[index], o[index], s[index], spread[index]
    alive = np.ones(q.size, dtype=bool)
    used = np.zeros(int(o.max()) + 1, dtype=bool)
    for _ in range(ROUNDS):
        live = np.flatnonzero(alive & ~used[o])
        if live.size == 0:
            break
        first = live[np.r_[True, q[live][1:] != q[live][:-1]]]  # each query's best free
        by_o = first[np.lexsort((spread[first], -s[first], o[first]))]
        win = by_o[np.r_[True, o[by_o][1:] != o[by_o][:-1]]]  # each original's best
        taken_o[q[win]] = o[win]
        taken_pair[q[win]] = index[win]
        used[o[win]] = True
        done = np.zeros(n_query, dtype=bool)
        done[q[win]] = True
        alive &= ~done[q]
    return taken_o, taken_pair


def _stage(query: Matrix, original: Matrix, w: Weights, rows: np.ndarray, fuzzy: bool,
           self_of: np.ndarray) -> tuple[np.ndarray, ...]:
    """The candidates of one stage, scored, each query row's :data:`KEEP` best kept; a query
    row never pairs with the original row ``self_of`` names (-1: none)."""
    q, o = candidates(query, original, w, rows, fuzzy)
    keep = self_of[q] != o
    q, o = q[keep], o[keep]
    parts = (q, o, *score(query, original, w, q, o))
    best = _best(parts[0], parts[1], parts[2])
    return tuple(a[best] for a in parts)


def _identical(query: Matrix, original: Matrix, spans: Sequence[tuple[int, int, bool]],
               lead: int, self_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Query rows identical to original rows on every column (none missing or suppressed),
    each paired with a different one of them: a block of identical rows is matched row for
    row (rows alike are interchangeable), so that no greedy round leaves one of them without
    its copy. ``spans``: the query's parts (start, stop, excluding self), each paired on its
    own; one excluding self is the original's rows, each paired with the next identical row
    (a row with no twin is not paired; never with itself, ``self_of``: a sample of the
    original's rows is not every row of a block). The original's keys are read once for
    every part, over the rows that hold a query row's code in the column ``lead``
    (:class:`_Subsets`)."""
    m = query.codes.shape[1]
    if m == 0 or query.codes.shape[0] == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    codes_q = columns(query.codes)
    held, codes_o = _Subsets(codes_q, columns(original.codes)).on(lead, range(m))
    kq, ko, span = _keys(codes_q, codes_o, list(range(m)))
    # the original rows with a key some query row holds, by key and row (the rank of its key
    # among the query's keys orders as the key does)
    wanted = unique(kq[kq >= 0])
    at = _rank_in(wanted, ko, span)
    ok_o = np.flatnonzero(at >= 0)
    local = ok_o[_stable_order(at[ok_o], wanted.size)]
    keys_o = ko[local]
    order_o = local if held is None else held[local]
    found_q, found_o = [], []
    for start, stop, exclude_self in spans:
        ok_q = start + np.flatnonzero(kq[start:stop] >= 0)
        order_q = ok_q[np.lexsort((ok_q, kq[ok_q]))]
        keys_q = kq[order_q]
        if keys_q.size == 0 or keys_o.size == 0:
            continue
        lo = np.searchsorted(keys_o, keys_q, side="left")
        hi = np.searchsorted(keys_o, keys_q, side="right")
        size = hi - lo
        start_q = np.r_[0, np.flatnonzero(keys_q[1:] != keys_q[:-1]) + 1]
        rank = np.arange(keys_q.size) - np.repeat(start_q, np.diff(np.r_[start_q, keys_q.size]))
        if exclude_self:  # the next one of the block (the query rows are original rows here)
            good = size >= 2
            pick = lo + (rank + 1) % np.maximum(size, 1)
            # a sampled row may be that next one itself (its block's rows before it not in
            # the sample): the one after it is another row (the block holds two or more)
            own = good & (order_o[np.minimum(pick, order_o.size - 1)] == self_of[order_q])
            pick[own] = lo[own] + (rank[own] + 2) % size[own]
        else:
            good = rank < size
            pick = lo + rank
        found_q.append(order_q[good])
        found_o.append(order_o[pick[good]])
    if not found_q:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(found_q), np.concatenate(found_o)


@dataclass(frozen=True)
class Query:
    """A table linked to the original: its matrix, the rows linked (default: all) and
    whether it is the original itself (``exclude_self``: a row may not link to itself, what
    chance gives an independent sample of the same people)."""

    matrix: Matrix
    rows: np.ndarray | None = None
    exclude_self: bool = False
    #: per linked row, the codes of these columns taken from another row (``donors``): an
    #: identifier's value is no one's in an independent sample of the same people, yet it
    #: may be someone's when both tables number their rows alike (``P000001``)
    redrawn: tuple[int, ...] = ()
    donors: np.ndarray | None = None

    def codes(self, rows: np.ndarray) -> np.ndarray:
        """The codes of the rows linked (``rows``), the :attr:`redrawn` columns from the
        donors."""
        codes = self.matrix.codes[rows]
        if self.redrawn and self.donors is not None:
            for j in self.redrawn:
                codes[:, j] = self.matrix.codes[self.donors, j]
        return codes


def _stacked(parts: Sequence[np.ndarray], dtype: type, width: int) -> np.ndarray:
    """The parts' rows one after another, each column contiguous (as :func:`_by_column`)."""
    out: np.ndarray = np.empty((sum(p.shape[0] for p in parts), width), dtype=dtype, order="F")
    start = 0
    for p in parts:
        out[start:start + p.shape[0]] = p
        start += p.shape[0]
    return out


def link_each(queries: Sequence[Query], original: Matrix, w: Weights,
              exact_only: bool = False) -> list[Links]:
    """Each query's rows linked to the original (see the module doc), in one pass over the
    original for them all: every step over the original's rows (keys, blocks, bins) runs
    once for the queries' rows stacked, and each query's links are what it gets alone (a
    row's candidates depend on it and the original alone; each query is assigned on its own).

    Rows identical to original rows are paired first (:func:`_identical`). The others get
    candidates on exact values; those whose best candidate agrees on every compared column are
    done, the rest get candidates on binned and sorted numbers too (noise), so that the
    costlier search runs only where it can help; ``exact_only``: never (links that labels are
    learned from, which the release is linked again after)."""
    rows_of = [np.arange(q.matrix.codes.shape[0]) if q.rows is None
               else np.asarray(q.rows, dtype=np.int64) for q in queries]
    m, k = original.codes.shape[1], original.numbers.shape[1]
    stacked = Matrix(_stacked([q.codes(r) for q, r in zip(queries, rows_of)], np.int64, m),
                     _stacked([q.matrix.numbers[r] for q, r in zip(queries, rows_of)],
                              np.float64, k))
    ends = np.cumsum([r.size for r in rows_of])
    spans = [(int(e - r.size), int(e), q.exclude_self)
             for q, r, e in zip(queries, rows_of, ends)]
    # per stacked row, the original row it may not link to (itself, in a query of the
    # original's own rows)
    self_of = np.concatenate([r if q.exclude_self else np.full(r.size, -1, np.int64)
                              for q, r in zip(queries, rows_of)] or [np.empty(0, np.int64)])
    n = stacked.codes.shape[0]
    lead = int(np.argmin(w.collision)) if w.collision.size else 0  # the most selective
    twin_q, twin_o = _identical(stacked, original, spans, lead, self_of)
    paired = np.zeros(n, dtype=bool)
    paired[twin_q] = True
    rest = np.flatnonzero(~paired)
    exact = _stage(stacked, original, w, rest, False, self_of)
    full = np.zeros(n, dtype=bool)
    q, agree, compared = exact[0], exact[4], exact[5]
    full[q[(agree == compared) & (compared > 0)]] = True
    fuzzy = rest[~full[rest]]
    more = _stage(stacked, original, w, fuzzy, True, self_of) \
        if fuzzy.size and w.numeric.size and not exact_only else None
    return [_finish(stacked, original, w, query, rows, span, exact, more, fuzzy, twin_q, twin_o)
            for query, rows, span in zip(queries, rows_of, spans)]


def _part(arrays: Sequence[np.ndarray], start: int, stop: int) -> tuple[np.ndarray, ...]:
    """The pairs (arrays led by the stacked query row) of the stacked rows [start, stop)."""
    inside = (arrays[0] >= start) & (arrays[0] < stop)
    return tuple(a[inside] for a in arrays)


def _finish(stacked: Matrix, original: Matrix, w: Weights, query: Query, rows: np.ndarray,
            span: tuple[int, int, bool], exact: Sequence[np.ndarray],
            more: Sequence[np.ndarray] | None, fuzzy: np.ndarray, twin_q: np.ndarray,
            twin_o: np.ndarray) -> Links:
    """One query's links from the stacked stages: its pairs, its assignment."""
    start, stop, exclude_self = span
    n_query = query.matrix.codes.shape[0]
    twin_s, twin_o = _part((twin_q, twin_o), start, stop)
    q_s, o, s, best, agree, compared = _part(exact, start, stop)
    if more is not None and ((fuzzy >= start) & (fuzzy < stop)).any():
        q_s, o, s, best, agree, compared = (np.concatenate([a, b]) for a, b in zip(
            (q_s, o, s, best, agree, compared), _part(more, start, stop)))
        pair = q_s.astype(np.int64) * original.codes.shape[0] + o
        _, first = np.unique(pair, return_index=True)
        q_s, o, s, best, agree, compared = (a[first] for a in (q_s, o, s, best, agree,
                                                                compared))
    q, twin = rows[q_s - start], rows[twin_s - start]  # the query's own rows
    used = np.zeros(original.codes.shape[0], dtype=bool)
    if not exclude_self:
        used[twin_o] = True
    quality_of = np.where(best > 0, s / np.where(best > 0, best, 1.0), 0.0)
    best_quality = np.full(n_query, -np.inf)
    np.maximum.at(best_quality, q, quality_of)
    best_quality[twin] = 1.0
    free = ~used[o] if not exclude_self else np.ones(o.size, dtype=bool)
    row, pair_taken = assign(q[free], o[free], s[free], n_query)
    index = np.flatnonzero(free)
    out_score = np.full(n_query, -np.inf)
    quality = np.zeros(n_query)
    out_agree = np.zeros(n_query, dtype=np.int32)
    out_compared = np.zeros(n_query, dtype=np.int32)
    has = pair_taken >= 0
    taken = index[pair_taken[has]]
    out_score[has] = s[taken]
    quality[has] = quality_of[taken]
    out_agree[has] = agree[taken]
    out_compared[has] = compared[taken]
    row[twin] = twin_o
    if twin.size:
        full_score, _, full_agree, full_compared = score(stacked, original, w, twin_s, twin_o)
        out_score[twin] = full_score
        quality[twin] = 1.0
        out_agree[twin] = full_agree
        out_compared[twin] = full_compared
    return Links(row, out_score, quality, out_agree, out_compared, best_quality)
