"""Equivalence classes: per-record sample frequency fk and population frequency Fk.

docs/measures.md 3.1 (sdcMicro ``freqCalc``) and 3.2 (NA as wildcard), docs/measures.md 2
(identification table).

* fk: number of sample records sharing the record's quasi-identifier values.
* Fk: population frequency: the sum of sample weights in the class (sdcMicro), the size of the
  matching class of an identification table (ARX's research subset / Protegrity's identification
  data set), or fk when neither is given.

Everything is vectorized over column arrays: classes are found by combining integer codes column
by column and re-factorizing, never by a Python loop over records or classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from .arrays import unique
from .roles import MissingPolicy
from .stats import normal_sf

if TYPE_CHECKING:
    from .data import EncodedTable
from .errors import ConfigError, InputError, where

_INT64_SAFE = np.int64(2**62)


def group_rows(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Group the rows of an integer code matrix.

    Args:
        codes: (n, m) integer codes; negative codes (missing) form their own value.

    Returns:
        (class id per row in 0..u-1, u). Ids follow first occurrence.
    """
    n, m = codes.shape
    if m == 0:
        return np.zeros(n, dtype=np.int64), (1 if n else 0)
    key = codes[:, 0].astype(np.int64) + 1
    card = int(key.max(initial=0)) + 1
    for j in range(1, m):
        col = codes[:, j].astype(np.int64) + 1
        col_card = int(col.max(initial=0)) + 1
        if card > int(_INT64_SAFE) // max(col_card, 1):
            key, card = _first_seen_ids(key, card)  # the classes so far: within int64
        key = key * col_card + col
        card = card * col_card
    return _first_seen_ids(key, card)


def _dense_keys(n: int) -> int:
    """The range of a combined key up to which the classes of ``n`` rows are numbered through
    arrays as long as the range (16 bytes per possible key) rather than a hash table: twice
    the rows (an array much longer than the rows costs more to fill than hashing them)."""
    return max(2 * n, 2**12)


def _first_seen_ids(key: np.ndarray, card: int) -> tuple[np.ndarray, int]:
    """Number the distinct values of ``key`` (non-negative, below ``card``) 0..u-1 in order of
    first occurrence. Where the range is small (:func:`_dense_keys`), each key's first row
    comes from one ``minimum.at`` over an array as long as the range, and the classes are
    ranked by it: the whole grouping 1.6-2.1x faster than through pandas' hash table at a
    million rows of the example's census keys (``bench/equivalence.py``); else
    ``pandas.factorize``, which numbers them the same way. Renumbering the classes column by
    column to stay in that range cost more than it saved (eight adult QIs: 0.10 s against
    0.08)."""
    import pandas as pd

    n = key.size
    if n and card <= _dense_keys(n) and int(key.min()) >= 0:
        first = np.full(card, n, dtype=np.int64)
        np.minimum.at(first, key, np.arange(n, dtype=np.int64))
        present = np.flatnonzero(first < n)
        rank = np.empty(card, dtype=np.int64)
        rank[present[np.argsort(first[present], kind="stable")]] = np.arange(present.size)
        return rank[key], int(present.size)
    ids, uniq = pd.factorize(key, sort=False)
    return ids.astype(np.int64), int(len(uniq))


def exact_matches(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For code matrices ``a`` (n, p) and ``b`` (m, p): which rows of ``a`` equal some row of
    ``b``, and which rows of ``b`` equal some row of ``a`` (missing codes equal each other)."""
    ids, u = group_rows(np.vstack([a, b]))
    in_a = np.zeros(u, dtype=bool)
    in_b = np.zeros(u, dtype=bool)
    in_a[ids[: len(a)]] = True
    in_b[ids[len(a):]] = True
    return in_b[ids[: len(a)]], in_a[ids[len(a):]]


#: a control overlapping the original more than chance by at most this share still passes
CONTROL_OVERLAP_MARGIN = 0.01
#: one-sided significance level of the control-overlap test
CONTROL_OVERLAP_ALPHA = 0.001


@dataclass(frozen=True)
class ControlOverlap:
    """How many control rows equal an original row, against what independent samples give.

    ``expected`` is the share of original rows equal to another original row (leave-one-out:
    a row drawn from the same population as the original meets a copy of itself among the
    original's other rows at that rate, so two disjoint halves of one sample coincide on it).
    ``z`` is the one-sided two-proportion statistic of ``share`` over ``expected``, its
    variance the pooled chance rate's under the null (the two shares equal); the
    overlap is ``excessive`` when the excess is above :data:`CONTROL_OVERLAP_MARGIN` and its
    p-value below :data:`CONTROL_OVERLAP_ALPHA`.
    """

    overlapping: int
    n_control: int
    share: float
    expected: float
    z: float
    p_value: float

    @property
    def excess(self) -> float:
        return self.share - self.expected

    @property
    def excessive(self) -> bool:
        return self.excess > CONTROL_OVERLAP_MARGIN and self.p_value < CONTROL_OVERLAP_ALPHA

    def describe(self, n_columns: int, other: str = "original") -> str:
        row = "an original row" if other == "original" else f"a row of the {other}"
        return (f"{self.overlapping} of {self.n_control} control rows ({self.share:.1%}) equal "
                f"{row} on the {n_columns} shared column(s); independent samples of this "
                f"data coincide on {self.expected:.1%} ({other} rows repeated within it), an "
                f"excess of {self.excess * 100:+.1f} points (z = {self.z:.1f}, one-sided p = "
                f"{self.p_value:.2g}; rejected above {CONTROL_OVERLAP_MARGIN:.0%} with p < "
                f"{CONTROL_OVERLAP_ALPHA:g})")


def control_overlap_test(control_codes: np.ndarray, original_codes: np.ndarray
                         ) -> tuple[ControlOverlap, np.ndarray]:
    """The control-overlap test on two code matrices over the same columns, and the control
    rows that equal an original row."""
    n_c, n_o = len(control_codes), len(original_codes)
    ids, u = group_rows(np.vstack([control_codes, original_codes]))
    in_original = np.zeros(u, dtype=bool)
    in_original[ids[n_c:]] = True
    hits = np.flatnonzero(in_original[ids[:n_c]])
    repeats = np.bincount(ids[n_c:], minlength=u)[ids[n_c:]] >= 2
    share = hits.size / n_c if n_c else 0.0
    expected = float(repeats.mean()) if n_o else 0.0
    # the variance under the null (both shares one chance rate, estimated from both samples
    # pooled), not the control's observed share: one chance match in a one-row control is an
    # observed share of 1 with no variance of its own
    pooled = (hits.size + int(repeats.sum())) / max(n_c + n_o, 1)
    se = np.sqrt(pooled * (1 - pooled) * (1 / max(n_c, 1) + 1 / max(n_o, 1)))
    diff = share - expected
    z = float(diff / se) if se > 0 else (np.inf if diff > 0 else 0.0)
    return (ControlOverlap(int(hits.size), n_c, float(share), expected, z, normal_sf(z)),
            hits)


def count_records(mask: np.ndarray, multiplicity: np.ndarray | None = None) -> int:
    """Records whose row satisfies ``mask`` (each row counts its multiplicity)."""
    if multiplicity is None:
        return int(np.count_nonzero(mask))
    return int(multiplicity[np.asarray(mask, dtype=bool)].sum())


def total_over_records(values: np.ndarray, multiplicity: np.ndarray | None = None) -> float:
    """sum_i v_i over records: sum_r m_r v_r over rows standing for m_r records each."""
    if multiplicity is None:
        return float(np.sum(values))
    return float(np.dot(multiplicity.astype(np.float64), np.asarray(values, dtype=np.float64)))


def record_counts(class_id: np.ndarray, n_classes: int,
                  multiplicity: np.ndarray | None = None) -> np.ndarray:
    """Records per class (float64): a bincount, weighted by the rows' multiplicities."""
    return np.bincount(class_id, weights=multiplicity, minlength=n_classes).astype(np.float64)


def dense_values(codes: np.ndarray, n_categories: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` for codes in -1..n_categories-1 (missing -1),
    by one bincount instead of a sort: the codes present, ascending, and each row's rank
    among them."""
    seen = np.bincount(codes.astype(np.int64) + 1, minlength=n_categories + 1) > 0
    present = np.flatnonzero(seen) - 1
    rank = np.cumsum(seen) - 1
    return present, rank[codes.astype(np.int64) + 1]


def class_value_pairs(class_id: np.ndarray, value: np.ndarray, n_values: int,
                      multiplicity: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class, value) pairs present in the data with their counts, sorted by class then value.

    Args:
        class_id: class per record; value: a non-negative value code per record (< n_values).
        multiplicity: records per row, when rows stand for several records.
    """
    key = class_id.astype(np.int64) * np.int64(n_values) + value.astype(np.int64)
    n_classes = int(class_id.max()) + 1 if class_id.size else 0
    if n_classes * n_values <= max(4 * key.size, 1 << 16):
        # the pairs' space is small: one bincount, already in (class, value) order, no sort
        counts = np.bincount(key, weights=multiplicity, minlength=n_classes * n_values)
        uniq = np.flatnonzero(counts if multiplicity is None
                              else np.bincount(key, minlength=n_classes * n_values))
        return uniq // n_values, uniq % n_values, counts[uniq].astype(np.float64)
    if multiplicity is None:
        uniq, counts = np.unique(key, return_counts=True)
        return uniq // n_values, uniq % n_values, counts.astype(np.float64)
    uniq, inverse = np.unique(key, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=multiplicity, minlength=uniq.size)
    return uniq // n_values, uniq % n_values, counts.astype(np.float64)


class PopulationSource(str, Enum):
    NONE = "none"
    WEIGHTS = "weights"
    TABLE = "identification_table"


@dataclass(frozen=True)
class ClassFrequencies:
    """Per-record and per-class frequencies of one sample.

    Attributes:
        class_id: per record, the id of its exact-key class (0..n_classes-1).
        fk: per record sample frequency (non-integer under the NA wildcard with alpha < 1).
        Fk: per record population frequency.
        class_size: f_j per exact-key class.
        class_population: F_j per exact-key class.
        class_fk: fk per exact-key class (``fk == class_fk[class_id]``; differs from
            ``class_size`` only under the NA wildcard).
        population: where Fk comes from.
        population_classes: |J_pop|, classes of the identification table (or of the sample).
        population_records: N_pop, records of the identification table (or sum of weights / n).
        missing: the missing-value policy used; alpha the wildcard weight.
    """

    class_id: np.ndarray
    fk: np.ndarray
    Fk: np.ndarray
    class_size: np.ndarray
    class_population: np.ndarray
    class_fk: np.ndarray
    population: PopulationSource
    population_classes: int
    population_records: float
    quasi_identifiers: tuple[str, ...]
    missing: MissingPolicy
    alpha: float
    #: records per row when the rows are a table's distinct rows (None: one record per row)
    multiplicity: np.ndarray | None = None

    @property
    def n(self) -> int:
        """The number of records."""
        if self.multiplicity is None:
            return int(self.fk.shape[0])
        return int(self.multiplicity.sum())

    def count(self, mask: np.ndarray) -> int:
        """The number of records whose row satisfies ``mask``."""
        return count_records(mask, self.multiplicity)

    def total(self, values: np.ndarray) -> float:
        """The sum over records of a per-row value."""
        return total_over_records(values, self.multiplicity)

    @property
    def n_classes(self) -> int:
        return int(self.class_size.shape[0])


def frequencies(
    sample: EncodedTable,
    quasi_identifiers: tuple[str, ...] | list[str] | None = None,
    *,
    population: EncodedTable | None = None,
    use_weights: bool = True,
    missing: MissingPolicy | str = MissingPolicy.OWN,
    alpha: float = 1.0,
) -> ClassFrequencies:
    """Compute fk and Fk for every record of ``sample``.

    Args:
        sample: the released (sample) table, encoded.
        quasi_identifiers: key columns; default the roles' quasi-identifiers.
        population: identification table encoded jointly with ``sample``; every sample class must
            occur in it (the sample is a subset of the population by QI values).
        use_weights: take Fk = sum of sample weights when the roles name a weight column.
        missing: ``own`` (missing is its own value) or ``wildcard`` (docs/measures.md 3.2).
        alpha: weight of NA-bearing combinations under the wildcard policy (sdcMicro's alpha).

    Returns:
        ClassFrequencies.
    """
    qis = tuple(quasi_identifiers or sample.roles.quasi_identifiers)
    if not qis:
        raise ConfigError("no quasi-identifiers are configured; name at least one QI column")
    missing = MissingPolicy(missing)
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must lie in [0, 1], got {alpha}")
    codes = sample.codes(qis)
    weights = sample.weights() if use_weights else None
    mult = sample.multiplicity
    class_id, u = group_rows(codes)
    f0 = record_counts(class_id, u, mult)
    n = sample.records

    if population is not None:
        if missing is MissingPolicy.WILDCARD:
            raise ConfigError(
                "the NA wildcard cannot be combined with an identification table; "
                "use missing: own, or drop the identification table"
            )
        if mult is not None or population.multiplicity is not None:
            raise ConfigError(
                "an identification table cannot be used with partitioned tables; give the "
                "release sample weights instead, or gate it on one node")
        pop_codes = population.codes(qis)
        all_ids, _ = group_rows(np.vstack([codes, pop_codes]))
        sample_ids, pop_ids = all_ids[:n], all_ids[n:]
        pop_counts = np.bincount(pop_ids, minlength=int(all_ids.max()) + 1).astype(np.float64)
        # class representative id in the joint grouping for each sample class
        rep = np.empty(u, dtype=np.int64)
        rep[class_id] = sample_ids
        F_class = pop_counts[rep]
        absent = np.flatnonzero(F_class == 0)
        if absent.size:
            first_rows = np.flatnonzero(np.isin(class_id, absent))[:5].tolist()
            raise InputError(
                f"{where(population.name)} lacks {absent.size} of the {u} quasi-identifier "
                f"combinations of {where(sample.name)} (sample rows {first_rows}); the sample "
                "must be a subset of the identification table: check that both use the same "
                "QI columns and codings, or remove the identification table"
            )
        fk_class = f0
        return ClassFrequencies(
            class_id=class_id, fk=fk_class[class_id], Fk=F_class[class_id], class_size=f0,
            class_population=F_class, class_fk=fk_class, population=PopulationSource.TABLE,
            population_classes=int(unique(pop_ids).size), population_records=float(len(pop_ids)),
            quasi_identifiers=qis, missing=missing, alpha=alpha,
        )

    F0: np.ndarray
    if weights is not None:
        F0 = np.bincount(class_id, weights=weights if mult is None else weights * mult,
                         minlength=u)
        source = PopulationSource.WEIGHTS
    else:
        F0 = f0.copy()
        source = PopulationSource.NONE

    if missing is MissingPolicy.WILDCARD and (codes < 0).any():
        rep_row = np.empty(u, dtype=np.int64)
        rep_row[class_id] = np.arange(codes.shape[0])
        combos = codes[rep_row]
        fk_class, Fk_class = _wildcard_counts(combos, f0, F0, alpha, n, float(F0.sum()))
    else:
        fk_class, Fk_class = f0, F0
    pop_records = float(F0.sum())
    return ClassFrequencies(
        class_id=class_id, fk=fk_class[class_id], Fk=Fk_class[class_id], class_size=f0,
        class_population=Fk_class, class_fk=fk_class, population=source, population_classes=u,
        population_records=pop_records, quasi_identifiers=qis, missing=missing, alpha=alpha,
        multiplicity=mult,
    )


def _wildcard_counts(
    combos: np.ndarray, f0: np.ndarray, F0: np.ndarray, alpha: float, n: int, total_w: float
) -> tuple[np.ndarray, np.ndarray]:
    """sdcMicro freqCalc's NA rule (docs/measures.md 3.2) on distinct key combinations.

    Complete c: f(c) = f0(c) + alpha * sum f0(a) over compatible NA-bearing a.
    NA-bearing a: f(a) = f0(a) + sum f0(c) over compatible complete c
                         + alpha * sum f0(a') over compatible NA-bearing a' != a.
    All-NA keys: f = n, F = sum of weights. Two combinations are compatible when equal on every
    variable where both are non-missing.

    Compatibility only depends on the observed variables, so the combinations are processed by
    missing-pattern: within one pattern distinct combinations are never compatible, and for two
    patterns a join on their commonly observed variables gives every compatible pair at once.
    The cost is O(u * p^2) for p distinct missing patterns, never quadratic in the combinations.
    """
    na = combos < 0
    # each row's missing pattern as an id (a bit mask would overflow int64 beyond 63 columns)
    pattern, _ = group_rows(na.astype(np.int32))
    complete = ~na.any(axis=1)
    f = f0.copy()
    F = F0.copy()
    idx_c = np.flatnonzero(complete)
    patterns = [int(p) for p in np.unique(pattern[~complete])]
    members = {p: np.flatnonzero(pattern == p) for p in patterns}

    def observed(p: int) -> np.ndarray:
        return np.flatnonzero(~na[members[p][0]]).astype(np.int64)

    def joint_keys(rows_a: np.ndarray, rows_b: np.ndarray, cols: np.ndarray):
        if cols.size == 0:
            return np.zeros(rows_a.size, np.int64), np.zeros(rows_b.size, np.int64), 1
        ids, k = group_rows(np.vstack([combos[rows_a][:, cols], combos[rows_b][:, cols]]))
        return ids[: rows_a.size], ids[rows_a.size:], k

    for p in patterns:
        rows_a = members[p]
        ka, kc, k = joint_keys(rows_a, idx_c, observed(p))
        # complete -> NA-bearing, full weight; NA-bearing -> complete, alpha
        f[rows_a] += np.bincount(kc, weights=f0[idx_c], minlength=k)[ka]
        F[rows_a] += np.bincount(kc, weights=F0[idx_c], minlength=k)[ka]
        f[idx_c] += alpha * np.bincount(ka, weights=f0[rows_a], minlength=k)[kc]
        F[idx_c] += alpha * np.bincount(ka, weights=F0[rows_a], minlength=k)[kc]
        for q in patterns:
            if q == p:
                continue
            rows_b = members[q]
            common = np.intersect1d(observed(p), observed(q))
            ka2, kb2, k2 = joint_keys(rows_a, rows_b, common)
            f[rows_a] += alpha * np.bincount(kb2, weights=f0[rows_b], minlength=k2)[ka2]
            F[rows_a] += alpha * np.bincount(kb2, weights=F0[rows_b], minlength=k2)[ka2]
    all_na = na.all(axis=1)
    f[all_na] = n
    F[all_na] = total_w
    return f, F
