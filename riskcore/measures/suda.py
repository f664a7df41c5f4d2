"""SUDA2: minimal sample uniques, SUDA scores and DIS-SUDA (sdcMicro ``suda2``; docs/measures.md
3.6).

A minimal sample unique (MSU) of record r is a set S of key variables such that r is non-missing
on S, no other record has r's values on all of S, and no proper subset of S has that property
(it suffices to check the subsets with one variable removed: uniqueness is monotone).

score(r) = sum over the MSUs S of r of w(|S|), with M key variables (at least 3: sdcMicro pads
with constant columns) and
  * Elliot et al.'s original weights (sdcMicro's default): w(k) = (M - k)!
  * the legacy IHSN weights: w(k) = (2^(M-k) - 1) / C(M, k)  (w(M) = 0).
Per-record contribution of variable j: sum of w(|S|) over the MSUs containing j, divided by
score(r). Attribute contribution: 100 * sum_r w_rj / sum_r score_r.

DIS-SUDA: with f = DisFraction (float32, 0 means 0.5), U full-key sample uniques, P records in
full-key classes of size exactly 2, Q = 1 + (8 - M)/20 and A = sum_{score > 0} score^-Q:
DIS_r = 1 / (1 + P (1 - f) / f / (score_r^Q A)), and 0 when score_r = 0.

Search. Full-key duplicates are merged first (a class of two already kills every MSU, so each
distinct key combination carries a capped count 1 or 2), then the key subsets are searched level
by level (sizes 1, 2, ...) with the support-based pruning of SUDA2 (Manning, Haglin & Keane):
a record unique on S is a singleton on every superset of S, so it leaves the search below S
and no longer takes part in any count there; a subset whose surviving records hold no
full-key unique is dropped with all its supersets. Only surviving records are grouped, on
integer codes, so the work shrinks as the subsets grow. Missing values (code -1, sdcMicro's -999)
are never part of an MSU and never match a present value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from pydantic import Field

from .. import progress
from ..equivalence import group_rows
from ..errors import ConfigError
from ..results import MeasureResult
from ..roles import Roles
from .family import MeasureFamily, MeasureInputs, Params

DEFAULT_DIS_FRACTION = 0.01
DEFAULT_MAX_KEYS = 16
WARN_KEYS = 10
_INT64_SAFE = 2**62


def msu_weights(M: int, original_scores: bool = True) -> np.ndarray:
    """w(k) for k = 0..M: (M-k)! (original) or (2^(M-k) - 1)/C(M, k) (legacy IHSN)."""
    if original_scores:
        return np.array([float(math.factorial(M - k)) for k in range(M + 1)])
    return np.array([(2.0 ** (M - k) - 1.0) / math.comb(M, k) for k in range(M + 1)])


@dataclass(frozen=True)
class SudaScores:
    """Per-record SUDA2 output and the table-level summaries."""

    score: np.ndarray  # (n,) SUDA score
    dis: np.ndarray  # (n,) DIS-SUDA score
    contribution: np.ndarray  # (n, m) share of each variable in the record's score
    msu_counts: np.ndarray  # (n, M+1) number of MSUs of each size
    attribute_contributions: np.ndarray  # (m,) percent
    keys: tuple[str, ...]
    M: int
    U: int
    P: int
    dis_fraction: float
    original_scores: bool
    max_msu_size: int
    subsets_examined: int


def _msu_search(combos: np.ndarray, cards: np.ndarray, cap: np.ndarray, candidate: np.ndarray,
                M: int, kmax: int, w: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """SUDA2's search, level by level over key subsets of size 1..kmax: a combination is an
    MSU on T when it is unique on T and alive on every subset of T (present there and not
    unique on any smaller subset). Returns each combination's score, its per-key raw scores,
    its MSU counts by size, and the number of subsets examined."""
    u, m = combos.shape
    present = combos >= 0
    score_c = np.zeros(u)
    raw_c = np.zeros((u, m))
    msu_c = np.zeros((u, M + 1), dtype=np.int64)
    examined = 0

    # nu[S]: combos alive on S (present on S, non-unique on every subset of S) and non-unique on S
    prev: dict[tuple[int, ...], np.ndarray] = {(): np.ones(u, dtype=bool) if u > 1 else
                                               np.zeros(u, dtype=bool)}
    levels = min(kmax, m)
    for k in range(1, levels + 1):
        progress.tick("SUDA2 key-subset sizes", k - 1, levels)
        cur: dict[tuple[int, ...], np.ndarray] = {}
        for T in combinations(range(m), k):
            alive = None
            skip = False
            for j in T:
                sub = prev.get(tuple(x for x in T if x != j))
                if sub is None:
                    skip = True
                    break
                alive = sub.copy() if alive is None else np.logical_and(alive, sub, out=alive)
            if skip:
                continue
            assert alive is not None
            if k == 1:
                alive &= present[:, T[0]]
            if not (alive & candidate).any():
                continue
            examined += 1
            idx = np.flatnonzero(alive)
            sizes = _class_weight(combos[idx][:, T], cards[list(T)], cap[idx])
            hit = idx[sizes == 1.0]
            if hit.size:
                score_c[hit] += w[k]
                raw_c[np.ix_(hit, T)] += w[k]
                msu_c[hit, k] += 1
                alive[hit] = False
            cur[T] = alive
        prev = cur
        if not prev:
            break
    return score_c, raw_c, msu_c, examined


def suda2(
    codes: np.ndarray,
    keys: tuple[str, ...] | list[str] | None = None,
    *,
    original_scores: bool = True,
    dis_fraction: float = DEFAULT_DIS_FRACTION,
    max_msu_size: int | None = None,
) -> SudaScores:
    """Minimal sample uniques of every record, SUDA scores and DIS-SUDA (docs/measures.md 3.6).

    Args:
        codes: (n, m) integer codes of the key variables, -1 where missing.
        keys: names of the m key variables (for the contributions).
        original_scores: Elliot's weights (True, sdcMicro's default) or the legacy IHSN ones.
        dis_fraction: the sampling fraction used by DIS-SUDA (sdcMicro's ``DisFraction``).
        max_msu_size: search MSUs up to this size only (default: all sizes, as sdcMicro).

    Returns:
        SudaScores.
    """
    codes = np.asarray(codes)
    n, m = codes.shape
    keys = tuple(keys) if keys is not None else tuple(f"key{j}" for j in range(m))
    if len(keys) != m:
        raise ValueError("one name per key column is needed")
    if m == 0 or n == 0:
        raise ConfigError("SUDA2 needs at least one key variable and one record")
    M = max(m, 3)
    kmax = M if max_msu_size is None else int(max_msu_size)
    if kmax < 1:
        raise ConfigError(f"max_msu_size must be >= 1, got {max_msu_size}")
    w = msu_weights(M, original_scores)

    # 1. merge identical full keys (missing is a value here); counts capped at 2
    cid, u = group_rows(codes)
    count = np.bincount(cid, minlength=u)
    rep = np.empty(u, dtype=np.int64)
    rep[cid] = np.arange(n)
    combos = codes[rep].astype(np.int64)
    cap = np.minimum(count, 2).astype(np.float64)
    cards = combos.max(axis=0, initial=-1) + 1

    score_c, raw_c, msu_c, examined = _msu_search(combos, cards, cap, count == 1, M, kmax, w)

    # 2. back to records (duplicated keys have no MSU)
    score = score_c[cid]
    raw = raw_c[cid]
    msu_counts = msu_c[cid]
    with np.errstate(invalid="ignore", divide="ignore"):
        contribution = np.where(score[:, None] > 0, raw / score[:, None], 0.0)
    total = score.sum()
    attr = 100.0 * raw.sum(axis=0) / total if total > 0 else np.zeros(m)

    U = int(np.count_nonzero(count == 1))
    P = int(2 * np.count_nonzero(count == 2))
    dis = dis_suda(score, U, P, M, dis_fraction)
    return SudaScores(score=score, dis=dis, contribution=contribution, msu_counts=msu_counts,
                      attribute_contributions=attr, keys=keys, M=M, U=U, P=P,
                      dis_fraction=dis_fraction, original_scores=original_scores,
                      max_msu_size=kmax, subsets_examined=examined)


def _class_weight(sub: np.ndarray, cards: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """For each row of ``sub`` (non-negative codes), the capped size of its class."""
    n, k = sub.shape
    key = sub[:, 0].copy()
    radix = int(cards[0])
    for j in range(1, k):
        c = int(cards[j])
        if radix * c >= _INT64_SAFE:
            import pandas as pd

            ids, uniq = pd.factorize(key, sort=False)
            key = ids.astype(np.int64)
            radix = len(uniq)
        key = key * c + sub[:, j]
        radix *= c
    if radix <= 4 * n + 1024:
        ids = key
        size = radix
    else:
        import pandas as pd

        ids, uniq = pd.factorize(key, sort=False)
        size = len(uniq)
    sums = np.bincount(ids, weights=cap, minlength=size)
    return sums[ids]


def dis_suda(score: np.ndarray, U: int, P: int, M: int,
             dis_fraction: float = DEFAULT_DIS_FRACTION) -> np.ndarray:
    """DIS-SUDA per record (docs/measures.md 3.6): 1 / (1 + P(1-f)/f / (score^Q * A)), 0 where
    score = 0."""
    f = float(np.float32(dis_fraction))
    if f == 0.0:
        f = 0.5
    if not 0.0 < f < 1.0:
        raise ConfigError(f"dis_fraction must lie in (0, 1), got {dis_fraction}")
    Q = 1.0 + (8.0 - M) / 20.0
    pos = score > 0
    out = np.zeros_like(score, dtype=np.float64)
    if not pos.any():
        return out
    sq = score[pos] ** Q
    A = float(np.sum(1.0 / sq))
    out[pos] = 1.0 / (1.0 + P * (1.0 - f) / f / (sq * A))
    return out


def attribute_level_contributions(scores: SudaScores, codes: np.ndarray,
                                  categories: list[np.ndarray]) -> list[dict[str, object]]:
    """Per variable and value: percent of the variable's contribution from records with that value.

    100 * sum_{r: x_rj = v} w_rj / sum_r w_rj, where w_rj = contribution_rj * score_r.
    """
    out: list[dict[str, object]] = []
    raw = scores.contribution * scores.score[:, None]
    for j, name in enumerate(scores.keys):
        col = codes[:, j]
        ok = col >= 0
        sums = np.bincount(col[ok], weights=raw[ok, j], minlength=len(categories[j]))
        total = raw[:, j].sum()
        for code in np.flatnonzero(sums > 0):
            out.append({"variable": name, "value": _label(categories[j][code]),
                        "contribution": 100.0 * float(sums[code]) / total})
    return out


def _label(value: object) -> object:
    if isinstance(value, (np.floating, float)) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def suda_result(scores: SudaScores, level_contributions: list[dict[str, object]],
                warnings: tuple[str, ...] = ()) -> MeasureResult:
    """Wrap SUDA2 scores as the ``suda`` measure: figures, per-record arrays, contributions."""
    score, dis = scores.score, scores.dis
    n = score.size
    at_risk = int(np.count_nonzero(score > 0))
    figures: dict[str, float | int | None] = {
        "suda_sum": float(score.sum()), "suda_max": float(score.max()),
        "dis_sum": float(dis.sum()), "dis_max": float(dis.max()), "dis_mean": float(dis.mean()),
        "records_with_msu": at_risk, "records_with_msu_share": at_risk / n,
    }
    per_record: dict[str, np.ndarray] = {"suda_score": score, "dis_score": dis}
    for j, name in enumerate(scores.keys):
        per_record[f"contribution_{name}"] = scores.contribution[:, j]
    sizes = {str(k): int(scores.msu_counts[:, k].sum()) for k in range(1, scores.M + 1)
             if scores.msu_counts[:, k].any()}
    return MeasureResult(
        measure="suda",
        figures=figures,
        parameters={"keys": list(scores.keys), "original_scores": scores.original_scores,
                    "dis_fraction": scores.dis_fraction, "max_msu_size": scores.max_msu_size,
                    "M": scores.M},
        per_record=per_record,
        details={
            "attribute_contributions": {k: float(v) for k, v in
                                        zip(scores.keys, scores.attribute_contributions)},
            "attribute_level_contributions": level_contributions,
            "msu_count_by_size": sizes,
            "full_key_uniques": scores.U, "records_in_pairs": scores.P,
            "subsets_examined": scores.subsets_examined,
        },
        warnings=warnings,
    )


FIGURES = ("suda_sum", "suda_max", "dis_sum", "dis_max", "dis_mean", "records_with_msu",
           "records_with_msu_share")


class SudaParams(Params):
    """Parameters of ``suda`` (sdcMicro's ``suda2``)."""

    keys: list[str] | None = Field(None, min_length=1,
                                   description="key variables; default the quasi-identifiers")
    original_scores: bool = Field(True, description="Elliot's (M-k)! weights; false: IHSN")
    dis_fraction: float = Field(DEFAULT_DIS_FRACTION, gt=0.0, lt=1.0,
                                description="DIS-SUDA sampling fraction")
    max_msu_size: int | None = Field(None, ge=1, description="largest MSU size searched")
    max_keys: int = Field(DEFAULT_MAX_KEYS, ge=1,
                          description="refuse more keys than this without max_msu_size")
    column_fields = ("keys",)


def _keys(params: SudaParams, roles: Roles) -> list[str]:
    return list(params.keys or roles.quasi_identifiers)


def _subsets(n_keys: int, max_msu: int | None) -> int:
    return sum(math.comb(n_keys, k) for k in range(1, (max_msu or n_keys) + 1))


def _check(params: SudaParams, roles: Roles) -> None:
    keys = _keys(params, roles)
    if len(keys) > params.max_keys and params.max_msu_size is None:
        raise ConfigError(
            f"SUDA2 over {len(keys)} keys may examine up to {_subsets(len(keys), None):,} key "
            f"subsets (limit max_keys = {params.max_keys}); set suda.max_msu_size (e.g. 5) to "
            "cap the MSU size, or raise suda.max_keys if the cost is acceptable")


def _run(inputs: MeasureInputs, params: SudaParams) -> MeasureResult:
    table = inputs.released
    keys = tuple(_keys(params, table.roles))
    _check(params, table.roles)
    warnings = []
    if len(keys) > WARN_KEYS:
        warnings.append(f"SUDA2 over {len(keys)} keys: up to "
                        f"{_subsets(len(keys), params.max_msu_size):,} key subsets are "
                        "examined; expect a long run on large tables")
    for k in keys:
        col = table.column(k)
        if col.values is not None:
            vals = col.values[~np.isnan(col.values)]
            if vals.size and not np.all(vals == np.round(vals)):
                warnings.append(
                    f"key '{k}' has non-integer values: sdcMicro truncates them to integers "
                    "before SUDA2, riskgate keeps every distinct value as its own category")
    codes = table.codes(keys)
    scores = suda2(codes, keys, original_scores=params.original_scores,
                   dis_fraction=params.dis_fraction, max_msu_size=params.max_msu_size)
    # values of a sensitive attribute or direct identifier used as a key never reach the
    # outputs: their levels are named by code ("value#3"), as the inference attack does
    hidden = set(table.roles.sensitive) | set(table.roles.direct_identifiers)
    labels = [table.column(k).categories if k not in hidden else
              np.array([f"value#{i}" for i in range(table.column(k).n_categories)], dtype=object)
              for k in keys]
    levels = attribute_level_contributions(scores, codes, labels)
    return suda_result(scores, levels, tuple(warnings))


FAMILY = MeasureFamily(
    name="suda",
    title="SUDA2 and DIS-SUDA",
    section="sdc",
    params=SudaParams,
    run=_run,
    figures=lambda p, roles: {k: True for k in FIGURES},
    check=_check,
    how_to_read=(
        "SUDA2 finds minimal sample uniques: the smallest sets of quasi-identifier values that "
        "only one record has. A record with small such sets is easy to single out; DIS-SUDA "
        "turns the scores into a probability, and the per-variable contributions show which "
        "variables make records unique (the ones to generalize first)."),
    advice=(
        "Generalize the variables with the largest SUDA contributions first (see the "
        "contributions plot), or suppress values in the records with the highest scores."),
    scale="whole",
)
