"""Singling-out attack with random baseline and control (anonymeter 1.1.0; docs/measures.md 5).

Queries are generated on the released table so that each matches exactly one released row; a
query succeeds when it matches exactly one row of the original (main attack) or of the control
table (control attack). Queries are conjunctions of predicates over encoded column arrays
(column, operator, code or number), never strings built from data values.

* Univariate: for every column ``is null`` if it has exactly one null; for numeric columns
  ``<= min`` and ``>= max``; ``== v`` for every value occurring once. Every query of this pool
  that singles out a released row is an attack (anonymeter draws n_attacks of them at random,
  so its rate is this one's with sampling noise: on its adults data the pool holds 35,900,
  and five seeds of 500 draws give means from 0.039 to 0.045 around the pool's 0.041); with
  fewer than n_attacks in the pool, the rates still use n_attacks as denominator, as
  anonymeter's do. Each single-predicate query is counted by a search in the sorted column
  (every query of a column in one vectorized pass).
* Multivariate: a random released row and n_cols random columns; per column ``is null``,
  ``==`` (categorical), ``>= v`` if v is above the column's median else ``<= v`` (numeric).
  Kept if it singles out a released row, until n_attacks or max_attempts.
* Baseline: n_attacks random queries on n_cols random columns (1 in univariate mode), a value
  drawn from the column's released values and a random operator.
* Control-size correction (Cohen & Nissim): the number of queries singling out in subsamples of
  the control table (10 sizes from min(1000, N) to N, 5 repeats) is fitted with
  f(n) = norm ((1 - (n w + 1)(1 - w)^n) / (n + 1)), giving the factor
  f(len(original)) / f(len(control)). anonymeter 1.1.0 fits the same model to the number of
  queries instead of the number that single out (its ``_measure_queries_success`` takes the
  length of the per-query counts), a flat line whose fit gives, up to curve_fit's tolerance,
  (len(control) + 1) / (len(original) + 1) whatever the data. A gate may be stricter than the
  reference, never laxer: the factor applied is the smaller of the two (a smaller control count
  means a higher risk), and the details give both (``control_size_correction_fitted``,
  ``control_size_correction_reference``) and the raw count (``n_control_raw``).
All tables are deduplicated first. Every random step draws from one seeded generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ... import progress
from ...compiled import compiled, warm
from ...errors import ConfigError
from ...results import MeasureResult
from ...roles import Roles
from ...stats import wilson
from ...threads import in_chunks
from ..family import MeasureInputs, Params, compared_columns
from .common import (
    DEFAULT_N_ATTACKS,
    attack_family,
    attack_result,
    check_attack_columns,
    dedup_rows,
    overlap_warning,
)
from .gower import NO_WILDCARD

if TYPE_CHECKING:
    from ...data import EncodedTable


EQ, NE, LT, LE, GT, GE, ISNULL, NOTNULL = range(8)
OP_NAMES = ["==", "!=", "<", "<=", ">", ">=", "is null", "is not null"]
DEFAULT_MAX_ATTEMPTS = 200_000

Predicate = tuple[int, int, float]  # (column index, operator, value: number or code)
Query = tuple[Predicate, ...]


@dataclass(frozen=True)
class _Arrays:
    """One deduplicated table over the attack columns: numbers or codes per column."""

    cols: list[np.ndarray]
    numeric: list[bool]
    n: int
    #: per column the code of a suppressed cell ("any value"), or NO_WILDCARD
    wild: tuple[int, ...] = ()
    #: per categorical column without wildcards: (rows sorted by code, where each code starts)
    postings: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: the compiled counter's inputs, made on first use (column matrix, wildcards, postings)
    postings_meta: dict[str, Any] = field(default_factory=dict)

    def rows_with(self, j: int, code: int) -> np.ndarray | None:
        """The rows whose column ``j`` holds ``code`` (an inverted index built on first use),
        or None where a suppressed cell would match too."""
        if self.numeric[j] or (self.wild and self.wild[j] != NO_WILDCARD):
            return None
        if j not in self.postings:
            x = self.cols[j]
            order = np.argsort(x, kind="stable")
            self.postings[j] = (order, np.searchsorted(x[order], np.arange(-1, x.max(
                initial=-1) + 2)))
        order, starts = self.postings[j]
        c = int(code) + 1
        if not 0 <= c < starts.size - 1:
            return order[:0]
        return order[starts[c]:starts[c + 1]]


def _arrays(table: EncodedTable, columns: Sequence[str],
            wildcards: Mapping[str, int] | None = None) -> _Arrays:
    keep = dedup_rows(table, columns)
    cols, numeric = [], []
    for c in columns:
        col = table.column(c)
        if col.values is not None:
            cols.append(col.values[keep])
            numeric.append(True)
        else:
            cols.append(col.codes[keep].astype(np.int64))
            numeric.append(False)
    wild = tuple(int((wildcards or {}).get(c, NO_WILDCARD)) for c in columns)
    return _Arrays(cols, numeric, int(keep.size), wild)


def _pred_mask(a: _Arrays, pred: Predicate, rows: np.ndarray | None = None) -> np.ndarray:
    """The rows (all, or ``rows``) that satisfy one predicate (NaN compares false)."""
    j, op, v = pred
    x = a.cols[j] if rows is None else a.cols[j][rows]
    missing = np.isnan(x) if a.numeric[j] else x < 0
    if op == ISNULL:
        return missing
    if op == NOTNULL:
        return ~missing
    w = a.wild[j] if a.wild else NO_WILDCARD
    if w != NO_WILDCARD and op in (EQ, NE):  # a suppressed cell matches any value
        if v == w:
            return np.ones(x.shape, dtype=bool)
        return ((x == v) if op == EQ else ((x != v) & ~missing)) | (x == w)
    if op == EQ:
        return x == v
    if op == NE:
        return (x != v) & ~missing
    if op == LT:
        return x < v
    if op == LE:
        return x <= v
    if op == GT:
        return x > v
    return x >= v


def matching_rows(a: _Arrays, query: Query) -> np.ndarray:
    """The rows a query selects, ascending. The equality on a categorical column with the
    fewest rows narrows the search first (an inverted index), so a selective query costs its
    matches, not the table."""
    best: np.ndarray | None = None
    for j, op, v in query:
        if op == EQ:
            rows = a.rows_with(j, int(v))
            if rows is not None and (best is None or rows.size < best.size):
                best = rows
    if best is not None and best.size * 4 < a.n:  # rows of one code are ascending already
        mask = np.ones(best.size, dtype=bool)
        for pred in query:
            mask &= _pred_mask(a, pred, best)
        return best[mask]
    mask = _pred_mask(a, query[0])
    for pred in query[1:]:
        mask &= _pred_mask(a, pred)
    return np.flatnonzero(mask)


def count_matches(a: _Arrays, query: Query) -> int:
    return int(matching_rows(a, query).size)


@dataclass(frozen=True)
class Univariate:
    """Single-predicate queries grouped by column, as arrays (made once, counted often)."""

    n: int
    groups: tuple[tuple[int, np.ndarray, np.ndarray, np.ndarray], ...]

    @classmethod
    def of(cls, queries: Sequence[Query]) -> Univariate:
        by_column: dict[int, list[int]] = {}
        for i, q in enumerate(queries):
            by_column.setdefault(q[0][0], []).append(i)
        groups = []
        for j, idx in by_column.items():
            groups.append((j, np.asarray(idx, dtype=np.int64),
                           np.asarray([queries[i][0][1] for i in idx], dtype=np.int64),
                           np.asarray([queries[i][0][2] for i in idx], dtype=np.float64)))
        return cls(len(queries), tuple(groups))


def univariate_counts(a: _Arrays, queries: Univariate,
                      keep: np.ndarray | None = None) -> np.ndarray:
    """How many rows (of all, or of the rows ``keep`` marks) each single-predicate query
    selects: per column, one sort and a search for every query's value (``==``: the run of
    equal values, plus the suppressed cells; ``<=``, ``>=``: a side of the sorted column;
    ``is null``: the missing cells). What :func:`count_matches` gives, query by query."""
    out = np.zeros(queries.n, dtype=np.int64)
    for j, idx, ops, vals in queries.groups:
        x = a.cols[j] if keep is None else a.cols[j][keep]
        missing = np.isnan(x) if a.numeric[j] else x < 0
        present = np.sort(x[~missing])
        w = a.wild[j] if a.wild else NO_WILDCARD
        n_wild = int(np.count_nonzero(present == w)) if w != NO_WILDCARD else 0
        left = np.searchsorted(present, vals, "left")
        right = np.searchsorted(present, vals, "right")
        # an equality on the suppression token matches every cell (as _pred_mask has it)
        equal = np.where(vals == w, x.size, right - left + n_wild)
        counts = np.select([ops == EQ, ops == LE, ops == GE, ops == ISNULL, ops == NOTNULL],
                           [equal, right, present.size - left, np.count_nonzero(missing),
                            present.size], default=-1)
        for k in np.flatnonzero(counts < 0):  # another operator: the general path
            query = ((j, int(ops[k]), float(vals[k])),)
            rows = matching_rows(a, query)
            counts[k] = rows.size if keep is None else int(np.count_nonzero(keep[rows]))
        out[idx] = counts
    return out


def _univariate_queries(syn: _Arrays, rng: np.random.Generator) -> list[Query]:
    pool: list[Query] = []
    counts: list[int] = []
    for j, x in enumerate(syn.cols):
        missing = np.isnan(x) if syn.numeric[j] else x < 0
        if missing.sum() == 1:
            pool.append(((j, ISNULL, 0.0),))
            counts.append(1)
        present = x[~missing]
        if present.size == 0:
            continue
        if syn.numeric[j]:
            lo, hi = present.min(), present.max()
            pool.append(((j, LE, float(lo)),))
            counts.append(int((present == lo).sum()))
            pool.append(((j, GE, float(hi)),))
            counts.append(int((present == hi).sum()))
        values, n_of = np.unique(present, return_counts=True)
        for v in values[n_of == 1]:
            pool.append(((j, EQ, float(v)),))
            counts.append(1)
    order = rng.permutation(len(pool))
    out: list[Query] = []
    seen: set[Query] = set()
    for i in order:
        if counts[i] == 1 and pool[i] not in seen:
            seen.add(pool[i])
            out.append(pool[i])
    return out


def _compiled() -> Any:
    """The compiled kernel, or None without numba (the NumPy path gives the same result)."""
    return compiled(_count_upto)


def _count_upto(X: np.ndarray, W: np.ndarray, J: np.ndarray, OP: np.ndarray, V: np.ndarray,
                flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, limit: int,
                out: np.ndarray) -> None:  # pragma: no cover (compiled)
    """Per query, the rows (its candidates, or all rows where starts < 0) matching every
    predicate, counted up to ``limit``; X holds one row per column, NaN where missing."""
    k, width = J.shape
    n = X.shape[1]
    for i in range(k):
        count = 0
        total = n if starts[i] < 0 else lengths[i]
        for t in range(total):
            row = t if starts[i] < 0 else flat[starts[i] + t]
            ok = True
            for p in range(width):
                j = J[i, p]
                op = OP[i, p]
                v = V[i, p]
                x = X[j, row]
                missing = np.isnan(x)
                if op == 6:  # ISNULL
                    hit = missing
                elif op == 7:  # NOTNULL
                    hit = not missing
                elif op == 0:  # EQ
                    hit = x == v
                elif op == 1:  # NE
                    hit = (x != v) and not missing
                elif op == 2:
                    hit = x < v
                elif op == 3:
                    hit = x <= v
                elif op == 4:
                    hit = x > v
                else:
                    hit = x >= v
                w = W[j]
                if (op == 0 or op == 1) and not np.isnan(w):  # a suppressed cell: any value
                    hit = True if v == w else (hit or x == w)
                if not hit:
                    ok = False
                    break
            if ok:
                count += 1
                if count >= limit:
                    break
        out[i] = count


def count_queries(a: _Arrays, J: np.ndarray, OP: np.ndarray, V: np.ndarray,
                  limit: int | None = None) -> np.ndarray:
    """How many rows each of k queries selects (capped at ``limit``); query i is the
    conjunction of the predicates (J[i, p], OP[i, p], V[i, p]). The count of
    :func:`count_matches`, from a compiled pass per query over its candidates: the rows of
    its most selective equality on an indexed column (all rows when it has none), stopping
    at ``limit`` matches (a query that singles out no one is dropped at its second match)."""
    kernel = _compiled()
    k, width = J.shape
    cap = np.iinfo(np.int64).max if limit is None else int(limit)
    if kernel is None:
        counts = np.array([count_matches(a, tuple((int(J[i, p]), int(OP[i, p]),
                                                   float(V[i, p])) for p in range(width)))
                           for i in range(k)], dtype=np.int64)
        return np.minimum(counts, cap)
    if "X" not in a.postings_meta:
        X = np.empty((len(a.cols), a.n), dtype=np.float64)
        for j, col in enumerate(a.cols):
            X[j] = col if a.numeric[j] else np.where(col < 0, np.nan, col)
        W = np.array([np.nan if not a.wild or a.wild[j] == NO_WILDCARD else float(a.wild[j])
                      for j in range(len(a.cols))])
        index_cols = [j for j in range(len(a.cols)) if a.rows_with(j, 0) is not None]
        base = np.zeros(len(a.cols), dtype=np.int64)
        offset = 0
        for j in index_cols:
            base[j] = offset
            offset += a.postings[j][0].size
        flat = (np.concatenate([a.postings[j][0] for j in index_cols]) if index_cols
                else np.zeros(0, dtype=np.int64))
        a.postings_meta.update(X=X, W=W, index_cols=index_cols, base=base, flat=flat)
    meta = a.postings_meta
    sizes = np.full((k, width), a.n, dtype=np.int64)
    first = np.full((k, width), -1, dtype=np.int64)
    for j in meta["index_cols"]:
        _, starts = a.postings[j]
        at = (J == j) & (OP == EQ)
        if not at.any():
            continue
        code = V[at].astype(np.int64) + 1
        valid = (code >= 0) & (code < starts.size - 1)
        c = np.clip(code, 0, starts.size - 2)
        sizes[at] = np.where(valid, starts[c + 1] - starts[c], 0)
        first[at] = meta["base"][j] + np.where(valid, starts[c], 0)
    pick = np.argmin(sizes, axis=1)
    rows_k = np.arange(k)
    lengths = sizes[rows_k, pick]
    starts_q = np.where(lengths < a.n, first[rows_k, pick], -1)
    out = np.zeros(k, dtype=np.int64)
    J, OP = np.ascontiguousarray(J, dtype=np.int64), np.ascontiguousarray(OP, dtype=np.int64)
    V = np.ascontiguousarray(V, dtype=np.float64)

    def run(sl: slice) -> None:  # queries in chunks on the budget's threads (nogil kernel)
        kernel(meta["X"], meta["W"], J[sl], OP[sl], V[sl], meta["flat"], starts_q[sl],
               lengths[sl], cap, out[sl])

    in_chunks(k, run, 256)
    return out


#: batches of 1,000 multivariate attempts counted in one pass, at most (the group doubles from
#: one: data that singles out easily draws no more than before)
BATCHES_PER_COUNT = 16


def _multivariate_queries(syn: _Arrays, n_attacks: int, n_cols: int, max_attempts: int,
                          rng: np.random.Generator) -> tuple[list[Query], int]:
    """Queries of ``n_cols`` predicates built from random released rows, kept when they
    single out their row (anonymeter's multivariate generator); drawn 1,000 attempts at a
    time, then taken in order, so the queries and the number of attempts are those of the
    one-by-one search. Batches are counted in groups of up to :data:`BATCHES_PER_COUNT` (one
    compiled pass on the budget's threads instead of a Python round per thousand attempts);
    the generator's state after each batch is kept, and put back after the batch that
    completes the attacks, so the draws that follow are those of the batch-by-batch search."""
    m = len(syn.cols)
    medians = np.array([float(np.nanmedian(x)) if syn.numeric[j] and np.isfinite(x).any()
                        else 0.0 for j, x in enumerate(syn.cols)])
    numeric = np.array(syn.numeric, dtype=bool)
    out: list[Query] = []
    seen: set[bytes] = set()
    attempts = 0
    group = 1
    while len(out) < n_attacks and attempts < max_attempts:
        progress.tick("singling-out queries found", len(out), n_attacks)
        sizes: list[int] = []
        states: list[Mapping[str, Any]] = []
        rows_list, order_list = [], []
        left = max_attempts - attempts
        while len(sizes) < group and left > 0:
            batch = min(1000, left)
            rows_list.append(rng.integers(0, syn.n, size=batch))
            order_list.append(np.argsort(rng.random((batch, m)), axis=1)[:, :n_cols])
            sizes.append(batch)
            states.append(rng.bit_generator.state)
            left -= batch
        rows = np.concatenate(rows_list)
        J = np.sort(np.concatenate(order_list), axis=1).astype(np.int64)
        V = np.zeros(J.shape, dtype=np.float64)
        for j in range(m):
            at = J == j
            if at.any():
                V[at] = syn.cols[j][np.broadcast_to(rows[:, None], J.shape)[at]]
        isnum = numeric[J]
        missing = np.where(isnum, np.isnan(V), V < 0)
        OP = np.where(missing, ISNULL, np.where(isnum, np.where(V > medians[J], GE, LE), EQ))
        V = np.where(missing, 0.0, V) + 0.0  # -0.0 is 0.0, as in a tuple
        counts = count_queries(syn, J, OP, V, limit=2)
        keys = np.concatenate([J, OP, V.view(np.int64)], axis=1)
        hits = np.flatnonzero(counts == 1)
        start = 0
        for b, batch in enumerate(sizes):
            # a query's count is a function of the query: a repeat of one that singled out
            # is the only repeat that could have been kept, so only those are looked at
            taken = batch
            for i in hits[(hits >= start) & (hits < start + batch)].tolist():
                key = keys[i].tobytes()
                if key in seen:
                    continue
                seen.add(key)
                out.append(tuple((int(J[i, p]), int(OP[i, p]), float(V[i, p]))
                                 for p in range(J.shape[1])))
                if len(out) == n_attacks:
                    taken = i - start + 1
                    break
            attempts += taken
            if len(out) == n_attacks:
                rng.bit_generator.state = states[b]  # as if no later batch had been drawn
                break
            start += batch
        group = min(2 * group, BATCHES_PER_COUNT)
    return out, attempts


def _baseline_queries(syn: _Arrays, n_attacks: int, n_cols: int, rng: np.random.Generator
                      ) -> list[Query]:
    m = len(syn.cols)
    uniques = []
    for j, x in enumerate(syn.cols):
        missing = np.isnan(x) if syn.numeric[j] else x < 0
        vals = list(np.unique(x[~missing]).astype(float))
        if missing.any():
            vals.append(None)
        uniques.append(vals)
    queries = []
    for _ in range(n_attacks):
        cs = np.sort(rng.choice(m, size=n_cols, replace=False))
        preds = []
        for j in cs:
            vals = uniques[j]
            v = vals[int(rng.integers(len(vals)))]
            ops = [EQ, NE, GT, LT, GE, LE] if syn.numeric[j] else [EQ, NE]
            op = ops[int(rng.integers(len(ops)))]
            if v is None:
                preds.append((int(j), ISNULL if op == EQ else NOTNULL, 0.0))
            else:
                preds.append((int(j), op, float(v)))
        queries.append(tuple(preds))
    return queries


def _probability_integral(n, w_max):
    """int_0^w n w (1-w)^(n-1) dw = (1 - (n w + 1)(1 - w)^n) / (n + 1)."""
    return (1.0 - (n * w_max + 1.0) * (1.0 - w_max) ** n) / (n + 1.0)


def _model(x, w_eff, norm):
    return norm * _probability_integral(x, w_eff)


def reference_size_correction(n_control: int, n_target: int) -> float:
    """The factor anonymeter 1.1.0 applies: (n_control + 1) / (n_target + 1).

    Its fit sees one flat line (every subsample "succeeds" on every query), which the model
    norm (1 - (n w + 1)(1 - w)^n) / (n + 1) meets with n w >> 1, i.e. norm / (n + 1); the ratio
    is then this, independent of the data (measured against the package: 0.24996 for its adults
    control and original, this formula 0.24969)."""
    return (n_control + 1.0) / (n_target + 1.0)


def _size_correction(control: _Arrays, queries: list[Query], n_target: int,
                     rng: np.random.Generator, grouped: Univariate | None = None
                     ) -> tuple[float, str | None]:
    """f(n_target)/f(len(control)) fitted on control subsamples (docs/measures.md 5), or 1 with a
    reason;
    ``grouped``: the queries, all univariate, grouped by column."""
    from scipy.optimize import curve_fit

    if grouped is not None:  # one search per query and subsample (:func:`univariate_counts`)
        def singled(keep: np.ndarray) -> int:
            return int(np.count_nonzero(univariate_counts(control, grouped, keep) == 1))
    else:  # each query's matching control rows, once: a subsample singles out iff one is kept
        rows = [matching_rows(control, q) for q in queries]
        qid = np.repeat(np.arange(len(rows)), [r.size for r in rows])
        flat = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)

        def singled(keep: np.ndarray) -> int:
            hits = np.bincount(qid, weights=keep[flat], minlength=len(rows))
            return int(np.count_nonzero(hits == 1))
    sizes, successes = [], []
    for n_rows in np.linspace(min(1000, control.n), control.n, 10).astype(int):
        for _ in range(5):
            keep = np.zeros(control.n, dtype=bool)
            keep[rng.choice(control.n, size=n_rows, replace=False)] = True
            successes.append(singled(keep))
            sizes.append(int(n_rows))
    sizes_a, succ_a = np.array(sizes, float), np.array(successes, float)
    if succ_a.max(initial=0) == 0:
        return 1.0, "no query singles out a control subsample: no size correction"
    w0 = 1.0 / sizes_a.max()
    norm0 = 1.0 / _probability_integral(sizes_a.max(), w0)
    try:
        popt, _ = curve_fit(_model, sizes_a, succ_a, p0=(w0, norm0), bounds=(0, (1, np.inf)))
    except (RuntimeError, ValueError) as exc:
        return 1.0, f"control-size correction did not fit ({exc}); counts left uncorrected"
    return float(_model(n_target, *popt) / _model(control.n, *popt)), None


def singling_out(
    original: EncodedTable,
    released: EncodedTable,
    control: EncodedTable | None = None,
    *,
    columns: Sequence[str] | None = None,
    n_attacks: int = DEFAULT_N_ATTACKS,
    n_cols: int = 3,
    mode: str = "multivariate",
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    seed: int = 0,
    wildcards: Mapping[str, int] | None = None,
) -> MeasureResult:
    """Singling-out risk (anonymeter). Returns the ``singling_out`` measure.

    ``wildcards``: column -> code of the release's suppressed cells; a predicate on such a
    value is always true and such a cell satisfies every equality (riskcore.generalization).
    """
    if mode not in ("univariate", "multivariate"):
        raise ConfigError(f"singling-out mode must be univariate or multivariate, got {mode!r}")
    cols = list(columns or original.roles.quasi_identifiers)
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    check_attack_columns(tables, cols, "singling out")
    if n_attacks < 1:
        raise ConfigError("n_attacks must be >= 1")
    n_cols_eff = 1 if mode == "univariate" else int(n_cols)
    if not 1 <= n_cols_eff <= len(cols):
        raise ConfigError(f"n_cols must lie in [1, {len(cols)}] (the attack columns)")
    rng = np.random.default_rng(seed)
    ori, syn = _arrays(original, cols, wildcards), _arrays(released, cols, wildcards)
    ctrl = _arrays(control, cols, wildcards) if control is not None else None
    warnings: list[str] = overlap_warning(original, control, cols)
    univariate = mode == "univariate"
    if univariate:
        queries = _univariate_queries(syn, rng)
        attempts = len(queries)
    else:
        queries, attempts = _multivariate_queries(syn, n_attacks, n_cols_eff, max_attempts, rng)
    if len(queries) < n_attacks:
        warnings.append(f"only {len(queries)} of the {n_attacks} requested singling-out queries "
                        f"could be generated ({attempts} attempts); rates use {n_attacks} as "
                        "denominator, as anonymeter does")
    # the attacks counted: every query made (univariate: the whole pool, when larger)
    n_total = max(n_attacks, len(queries))

    grouped = Univariate.of(queries) if univariate else None

    def singled_out(table: _Arrays, qs: list[Query]) -> int:
        if grouped is not None:
            return int(np.count_nonzero(univariate_counts(table, grouped) == 1))
        return sum(count_matches(table, q) == 1 for q in qs)

    n_success = singled_out(ori, queries)
    base_q = _baseline_queries(syn, n_attacks, n_cols_eff, rng)
    n_base = sum(count_matches(ori, q) == 1 for q in base_q)
    control_rate = None
    n_control = n_control_raw = None
    correction = fitted = reference = None
    if ctrl is not None:
        n_control = n_control_raw = float(singled_out(ctrl, queries))
        if ctrl.n != ori.n:
            fitted, why = _size_correction(ctrl, queries, ori.n, rng, grouped)
            if why:
                warnings.append(why)
            reference = reference_size_correction(ctrl.n, ori.n)
            correction = min(fitted, reference)  # the stricter: never laxer than the reference
            n_control = min(float(n_total), n_control * correction)
        control_rate = wilson(n_control, n_total)
    examples = [" AND ".join(f"{cols[j]} {OP_NAMES[op]}" for j, op, _ in q) for q in queries[:5]]
    return attack_result(
        "singling_out", wilson(n_success, n_total), wilson(n_base, n_attacks), control_rate,
        n_attacks=n_total, n_achieved=len(queries),
        parameters={"mode": mode, "n_cols": n_cols_eff, "columns": cols, "seed": seed,
                    "max_attempts": max_attempts},
        details={"control_size_correction": correction,
                 "control_size_correction_fitted": fitted,
                 "control_size_correction_reference": reference,
                 "control_size_correction_rule": (
                     "the smaller of the Cohen-Nissim fit on control subsamples and anonymeter "
                     "1.1.0's factor (n_control + 1) / (n_original + 1): never laxer than the "
                     "reference"),
                 "n_control_raw": n_control_raw, "attempts": attempts,
                 "deduplicated_rows": {"original": ori.n, "released": syn.n,
                                       "control": None if ctrl is None else ctrl.n},
                 "example_query_shapes": examples},
        warnings=tuple(warnings),
    )


def _start_up() -> None:
    """numba's set-up and the size correction's curve fit (scipy.optimize: 0.25 s)."""
    warm()
    import scipy.optimize  # noqa: F401


class SinglingOutParams(Params):
    """Parameters of ``singling_out``."""

    columns: list[str] | None = Field(None, min_length=1, description="attack columns; "
                                      "default the quasi-identifiers and sensitive columns")
    n_attacks: int = Field(DEFAULT_N_ATTACKS, ge=1)
    n_cols: int = Field(3, ge=1, description="columns per multivariate query")
    mode: Literal["univariate", "multivariate"] = "multivariate"
    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1)
    column_fields = ("columns",)


def attack_columns(params: SinglingOutParams, roles: Roles) -> list[str]:
    return compared_columns(params.columns, roles)


def _check(params: SinglingOutParams, roles: Roles) -> None:
    cols = attack_columns(params, roles)
    if params.mode == "multivariate" and params.n_cols > len(cols):
        raise ConfigError(f"n_cols = {params.n_cols} exceeds the {len(cols)} attack columns")


def _run(inputs: MeasureInputs, params: SinglingOutParams) -> MeasureResult:
    assert inputs.original is not None
    cols = attack_columns(params, inputs.released.roles)
    refused = inputs.domain_check("singling_out", cols)
    if refused is not None:
        return refused
    result = singling_out(inputs.original, inputs.released, inputs.control, columns=cols,
                          n_attacks=params.n_attacks, n_cols=params.n_cols, mode=params.mode,
                          max_attempts=params.max_attempts, seed=inputs.seed,
                          wildcards=inputs.wildcards(cols))
    return inputs.with_alignment(result, cols)


FAMILY = attack_family(
    name="singling_out",
    title="Singling out",
    params=SinglingOutParams,
    run=_run,
    start_up=_start_up,
    check=_check,
    how_to_read=(
        "The share of attempts in which a query built from the release isolates exactly one "
        "original record, corrected by the same attack on records that were not used for the "
        "release (control). The risk is that excess rate; 0 means the release adds nothing an "
        "attacker could not already guess. The interval is 95 %."),
    advice=(
        "Queries built from the release isolate real people: generalize or drop rare values and "
        "outliers, or synthesize with more privacy (fewer near-copies of original rows)."),
)
