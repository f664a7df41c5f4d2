"""The best-row-match attack (the ALC paper, section 5.2; docs/measures.md 6).

For a target's known columns, over each released table:

* continuous column j: |x - q| / (max_j - min_j), min and max over the released table and the
  query value (a range of 0 becomes 1);
* categorical column: [x != q];
* a missing value on either side, or a known column the released table lacks, is a mismatch
  (distance 1; the paper's rule; the package uses 0.5 for an absent column);
* Gower distance = the mean over the known columns, rounded to 3 decimals as the package does.

All rows at the exact minimum distance are the best matches (released rows whose secret is
missing are not candidates); with several released tables, the tables at the smallest
distance are pooled. Prediction = the modal secret among the matches (ties: the value met
first, in table then row order, as ``Counter.most_common``); rank score (eq. 9)
= round((1 - G_min) * M / C, 3), M the modal count, C the number of matches.

Compiled (numba): per target one pass over a released table's rows, the distance summed in
the same order as the NumPy path (continuous terms from 0.0, then the categorical mismatches),
so the same float64 numbers; a row whose partial sum already exceeds the nearest so far is
left, and the counts per secret value restart whenever a nearer row appears. Rows alike on the
known columns are one candidate: a released table is first grouped by its known values (a
generalized release has a few thousand distinct rows among millions), each group with its
count of every secret value and the first row holding it, and the pass runs over the groups:
the same distances, counts and first rows, as each row of a group is at its group's distance.
Without numba, a
block of targets against all released rows is one (b, m) distance matrix built one column at a
time, and the modal value comes from one bincount over (target, secret code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...compiled import compiled
from ...equivalence import group_rows
from .inputs import CONTINUOUS, ALCData

BLOCK_CELLS = 2_000_000
#: a released table is searched by its groups of rows alike when it has at most this share of
#: its rows' number of them (else row by row: grouping would not pay)
GROUPED_BELOW = 0.5
#: and their (group, secret value) tables hold at most this many cells
GROUP_CELLS = 50_000_000
_NONE = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Predictions:
    """An attack's answer for a block of targets.

    Attributes:
        predicted: the predicted secret code per target, -1 = abstention.
        confidence: the rank score (0 for an abstention).
        distance: the minimum Gower distance (NaN when unknown), for the record.
        matches: the number of best matches (0 when unknown).
    """

    predicted: np.ndarray
    confidence: np.ndarray
    distance: np.ndarray | None = None
    matches: np.ndarray | None = None


@dataclass(frozen=True)
class _Side:
    """The known columns of one table, ready for distances."""

    cont: list[np.ndarray]
    cont_cols: list[str]
    cat: list[np.ndarray]
    cat_cols: list[str]


def _table_side(data: ALCData, table: str, known: Sequence[str]) -> _Side:
    cont_cols = [c for c in known if data.kinds[c] == CONTINUOUS and data.has(table, c)]
    cat_cols = [c for c in known if data.kinds[c] != CONTINUOUS and data.has(table, c)]
    return _Side(cont=[data.values[table][c] for c in cont_cols], cont_cols=cont_cols,
                 cat=[data.codes[table][c] for c in cat_cols], cat_cols=cat_cols)


class BestRowMatch:
    """The best-row-match attack on the released tables of ``data`` (the ALC paper, section 5.2).

    Example:
        >>> brm = BestRowMatch(data, secret="income", known=["age", "sex", "zip"])
        >>> p = brm.predict(np.arange(100))      # the original's rows 0..99 as targets
    """

    def __init__(self, data: ALCData, secret: str, known: Sequence[str],
                 tables: Sequence[str] | None = None, max_cells: int = BLOCK_CELLS,
                 grouped: bool = True) -> None:
        self.data = data
        #: search a table's groups of rows alike (see the module doc); False: row by row
        self.grouped = grouped
        self.secret = secret
        self.known = list(known)
        self.tables = [t for t in (tables or data.released) if data.has(t, secret)
                       and any(data.has(t, c) for c in known)]
        self.max_cells = max_cells
        self.n_classes = len(data.labels[secret])
        self._sides = {}
        self._ranges = {}
        self._secret = {}
        for t in self.tables:
            side = _table_side(data, t, self.known)
            valid = data.codes[t][secret] >= 0
            side = _Side(cont=[v[valid] for v in side.cont], cont_cols=side.cont_cols,
                         cat=[v[valid] for v in side.cat], cat_cols=side.cat_cols)
            self._sides[t] = side
            self._secret[t] = data.codes[t][secret][valid].astype(np.int64)
            with np.errstate(invalid="ignore"):
                self._ranges[t] = [(np.nanmin(v) if np.isfinite(v).any() else np.nan,
                                    np.nanmax(v) if np.isfinite(v).any() else np.nan)
                                   for v in side.cont]
        self._query = _table_side(data, data.original, self.known)
        self._stacks: dict[Any, Any] = {}

    def predict(self, targets: np.ndarray, source: str | None = None) -> Predictions:
        """Predict the secret of the given rows of the original (or of table ``source``)."""
        targets = np.asarray(targets, dtype=np.int64)
        q = self._query if source is None else _table_side(self.data, source, self.known)
        b = len(targets)
        if not self.tables or b == 0:
            return Predictions(np.full(b, -1, np.int64), np.zeros(b), np.full(b, np.nan),
                               np.zeros(b, np.int64))
        m_max = max(len(s) for s in self._secret.values())
        step = max(1, self.max_cells // max(m_max, 1))
        out = [self._block(targets[i:i + step], q) for i in range(0, b, step)]
        return Predictions(*(np.concatenate(x) for x in zip(*out)))

    def _block(self, rows: np.ndarray, q: _Side) -> tuple[np.ndarray, ...]:
        kernel = _compiled()
        if kernel is not None:
            return self._block_compiled(rows, q, kernel)
        b, k = len(rows), len(self.known)
        per_table = []
        for t in self.tables:
            side = self._sides[t]
            m = len(self._secret[t])
            D = np.zeros((b, m))
            for j, col in enumerate(side.cont_cols):
                qv = q.cont[q.cont_cols.index(col)][rows]
                rng = _scale(qv, *self._ranges[t][j])
                d = np.abs(side.cont[j][None, :] - qv[:, None]) / rng[:, None]
                D += np.where(np.isnan(d), 1.0, d)
            for j, col in enumerate(side.cat_cols):
                qc = q.cat[q.cat_cols.index(col)][rows]
                D += (side.cat[j][None, :] != qc[:, None]) | (qc[:, None] < 0)
            dmin = D.min(axis=1) if m else np.full(b, np.inf)
            per_table.append((t, D, dmin, _adjusted(dmin, side, k)))
        best = np.min(np.column_stack([a for *_, a in per_table]), axis=1)
        K = self.n_classes
        counts = np.zeros(b * K, dtype=np.int64)
        first = np.full(b * K, _NONE, dtype=np.int64)
        offset = 0
        for t, D, dmin, adjusted in per_table:
            use = adjusted == best
            hit = (D == dmin[:, None]) & use[:, None]
            r, c = np.nonzero(hit)
            key = r * K + self._secret[t][c]
            counts += np.bincount(key, minlength=b * K)
            uk, idx = np.unique(key, return_index=True)
            first[uk] = np.minimum(first[uk], c[idx] + offset)
            offset += len(self._secret[t])
        return _modal(counts.reshape(b, K), first.reshape(b, K), best)

    def _block_compiled(self, rows: np.ndarray, q: _Side, kernel: Any) -> tuple[np.ndarray, ...]:
        """:meth:`_block` by the compiled kernel: the same numbers, no (b, m) matrix."""
        b, k, K = len(rows), len(self.known), self.n_classes
        counts = np.zeros((b, K), dtype=np.int64)
        first = np.full((b, K), _NONE, dtype=np.int64)
        best = np.full(b, np.inf)
        offset = 0
        for t in self.tables:
            side = self._sides[t]
            m = len(self._secret[t])
            qn = np.empty((b, len(side.cont_cols)))
            scale = np.empty_like(qn)
            for j, col in enumerate(side.cont_cols):
                qn[:, j] = q.cont[q.cont_cols.index(col)][rows]
                scale[:, j] = _scale(qn[:, j], *self._ranges[t][j])
            qc = np.empty((b, len(side.cat_cols)), dtype=np.int64)
            for j, col in enumerate(side.cat_cols):
                qc[:, j] = q.cat[q.cat_cols.index(col)][rows]
            cn, cc = self._stacked(t)
            dmin = np.full(b, np.inf)
            c_t = np.zeros((b, K), dtype=np.int64)
            f_t = np.full((b, K), _NONE, dtype=np.int64)
            groups = self._grouped(t) if m else None
            if groups is not None:
                grouped_kernel = compiled(_nearest_groups)
                assert grouped_kernel is not None  # numba is here: the row kernel is
                grouped_kernel(qn, scale, qc, *groups, dmin, c_t, f_t)
            elif m:
                kernel(qn, scale, qc, cn, cc, self._secret[t], dmin, c_t, f_t)
            adjusted = _adjusted(dmin, side, k)
            nearer = adjusted < best
            counts[nearer] = 0
            first[nearer] = _NONE
            best = np.minimum(best, adjusted)
            use = (adjusted == best)[:, None] & (c_t > 0)
            counts[use] += c_t[use]
            first[use] = np.minimum(first[use], f_t[use] + offset)
            offset += m
        return _modal(counts, first, best)

    def _stacked(self, t: str) -> tuple[np.ndarray, np.ndarray]:
        """Table ``t``'s known columns as (m, p) float64 and (m, q) int64 row-major arrays."""
        if t not in self._stacks:
            side = self._sides[t]
            m = len(self._secret[t])
            cn = (np.column_stack(side.cont).astype(np.float64) if side.cont
                  else np.empty((m, 0)))
            cc = (np.column_stack(side.cat).astype(np.int64) if side.cat
                  else np.empty((m, 0), dtype=np.int64))
            self._stacks[t] = (np.ascontiguousarray(cn), np.ascontiguousarray(cc))
        return self._stacks[t]


    def _grouped(self, t: str) -> tuple[np.ndarray, ...] | None:
        """Table ``t``'s rows grouped by their known values: each group's values (continuous,
        categorical), its count of each secret code and the first row holding each (-1 none);
        None where grouping would not pay."""
        key = ("groups", t)
        if key not in self._stacks:
            self._stacks[key] = _groups(*self._stacked(t), self._secret[t], self.n_classes) \
                if self.grouped else None
        return self._stacks[key]  # type: ignore[return-value]


def _groups(cn: np.ndarray, cc: np.ndarray, secret: np.ndarray, k: int
            ) -> tuple[np.ndarray, ...] | None:
    """The rows of (cn, cc) grouped by their values (a number by its value: -0.0 is 0.0, every
    NaN one value, as the distance reads them), or None when there are too many groups."""
    m = cc.shape[0]
    floats = [pd.factorize(cn[:, j])[0] for j in range(cn.shape[1])]
    ids, g = group_rows(np.column_stack([*floats, cc]) if floats or cc.shape[1] else
                        np.zeros((m, 1), np.int64))
    if g > GROUPED_BELOW * m or g * k > GROUP_CELLS:
        return None
    rows = np.arange(m, dtype=np.int64)
    first_row = np.full(g, m, dtype=np.int64)
    np.minimum.at(first_row, ids, rows)
    cell = ids * k + secret
    counts = np.bincount(cell, minlength=g * k).reshape(g, k)
    first = np.full(g * k, _NONE, dtype=np.int64)
    np.minimum.at(first, cell, rows)
    return (np.ascontiguousarray(cn[first_row]), np.ascontiguousarray(cc[first_row]), counts,
            first.reshape(g, k))


def _scale(qv: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Per target, a continuous column's range over the released table and the target's own
    value (1 where it is 0 or unknown): the divisor of its Gower term."""
    span = np.fmax(qv, hi) - np.fmin(qv, lo)
    return np.where(np.isfinite(span) & (span != 0), span, 1.0)


def _adjusted(dmin: np.ndarray, side: _Side, k: int) -> np.ndarray:
    """The Gower distance of the nearest rows of a table, rounded to 3 decimals over the
    columns it has, each known column it lacks counted as a mismatch (the package's rule)."""
    n = len(side.cont_cols) + len(side.cat_cols)
    return (np.round(dmin / n, 3) * n + (k - n)) / k


def _compiled() -> Any:
    """The compiled kernel, or None without numba (the NumPy path gives the same result)."""
    return compiled(_nearest_secrets)


def _modal(counts2: np.ndarray, first2: np.ndarray, best: np.ndarray
           ) -> tuple[np.ndarray, ...]:
    """Per target the modal secret of its best matches (ties: the value met first) and the rank
    score round((1 - G) M / C, 3); -1 and 0 when no row matched."""
    total = counts2.sum(axis=1)
    top = counts2.max(axis=1)
    # modal value; ties -> the value met first2 (table order, then row order)
    tie_rank = np.where(counts2 == top[:, None], first2, _NONE)
    pred = np.argmin(tie_rank, axis=1).astype(np.int64)
    ok = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.round((1.0 - best) * top / np.maximum(total, 1), 3)
    pred = np.where(ok, pred, -1)
    conf = np.where(ok, conf, 0.0)
    return pred, conf, np.where(ok, best, np.nan), total


def _nearest_secrets(qn: np.ndarray, scale: np.ndarray, qc: np.ndarray, cn: np.ndarray,
                     cc: np.ndarray, secret: np.ndarray, dmin: np.ndarray,
                     counts: np.ndarray, first: np.ndarray) -> None:  # pragma: no cover
    """Per target i: the smallest distance to a row of one released table (``dmin[i]``), and
    over the rows at that distance, the count of each secret code (``counts[i]``) and the first
    such row (``first[i]``). The distance is summed as the NumPy path sums it: from 0.0, each
    continuous term |x - q| / scale (1 when missing), then each categorical mismatch (a missing
    query code mismatches), so equal rows give equal float64 numbers. Every term is >= 0: a row
    whose partial sum exceeds the nearest so far is left."""
    b, p = qn.shape
    m, q = cc.shape
    K = counts.shape[1]
    none = 9223372036854775807  # _NONE: no row yet
    for i in range(b):
        best = np.inf
        for j in range(m):
            d = 0.0
            for c in range(p):
                t = abs(cn[j, c] - qn[i, c]) / scale[i, c]
                d += 1.0 if t != t else t
            if d > best:
                continue
            for c in range(q):
                a = qc[i, c]
                if a < 0 or a != cc[j, c]:
                    d += 1.0
                    if d > best:
                        break
            if d > best:
                continue
            s = secret[j]
            if d < best:
                best = d
                for k in range(K):
                    counts[i, k] = 0
                    first[i, k] = none
            if counts[i, s] == 0:
                first[i, s] = j
            counts[i, s] += 1
        dmin[i] = best


def _nearest_groups(qn: np.ndarray, scale: np.ndarray, qc: np.ndarray, gn: np.ndarray,
                    gc: np.ndarray, gcounts: np.ndarray, gfirst: np.ndarray, dmin: np.ndarray,
                    counts: np.ndarray, first: np.ndarray) -> None:  # pragma: no cover
    """:func:`_nearest_secrets` over groups of rows alike (``gn``, ``gc`` one row per group;
    ``gcounts[g, s]`` its rows with secret ``s``, ``gfirst[g, s]`` the first of them): every
    row of a group is at the group's distance, so the nearest rows' counts are the nearest
    groups' sums, and the first row of a secret value their smallest first row."""
    b, p = qn.shape
    m, q = gc.shape
    K = counts.shape[1]
    none = 9223372036854775807  # _NONE: no row yet
    for i in range(b):
        best = np.inf
        for j in range(m):
            d = 0.0
            for c in range(p):
                t = abs(gn[j, c] - qn[i, c]) / scale[i, c]
                d += 1.0 if t != t else t
            if d > best:
                continue
            for c in range(q):
                a = qc[i, c]
                if a < 0 or a != gc[j, c]:
                    d += 1.0
                    if d > best:
                        break
            if d > best:
                continue
            if d < best:
                best = d
                for k in range(K):
                    counts[i, k] = 0
                    first[i, k] = none
            for k in range(K):
                n = gcounts[j, k]
                if n > 0:
                    counts[i, k] += n
                    if gfirst[j, k] < first[i, k]:
                        first[i, k] = gfirst[j, k]
        dmin[i] = best
