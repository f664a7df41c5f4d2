"""Membership inference: does the release reveal who was in the original?

An attacker holds a target record and the release, and asks whether the target was among the
records the release was made from. The copies family catches verbatim rows; a synthetic
release can reveal membership without any, by sitting *near* its training rows (rows copied
with small noise). None of the source documents measures it (anonymeter leaves it out on
purpose); this family follows the synthetic-data literature.

**Targets.** Members: every original row; non-members: every control row (above
:data:`MAX_TARGETS` of either, a seeded sample of that many, said in a warning: the intervals
then carry the sampling). A seeded part of the control (``reference_size`` rows, at most half
of it) is the attacker's *reference* sample of the population for the two attacks that need
one (``calibrated``, ``density``): their non-members are the control rows outside it, so that
a reference row is never a target. The release is searched whole (or in a seeded sample of
``released_size`` rows when one is given), by
:func:`riskcore.measures.attacks.gower.nearest_distance`, which prunes by the categorical
codes and boxes around the numbers of groups of rows (exact). Every
distance is the attacks' Gower distance
(:mod:`riskcore.measures.attacks.gower`) over the compared columns divided by their number,
with each number first replaced by its quantile in the release (:func:`quantile_columns`): under
Gower's range scaling a heavy-tailed column hides its near copies (on bench/membership.py's 1M
rows, where income is log-normal, the distance attack's AUC was 0.485 and GAN-Leaks' on
standardized columns 0.543). Columns are read as an attacker reads them: integer codes (a zip,
a region) as categories (:mod:`riskcore.anatomy.reading`), and a column whose reading is split
both ways (the family runs twice, the worse kept: :func:`riskcore.measures.run_measure`).

**Attacks** (a score per target, higher = "member"):

* ``distance``: s(x) = -d(x, R), the distance to the closest released record (Hilprecht et
  al. 2019; Chen et al. 2020, GAN-Leaks, the full black-box attack), numbers as their
  quantiles in the release;
* ``distance_std``: the same on one-hot categories and standardized numbers (each number's
  z-score in the release; a category mismatch counts as one-hot encoding's L1 distance, 2,
  against a z difference): the plain nearest-neighbour attack most audits run. Which scaling
  is stronger depends on the data (on bench/membership.py's leaky release the standardized
  one finds more members at 1 % false positives): both run, and the worst case is reported;
* ``distance_l2``: the plain one-nearest-neighbour attack as a few lines of scikit-learn
  write it: Euclidean distance over one-hot categories and standardized numbers (a category
  mismatch adds 2 to the squared distance, a number its squared z difference);
* ``calibrated``: s(x) = d(x, P) - d(x, R), the same calibrated by the target's distance to
  the reference sample P (Chen et al. 2020, calibrated attack): a target close to the release
  only because it lies in a dense region is close to the population too;
* ``density``: s(x) = log p_R(x) / p_P(x), the release's density over the population's
  (van Breugel et al. 2023, DOMIAS). The ratio is estimated by a classifier that tells
  released rows from reference rows (gradient boosting on the encoded columns, on seeded
  samples of equal size, at most ``reference_size`` each): its log-odds
  is log p_R/p_P up to a constant (the density-ratio trick).
  Why a classifier: it runs on CPU in seconds at 1M rows within the thread budget, handles
  categorical and numeric columns and missing values as they are, and needs no bandwidth or
  neural density estimator (DOMIAS's BNAF needs a GPU to be practical);
* ``*_qi``: the three attacks for a partly informed attacker who knows the
  quasi-identifiers only (when they are fewer than the compared columns).

**Figures** per attack a (``<a>.auc`` ...) and, unprefixed, the worst case over the attacks,
each figure its own maximum (the attack that gave it named in ``details.worst``: a gate may be
stricter than a simple attack, never laxer): ``auc`` = P(s(member) > s(non-member)) + P(=)/2,
with DeLong's interval (DeLong et al. 1988, fast midrank form of Sun & Xu 2014; the worst
attack's interval is Bonferroni-widened over the attacks run, since it is the maximum of
several); ``tpr_at_fpr_1pct`` and ``tpr_at_fpr_01pct``, the largest true-positive rate at a
false-positive rate of at most 1 % and 0.1 % over the empirical ROC (Carlini et al. 2022, the
low false-positive regime where a few members are exposed with confidence); ``advantage`` =
max over thresholds of TPR - FPR (Yeom et al. 2018). 0.5, 0 and 0 mean no membership signal.
Each TPR carries its Clopper-Pearson interval at the threshold that gives it
(``tpr_at_fpr_1pct_low`` / ``_high``, the worst attack's), and the number of non-members behind
it: at 0.1 % false positives, fewer than 1,000 non-members mean the threshold sits on the
single highest-scored non-members, and the report says so (``details.low_fpr``).

**An empirical lower bound on epsilon** (a privacy audit: Jagielski, Ullman & Oprea 2020;
Nasr et al. 2023). For any (epsilon, delta)-differentially private mechanism every test of
membership has TPR <= e^epsilon FPR + delta and 1 - FPR <= e^epsilon (1 - TPR) + delta, so
epsilon >= max(ln((TPR - delta) / FPR), ln((1 - FPR - delta) / (1 - TPR))). Members and
non-members are split in two seeded halves; on the first, every attack is tried at the
thresholds where its non-members' false-positive rate is 0.1 % ... 50 % (and its members'
false-negative rate the same), and the (attack, threshold) with the largest bound is chosen;
on the second half alone, TPR is replaced by its one-sided Clopper-Pearson lower bound and FPR
by its upper bound, each at level 1 - (1 - confidence) / 2, so that the pair holds at
``confidence`` (95 %): ``epsilon_low``, 0 when no threshold gives a positive bound. Choosing on
one half and counting on the other keeps the choice from inflating the bound (no correction
for the many thresholds tried is then needed). ``delta`` defaults to 1e-5, below 1/n for the
releases a gate sees and the value most DP synthetic-data generators are run with; set it to
the claim's delta. ``epsilon_point`` is the ratio itself at that threshold (the same form,
without the intervals). It is a lower bound: it can refute a claim (``claimed_epsilon``: a
bound above it fails the gate, ``epsilon_excess`` = bound - claim), never certify one; and it
means something only when the control is a random holdout of the original's population.
Per record: each attacked original row's score (and each non-member's), by row number and
attack, goes to ``membership_scores.parquet``: ``per_record.parquet`` is keyed by the
release's rows, and a synthetic release's rows are not the original's.

Without a control table the answer is "insufficient evidence" with the reason, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field

from .. import progress
from ..compiled import warm
from ..results import MeasureResult, Status
from ..roles import Roles
from ..stats import z_score
from ..threads import model_rows, start_models
from .attacks.common import check_attack_columns
from .attacks.gower import MixedMatrix, nearest_distance, nearest_distances, prepare
from .family import MeasureFamily, MeasureInputs, Params, compared_columns

#: members and non-members attacked, each: every row up to this many, a seeded sample above
MAX_TARGETS = 50_000
DEFAULT_REFERENCE = 20_000
MIN_TARGETS = 20
#: a TPR at a false-positive rate counted on fewer non-members than this is marked
MIN_NEGATIVES = 1_000
Attack = Literal["distance", "distance_std", "distance_l2", "calibrated", "density"]
ATTACKS: tuple[Attack, ...] = ("distance", "distance_std", "distance_l2", "calibrated",
                               "density")
#: the attacks that need the reference sample (their non-members are the control outside it)
REFERENCED = ("calibrated", "density")
#: the figures reported as the worst case over the attacks
WORST = ("auc", "tpr_at_fpr_1pct", "tpr_at_fpr_01pct", "advantage")
#: the epsilon audit's figures
EPSILON_FIGURES = ("epsilon_low", "epsilon_point", "epsilon_excess")
#: the false-positive (and false-negative) rates the audit's thresholds are tried at
EPSILON_GRID = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
DEFAULT_DELTA = 1e-5
PER_ATTACK = ("auc", "auc_low", "auc_high", "tpr_at_fpr_1pct", "tpr_at_fpr_01pct",
              "advantage")
#: the worst attack's TPR intervals
TPR_INTERVALS = ("tpr_at_fpr_1pct_low", "tpr_at_fpr_1pct_high", "tpr_at_fpr_01pct_low",
                 "tpr_at_fpr_01pct_high")
ALARM_AUC = 0.75
#: the targets' scores, written as ``membership_scores.parquet``: ``table`` (0 original, 1
#: control), ``row`` (the row number in that table), ``member``, ``score`` (the strongest
#: attack's) and ``score.<attack>``
RECORDS = "membership_scores"


#: the largest epsilon a claim may state: beyond it the claim bounds nothing observable, and
#: e**epsilon overflows
MAX_CLAIMED_EPSILON = 100.0


class MembershipParams(Params):
    """Parameters of ``membership``."""

    columns: list[str] | None = Field(
        None, description="columns the attacker compares (default: quasi-identifiers and "
                          "sensitive)")
    n_targets: int = Field(MAX_TARGETS, ge=MIN_TARGETS,
                           description="members and non-members attacked, each: every row up "
                                       "to this many, a seeded sample above")
    reference_size: int = Field(DEFAULT_REFERENCE, ge=100,
                                description="control rows of the reference sample, and "
                                            "released rows the density model learns from "
                                            "(seeded)")
    released_size: int | None = Field(
        None, ge=100, description="released rows searched for the closest one (seeded "
                                  "sample); default: the whole release")
    attacks: list[Attack] = Field(
        list(ATTACKS), min_length=1, description="the attacks run")
    partly_informed: bool = Field(True, description="also attack with the quasi-identifiers "
                                                    "only")
    confidence: float = Field(0.95, gt=0, lt=1, description="level of the AUC's interval "
                              "and of the epsilon bound")
    delta: float = Field(DEFAULT_DELTA, ge=0, lt=0.5, description="the delta of the "
                         "(epsilon, delta) the audit bounds (set it to the claim's)")
    claimed_epsilon: float | None = Field(
        None, ge=0, le=MAX_CLAIMED_EPSILON,
        description="the epsilon the release is said to be differentially private at: a "
                    "measured lower bound above it fails the gate (at most 100: e^100 bounds "
                    "no likelihood ratio a test could ever observe)")
    column_fields = ("columns",)


# ---------------------------------------------------------------- ROC figures
@dataclass(frozen=True)
class _Sorted:
    """Members' and non-members' scores sorted together once (ascending, members first among
    equals), with what AUC, its interval and the ROC read from it."""

    scores: np.ndarray  # every score, ascending
    is_pos: np.ndarray  # the sorted scores' owner: a member or not
    starts: np.ndarray  # the first position of each run of equal scores
    mid_all: np.ndarray  # each score's midrank among all, in the scores' given order
    mid_own: np.ndarray  # ... and among its own side (members or non-members)

    @classmethod
    def of(cls, pos: np.ndarray, neg: np.ndarray) -> _Sorted:
        scores = np.concatenate([pos, neg])
        is_pos = np.r_[np.ones(len(pos), dtype=bool), np.zeros(len(neg), dtype=bool)]
        order = np.argsort(scores, kind="mergesort")  # stable: members first among equals
        s, p = scores[order], is_pos[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        ends = np.r_[starts[1:], len(s)]
        run = np.repeat(np.arange(len(starts)), ends - starts)
        mid_all = ((starts + ends + 1) / 2.0)[run]
        # a side's ranks in a run of equal scores are consecutive: their midrank is the
        # mean of the run's first and last rank on that side
        mid_own = np.empty(len(s))
        for side in (p, ~p):
            before = np.r_[0, np.cumsum(side)]
            first, last = before[starts] + 1, before[ends]
            mid_own[side] = ((first + last) / 2.0)[run][side]
        given_all, given_own = np.empty(len(s)), np.empty(len(s))
        given_all[order], given_own[order] = mid_all, mid_own
        return cls(s, p, starts, given_all, given_own)


def auc_delong(pos: np.ndarray, neg: np.ndarray, confidence: float = 0.95,
               ranked: _Sorted | None = None) -> tuple[float, float, float]:
    """AUC = P(pos > neg) + P(pos = neg)/2 and its DeLong interval (midrank form).

    V10_i = (R_i - r_i) / n over the positives (R: rank among all, r: among positives),
    V01_j = 1 - (R_j - r_j) / m over the negatives; AUC = mean V10;
    var = var(V10)/m + var(V01)/n; interval AUC +- z se, clipped to [0, 1].
    """
    m, n = len(pos), len(neg)
    r = ranked or _Sorted.of(pos, neg)
    v10 = (r.mid_all[:m] - r.mid_own[:m]) / n
    v01 = 1.0 - (r.mid_all[m:] - r.mid_own[m:]) / m
    auc = float(v10.mean())
    var = (v10.var(ddof=1) / m if m > 1 else 0.0) + (v01.var(ddof=1) / n if n > 1 else 0.0)
    z = z_score(confidence)
    se = math.sqrt(max(var, 0.0))
    return auc, max(0.0, auc - z * se), min(1.0, auc + z * se)


def roc(pos: np.ndarray, neg: np.ndarray, ranked: _Sorted | None = None
        ) -> tuple[np.ndarray, np.ndarray]:
    """The empirical ROC: (FPR, TPR) at every threshold "score >= t", from (0, 0) to (1, 1)."""
    r = ranked or _Sorted.of(pos, neg)
    # thresholds from the highest score down: a run of equal scores enters at once
    p = r.is_pos[::-1]
    ends = (len(p) - 1 - r.starts)[::-1]  # each run's last position, counted from the top
    tp = np.cumsum(p)[ends]
    fp = np.cumsum(~p)[ends]
    return (np.r_[0.0, fp / max(len(neg), 1)], np.r_[0.0, tp / max(len(pos), 1)])


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, at: float) -> float:
    """The largest TPR among the ROC's thresholds whose FPR is at most ``at``."""
    ok = fpr <= at + 1e-12
    return float(tpr[ok].max()) if ok.any() else 0.0


def attack_figures(pos: np.ndarray, neg: np.ndarray, confidence: float
                   ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The per-attack figures and its ROC curve (thinned for the report)."""
    ranked = _Sorted.of(pos, neg)  # one sort for the AUC, its interval and the ROC
    auc, low, high = auc_delong(pos, neg, confidence, ranked)
    fpr, tpr = roc(pos, neg, ranked)
    figs = {"auc": auc, "auc_low": low, "auc_high": high,
            "tpr_at_fpr_1pct": tpr_at_fpr(fpr, tpr, 0.01),
            "tpr_at_fpr_01pct": tpr_at_fpr(fpr, tpr, 0.001),
            "advantage": float(np.max(tpr - fpr)) if len(pos) and len(neg) else 0.0}
    keep = np.unique(np.r_[0, np.linspace(0, len(fpr) - 1, min(len(fpr), 400)).astype(int),
                           len(fpr) - 1])
    return figs, {"fpr": fpr[keep].round(6).tolist(), "tpr": tpr[keep].round(6).tolist()}


# ---------------------------------------------------------------- attacks
def closest_distance(queries: MixedMatrix, candidates: MixedMatrix) -> np.ndarray:
    p = max(len(queries.columns), 1)
    return np.asarray(nearest_distance(queries, candidates) / p)


def _rows(mat: MixedMatrix, rows: np.ndarray) -> MixedMatrix:
    return MixedMatrix(numeric=mat.numeric[rows], categorical=mat.categorical[rows],
                       columns=mat.columns, n=len(rows), wild=mat.wild)


def _features(mat: MixedMatrix) -> tuple[np.ndarray, np.ndarray]:
    """Model features: scaled numbers (NaN = missing) and categorical codes (missing NaN);
    a categorical column with more categories than the model's bins goes in as its code."""
    cats = mat.categorical.astype(np.float64)
    cats[mat.categorical < 0] = np.nan
    X = np.column_stack([mat.numeric, cats]) if mat.numeric.size or cats.size else \
        np.empty((mat.n, 0))
    return X, np.r_[np.zeros(mat.numeric.shape[1], dtype=bool),
                    np.ones(cats.shape[1], dtype=bool)]


def _density_scores(release: MixedMatrix, reference: MixedMatrix, targets: MixedMatrix,
                    seed: int) -> np.ndarray:
    """log p_R(x)/p_P(x) by the density-ratio trick (module docstring)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    xr, is_cat = _features(release)
    xp, _ = _features(reference)
    xt, _ = _features(targets)
    # classes of equal size (seeded samples of the larger): the odds are then the density
    # ratio itself, with no sample weights (which also slow the model's binning threefold)
    size = min(len(xr), len(xp))
    rng = np.random.default_rng(seed)
    if len(xr) > size:
        xr = xr[np.sort(rng.choice(len(xr), size, replace=False))]
    if len(xp) > size:
        xp = xp[np.sort(rng.choice(len(xp), size, replace=False))]
    X = np.vstack([xr, xp])
    y = np.r_[np.ones(len(xr)), np.zeros(len(xp))]
    cardinality = np.nanmax(np.where(np.isnan(X), -1, X), axis=0) + 1 if X.size else []
    categorical = is_cat & (np.asarray(cardinality) <= 250)
    # 30 rounds at rate 0.3: the AUCs of 100 at 0.1 on bench/membership.py's data (within
    # their intervals) in a third of the time, the model being most of the family's time
    model = HistGradientBoostingClassifier(
        max_iter=30, learning_rate=0.3, max_leaf_nodes=31, early_stopping=False,
        categorical_features=categorical if categorical.any() else None, random_state=seed)
    with model_rows(len(X)):
        model.fit(X, y)
    with model_rows(len(xt)):
        return np.asarray(model.decision_function(xt), dtype=np.float64)


def epsilon_bound(tp: int, members: int, fp: int, non_members: int, delta: float,
                  alpha: float) -> tuple[float, float | None, str]:
    """The lower bound on epsilon from one test's counts: max(ln((TPR_lo - delta) / FPR_hi),
    ln((1 - FPR_hi - delta) / (1 - TPR_lo)), 0), TPR_lo and FPR_hi one-sided Clopper-Pearson
    bounds at level 1 - alpha / 2 each; and the point ratio of the form that gave it (None
    when infinite), and that form ("tpr/fpr" or "tnr/fnr")."""
    from ..stats import clopper_pearson

    tpr_lo = clopper_pearson(tp, members, alpha / 2, "lower")
    fpr_hi = clopper_pearson(fp, non_members, alpha / 2, "upper")
    forms = {"tpr/fpr": (tpr_lo - delta, fpr_hi), "tnr/fnr": (1 - fpr_hi - delta, 1 - tpr_lo)}
    best, form = 0.0, "tpr/fpr"
    for name, (num, den) in forms.items():
        if num > 0 and den > 0 and math.log(num / den) > best:
            best, form = math.log(num / den), name
    tpr, fpr = tp / max(members, 1), fp / max(non_members, 1)
    num, den = (tpr, fpr) if form == "tpr/fpr" else (1 - fpr, 1 - tpr)
    point = math.log(num / den) if num > 0 and den > 0 else None
    return best, point, form


def _thresholds(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """The audit's candidate thresholds: where the non-members' false-positive rate, and the
    members' false-negative rate, is each rate of :data:`EPSILON_GRID`."""
    grid = np.asarray(EPSILON_GRID)
    return np.unique(np.r_[np.quantile(neg, 1 - grid, method="higher"),
                           np.quantile(pos, grid, method="lower")])


def epsilon_audit(scores: dict[str, tuple[np.ndarray, np.ndarray]], seed: int,
                  delta: float, confidence: float
                  ) -> tuple[dict[str, float | None], dict[str, Any]]:
    """``epsilon_low`` and ``epsilon_point`` over the attacks' scores (each: its members'
    and its non-members'), the threshold chosen on one seeded half and counted on the other
    (see the module's docstring), and the figures it came from."""
    alpha = 1 - confidence
    best: tuple[float, str, float] | None = None
    halves: dict[str, tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {}
    for name, (pos_all, neg_all) in scores.items():
        rng = np.random.default_rng([seed, 0xE95])
        pos, neg = rng.permutation(len(pos_all)), rng.permutation(len(neg_all))
        hp, hn = len(pos) // 2, len(neg) // 2
        choose = (pos_all[pos[:hp]], neg_all[neg[:hn]])
        count = (pos_all[pos[hp:]], neg_all[neg[hn:]])
        halves[name] = (choose, count)
        p, n = choose
        if not len(p) or not len(n):
            continue
        for t in _thresholds(p, n):
            bound, _, _ = epsilon_bound(int(np.sum(p >= t)), len(p), int(np.sum(n >= t)),
                                        len(n), delta, alpha)
            if best is None or bound > best[0]:
                best = (bound, name, float(t))
    if best is None:
        return {"epsilon_low": 0.0, "epsilon_point": None}, {}
    _, attack, t = best
    (cp, cn), (p, n) = halves[attack]
    tp, fp = int(np.sum(p >= t)), int(np.sum(n >= t))
    low, point, form = epsilon_bound(tp, len(p), fp, len(n), delta, alpha)
    return ({"epsilon_low": low, "epsilon_point": point},
            {"attack": attack, "threshold": t, "form": form, "tp": tp, "members": len(p),
             "fp": fp, "non_members": len(n), "tpr": tp / max(len(p), 1),
             "fpr": fp / max(len(n), 1), "delta": delta, "confidence": confidence,
             "chosen_on": f"{len(cp)} members and {len(cn)} non-members (seeded), apart "
                          "from those counted"})


def tpr_interval(pos: np.ndarray, neg: np.ndarray, at: float, confidence: float
                 ) -> dict[str, Any]:
    """The threshold that keeps the false-positive rate at most ``at`` (the largest TPR's),
    the members above it with the TPR's two-sided Clopper-Pearson interval, and how many
    non-members the rate is counted on."""
    from ..stats import clopper_pearson

    order = np.sort(neg)[::-1]
    allowed = int(math.floor(at * len(neg) + 1e-9))  # false positives at most this many
    # the lowest threshold with at most ``allowed`` non-members at or above it
    t = (float(order[allowed]) if allowed < len(order) else -math.inf)
    tp = int(np.sum(pos > t)) if math.isfinite(t) else len(pos)
    alpha = 1 - confidence
    return {"threshold": t, "tp": tp, "members": int(len(pos)),
            "negatives": int(len(neg)), "false_positives_allowed": allowed,
            "low": clopper_pearson(tp, len(pos), alpha / 2, "lower"),
            "high": clopper_pearson(tp, len(pos), alpha / 2, "upper"),
            "few_negatives": len(neg) < MIN_NEGATIVES * at * 1000}


def _standardized(mats: list[MixedMatrix], halve: bool = True) -> list[MixedMatrix]:
    """Every number as its z-score in the first matrix (the release), halved (``halve``):
    with a category mismatch counting 1, the distance ranks neighbours as the L1 distance over
    one-hot categories (a mismatch: 2) and standardized numbers does; not halved, for the
    squared Euclidean distance (a mismatch adds 2 there)."""
    first = mats[0].numeric
    with np.errstate(all="ignore"):
        mean = np.nanmean(first, axis=0) if first.size else np.zeros(first.shape[1])
        sd = np.nanstd(first, axis=0) if first.size else np.ones(first.shape[1])
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    mean = np.where(np.isfinite(mean), mean, 0.0)
    scale = 2 * sd if halve else sd
    return [MixedMatrix(numeric=(m.numeric - mean) / scale, categorical=m.categorical,
                        columns=m.columns, n=m.n, wild=m.wild) for m in mats]


def _sample(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """Every row up to ``size``, a seeded sample of ``size`` above."""
    return np.arange(n) if n <= size else np.sort(rng.choice(n, size=size, replace=False))


@dataclass(frozen=True)
class _Targets:
    """Who is attacked and what is searched: row numbers of each table, all seeded."""

    members: np.ndarray  # original rows
    non_members: np.ndarray  # control rows (the distance attacks' non-members)
    outside: np.ndarray  # control rows outside the reference (the referenced attacks')
    reference: np.ndarray  # control rows the referenced attacks learn the population from
    released: np.ndarray  # released rows searched
    learn: np.ndarray  # positions in ``released`` the density model learns from
    control: np.ndarray  # every control row scored: non_members | outside, sorted
    at_all: np.ndarray  # where non_members sit in ``control``
    at_outside: np.ndarray  # where outside sits in ``control``


def _targets(original: Any, released: Any, control: Any, n_targets: int, reference_size: int,
             released_size: int | None, referenced: bool, seed: int) -> _Targets:
    """The targets: every member and non-member up to ``n_targets`` (a seeded sample above),
    the reference sample of the control (at most half of it), the released rows searched
    (all, or ``released_size`` of them) and the density model's sample of those."""
    rng = np.random.default_rng(seed)
    members = _sample(rng, original.n, n_targets)
    ctrl = rng.permutation(control.n)
    size = min(reference_size, control.n // 2) if referenced else 0
    reference = np.sort(ctrl[:size])
    outside = np.sort(ctrl[size:])
    non_members = _sample(rng, control.n, n_targets)
    outside = outside[_sample(rng, outside.size, n_targets)]
    searched = released.n if released_size is None else min(released_size, released.n)
    rel_rows = (np.arange(released.n) if searched == released.n else
                np.sort(rng.choice(released.n, size=searched, replace=False)))
    # the density model's released rows: a seeded sample of them, as large as the reference
    learn = (np.arange(searched) if searched <= reference_size else
             np.sort(rng.choice(searched, size=reference_size, replace=False)))
    # a control row outside the reference is scored once, by every attack
    target_ctrl = np.union1d(non_members, outside)
    return _Targets(members=members, non_members=non_members, outside=outside,
                    reference=reference, released=rel_rows, learn=learn, control=target_ctrl,
                    at_all=np.searchsorted(target_ctrl, non_members),
                    at_outside=np.searchsorted(target_ctrl, outside))


@dataclass
class _Attacked:
    """Every attack's figures, ROC, members' and counted non-members' scores, and its score
    of every target row (members, then ``_Targets.control``)."""

    figures: dict[str, float | int | None] = field(default_factory=dict)
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    every: dict[str, np.ndarray] = field(default_factory=dict)


def _attack_view(released: Any, original: Any, control: Any, view: list[str], suffix: str,
                 tg: _Targets, attacks: Sequence[str], wildcards: dict[str, int] | None,
                 quantiles: dict[str, tuple[np.ndarray, np.ndarray]], confidence: float,
                 seed: int, into: _Attacked) -> None:
    """Every attack on one view of the columns (all of them, or the quasi-identifiers:
    ``suffix`` "_qi"), its figures named ``<attack><suffix>.<figure>``."""
    m = len(tg.members)
    prepared = prepare([released, original, control, control], view,
                       [tg.released, tg.members, tg.control, tg.reference], wildcards)
    rel, ori_t, ctl_t, ref = quantile_columns(prepared, quantiles)
    targets = _stack(ori_t, ctl_t)
    with progress.scope(f"membership: distances{suffix}"):
        # the three distance attacks in one search of the release: the same rows, codes
        # and missing cells, so one grouping of the release and one visit serve all
        rel_z, ori_z, ctl_z, _ = _standardized(prepared)
        rel_e, ori_e, ctl_e, _ = _standardized(prepared, halve=False)
        found = nearest_distances([(targets, rel, False),
                                   (_stack(ori_z, ctl_z), rel_z, False),
                                   (_stack(ori_e, ctl_e), rel_e, True)])
        width = max(len(rel.columns), 1)
        d_rel, d_std, d_l2 = found[:, 0] / width, found[:, 1] / width, found[:, 2]
        d_ref = closest_distance(targets, ref) if "calibrated" in attacks else None
    for attack in attacks:
        if attack == "density" and suffix:
            continue  # the density model learns the release's joint law: every column
        name = f"{attack}{suffix}"
        if attack == "distance":
            s = -d_rel
        elif attack == "distance_std":
            s = -d_std
        elif attack == "distance_l2":
            s = -d_l2
        elif attack == "calibrated":
            assert d_ref is not None
            s = d_ref - d_rel
        else:
            with progress.scope(f"membership: density{suffix}"):
                s = _density_scores(_rows(rel, tg.learn), ref, targets, seed)
        neg = s[m:][tg.at_outside if attack in REFERENCED else tg.at_all]
        figs, curve = attack_figures(s[:m], neg, confidence)
        into.figures.update({f"{name}.{k}": v for k, v in figs.items()})
        into.curves[name] = curve
        into.scores[name] = (s[:m], neg)
        into.every[name] = s


def _worst_case(att: _Attacked, confidence: float
                ) -> tuple[dict[str, str], dict[str, dict[str, Any]], float]:
    """The worst case of each figure over the attacks (each its own maximum) into
    ``att.figures``, the strongest attack's with a Bonferroni-widened interval, the TPRs at
    low false-positive rates with their intervals; returns the attack behind each figure, the
    low-FPR details and the widened confidence."""
    figures, ran = att.figures, list(att.scores)
    worst = {k: max(ran, key=lambda a, k=k: (float(figures[f"{a}.{k}"] or 0.0),  # type: ignore[misc]
                                             -ran.index(a))) for k in WORST}
    pos, neg = att.scores[worst["auc"]]
    wide = 1 - (1 - confidence) / max(len(ran), 1)  # Bonferroni over the attacks run
    top, _ = attack_figures(pos, neg, wide)
    figures.update(top)
    figures.update({k: figures[f"{worst[k]}.{k}"] for k in WORST})
    low_fpr = {}
    for key, at in (("tpr_at_fpr_1pct", 0.01), ("tpr_at_fpr_01pct", 0.001)):
        p, n = att.scores[worst[key]]
        low_fpr[key] = {"attack": worst[key], **tpr_interval(p, n, at, confidence)}
        figures[f"{key}_low"] = low_fpr[key]["low"]
        figures[f"{key}_high"] = low_fpr[key]["high"]
    return worst, low_fpr, wide


def _warnings(original: Any, released: Any, control: Any, tg: _Targets, n_targets: int,
              low_fpr: dict[str, dict[str, Any]], referenced: bool) -> list[str]:
    """What limits the figures: sampled targets, few non-members at 0.1 %, a small
    reference, a sampled release."""
    warnings = []
    for name, total, used in (("original", original.n, len(tg.members)),
                              ("control", control.n, len(tg.non_members))):
        if used < total:
            warnings.append(f"{used:,} of the {total:,} {name} rows were attacked (a seeded "
                            f"sample: measures.membership.n_targets is {n_targets:,}); the "
                            "intervals carry the sampling")
    if low_fpr["tpr_at_fpr_01pct"]["few_negatives"]:
        warnings.append(f"the TPR at 0.1 % false positives is counted on "
                        f"{low_fpr['tpr_at_fpr_01pct']['negatives']:,} non-members (fewer "
                        f"than {MIN_NEGATIVES:,}): its threshold sits on the few highest-scored "
                        "ones; read it with its interval")
    if len(tg.reference) < len(tg.outside) and referenced:
        warnings.append(f"the reference sample has {len(tg.reference)} control rows, fewer "
                        f"than the {len(tg.outside)} non-members it is set against: the "
                        "calibrated and density attacks are weak")
    if len(tg.released) < released.n:
        warnings.append(
            f"the release was searched in a seeded sample of {len(tg.released):,} of its "
            f"{released.n:,} rows: a member whose near copy lies outside it is not seen, so "
            f"the figures are a lower bound (on bench/membership.py's 100,000 rows, AUC 0.512 "
            f"with 20,000 searched against 0.567 searched whole); leave "
            f"measures.membership.released_size "
            f"unset to search the whole release")
    return warnings


def membership(original: Any, released: Any, control: Any, *, columns: Sequence[str],
               qi_columns: Sequence[str] = (), n_targets: int = MAX_TARGETS,
               reference_size: int = DEFAULT_REFERENCE, released_size: int | None = None,
               attacks: Sequence[str] = ATTACKS,
               confidence: float = 0.95, seed: int = 0,
               wildcards: dict[str, int] | None = None, delta: float = DEFAULT_DELTA,
               claimed_epsilon: float | None = None) -> MeasureResult:
    """Membership inference against ``released`` (EncodedTables, jointly encoded); see the
    module's docstring for every formula."""
    cols = list(columns)
    if control is None:
        return MeasureResult(
            measure="membership", figures={}, status=Status.INSUFFICIENT_EVIDENCE,
            reason="needs a control table (records held out of the release's making) as "
                   "the non-members: without one membership cannot be measured, and is not "
                   "passed")
    check_attack_columns({"original": original, "released": released, "control": control},
                         cols, "membership")
    referenced = any(a in REFERENCED for a in attacks)
    tg = _targets(original, released, control, n_targets, reference_size, released_size,
                  referenced, seed)
    m, k = len(tg.members), len(tg.non_members)
    if min(m, k, len(tg.outside)) < MIN_TARGETS:
        return MeasureResult(
            measure="membership", figures={}, status=Status.INSUFFICIENT_EVIDENCE,
            reason=f"too few rows to attack: {original.n} original and {control.n} control "
                   f"rows (at least {MIN_TARGETS} members and non-members, the non-members "
                   "outside the reference sample)")
    views = {"": cols}
    qi = [c for c in qi_columns if c in cols]
    if qi and len(qi) < len(cols):
        views["_qi"] = qi
    att = _Attacked()
    quantiles: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for suffix, view in views.items():
        _attack_view(released, original, control, view, suffix, tg, attacks, wildcards,
                     quantiles, confidence, seed, att)
    figures, ran = att.figures, list(att.scores)
    worst, low_fpr, wide = _worst_case(att, confidence)
    strongest = worst["auc"]
    eps, audit = epsilon_audit(att.scores, seed, delta, confidence)
    figures.update(eps)
    figures["epsilon_excess"] = (None if claimed_epsilon is None
                                 else float(eps["epsilon_low"] or 0.0) - claimed_epsilon)
    figures.update({"n_members": int(m), "n_non_members": int(k),
                    "n_reference": int(len(tg.reference)),
                    "n_released_searched": int(len(tg.released))})
    details: dict[str, Any] = {
        "strongest": strongest, "worst": worst, "attacks": ran, "roc": att.curves,
        "low_fpr": low_fpr,
        "epsilon": {**audit, "claimed": claimed_epsilon,
                    "meaning": "a lower bound on the epsilon of any (epsilon, delta)-DP "
                               "mechanism that could have made this release: it can refute "
                               "a claim, never certify one, and holds only for a control "
                               "drawn at random from the original's population"},
        "interval": {"method": "DeLong", "confidence": confidence,
                     "strongest_confidence": wide, "tpr": "Clopper-Pearson"},
        "counts": {"original": int(original.n), "control": int(control.n),
                   "released": int(released.n), "members": int(m), "non_members": int(k),
                   "non_members_outside_reference": int(len(tg.outside)),
                   "members_above_1pct_threshold": _exposed(*att.scores[strongest], 0.01)},
        "views": {("all columns" if k == "" else "quasi-identifiers"): list(v)
                  for k, v in views.items()},
    }
    unavailable = ({} if claimed_epsilon is not None else {
        "epsilon_excess": "no claimed_epsilon in measures.membership: nothing to refute"})
    if eps["epsilon_point"] is None:
        unavailable["epsilon_point"] = ("the chosen threshold has no false positive (or no "
                                        "false negative) among the counted targets: the "
                                        "ratio is infinite; epsilon_low bounds it")
    scored = len(tg.control)
    return MeasureResult(
        measure="membership", figures=figures, unavailable=unavailable,
        parameters={"columns": cols, "qi_columns": qi, "n_targets": n_targets,
                    "reference_size": reference_size, "released_size": released_size,
                    "attacks": list(attacks), "delta": delta,
                    "claimed_epsilon": claimed_epsilon,
                    "confidence": confidence, "seed": seed},
        details=details,
        warnings=tuple(_warnings(original, released, control, tg, n_targets, low_fpr,
                                 referenced)),
        records={RECORDS: {"table": np.r_[np.zeros(m, dtype=np.int8),
                                          np.ones(scored, dtype=np.int8)],
                           "row": np.r_[tg.members, tg.control].astype(np.int64),
                           "member": np.r_[np.ones(m, dtype=np.int8),
                                           np.zeros(scored, dtype=np.int8)],
                           **{f"score.{a}": att.every[a] for a in ran},
                           "score": att.every[strongest]}})


def _stack(members: MixedMatrix, non_members: MixedMatrix) -> MixedMatrix:
    """The targets: members' rows, then non-members'."""
    return MixedMatrix(numeric=np.vstack([members.numeric, non_members.numeric]),
                       categorical=np.vstack([members.categorical, non_members.categorical]),
                       columns=members.columns, n=members.n + non_members.n,
                       wild=members.wild)


def quantile_columns(mats: list[MixedMatrix], cache: dict[str, tuple[np.ndarray, np.ndarray]]
               ) -> list[MixedMatrix]:
    """Every number replaced by its quantile in the first matrix (the release): the mid-rank
    empirical CDF, (#{r < x} + #{r <= x}) / 2n, missing kept missing. A monotone map, so the
    closest record in each numeric column is unchanged; what changes is the weight of a
    difference: Gower's scaling by the range lets one extreme value hide a heavy-tailed column
    (a 3 % change of an income is 0.001 of its range but 0.02 of its quantiles). ``cache``
    keeps each column's sorted release values and the release's own quantiles across views."""
    first = mats[0]
    out = [m.numeric.copy() for m in mats]
    for j in range(first.numeric.shape[1]):
        name = first.columns[j]
        if name not in cache:
            col = first.numeric[:, j]
            ok = np.flatnonzero(~np.isnan(col))
            order = ok[np.argsort(col[ok], kind="stable")]
            ref = col[order]
            q = np.full(col.shape, np.nan)
            if ref.size:  # mid-ranks of the release's own values, from the one sort
                starts = np.flatnonzero(np.r_[True, ref[1:] != ref[:-1]])
                ends = np.r_[starts[1:], ref.size]
                q[order] = np.repeat((starts + ends) / (2.0 * ref.size), ends - starts)
            cache[name] = (ref, q)
        ref, q = cache[name]
        out[0][:, j] = q
        if ref.size == 0:
            continue
        for x in out[1:]:
            v = x[:, j]
            ok = ~np.isnan(v)
            w = v[ok]
            x[ok, j] = (np.searchsorted(ref, w, "left") + np.searchsorted(ref, w, "right")) \
                / (2.0 * ref.size)
    return [MixedMatrix(numeric=x, categorical=m.categorical, columns=m.columns, n=m.n,
                        wild=m.wild) for x, m in zip(out, mats, strict=True)]


def _exposed(pos: np.ndarray, neg: np.ndarray, at: float) -> int:
    """Members scored above the threshold that keeps the FPR at most ``at``: the rows that
    drive the low-FPR figure (a count, never values)."""
    t = float(np.quantile(neg, 1 - at, method="higher")) if len(neg) else math.inf
    return int(np.sum(pos > t))


def figure_directions(attack_names: Sequence[str]) -> dict[str, bool]:
    """figure -> higher is riskier (every membership figure: higher = more exposed)."""
    out = {k: True for k in (*PER_ATTACK, *TPR_INTERVALS)}
    out.update({f"{a}.{k}": True for a in attack_names for k in PER_ATTACK})
    out.update({k: True for k in EPSILON_FIGURES})
    out.update({"n_members": False, "n_non_members": False, "n_reference": False,
                "n_released_searched": False})
    return out


def _attack_names(params: MembershipParams, roles: Roles) -> list[str]:
    names: list[str] = list(params.attacks)
    cols = compared_columns(params.columns, roles)
    qi = [c for c in roles.quasi_identifiers if c in cols]
    if params.partly_informed and qi and len(qi) < len(cols):
        names += [f"{a}_qi" for a in params.attacks if a != "density"]
    return names


def _columns(params: MembershipParams, roles: Roles, released: Any) -> list[str]:
    return compared_columns(params.columns, roles, released)


def _run(inputs: MeasureInputs, params: MembershipParams) -> MeasureResult:
    assert inputs.original is not None
    roles = inputs.released.roles
    cols = _columns(params, roles, inputs.released)
    if not cols:
        return MeasureResult(measure="membership", figures={}, status=Status.NOT_COMPUTABLE,
                             reason="no column to compare: give measures.membership.columns")
    refused = inputs.domain_check("membership", cols)
    if refused is not None:
        return refused
    qi = [c for c in roles.quasi_identifiers if c in cols] if params.partly_informed else []
    result = membership(inputs.original, inputs.released, inputs.control, columns=cols,
                        qi_columns=qi, n_targets=params.n_targets,
                        reference_size=params.reference_size,
                        released_size=params.released_size, attacks=params.attacks,
                        confidence=params.confidence, seed=inputs.seed,
                        wildcards=inputs.wildcards(cols), delta=params.delta,
                        claimed_epsilon=params.claimed_epsilon)
    return inputs.with_alignment(result, cols)


def _refutes(result: MeasureResult) -> str | None:
    """The release's differential-privacy claim refuted: the measured lower bound on epsilon
    exceeds the claimed epsilon (a failed check whatever the policy says)."""
    excess = result.figures.get("epsilon_excess")
    claimed = result.parameters.get("claimed_epsilon")
    low = result.figures.get("epsilon_low")
    if isinstance(excess, (int, float)) and excess > 0 and claimed is not None:
        return (f"the measured lower bound epsilon >= {float(low or 0):.3g} exceeds the "
                f"claimed epsilon = {float(claimed):g}: the differential-privacy claim is "
                "false for this release")
    return None


def _alarm(result: MeasureResult) -> str | None:
    refuted = _refutes(result)
    if refuted is not None:
        return refuted
    low = result.figures.get("auc_low")
    if isinstance(low, (int, float)) and low > ALARM_AUC:
        return (f"membership inference: the strongest attack's AUC interval lies above "
                f"{ALARM_AUC} (from {low:.2f}): the release tells members from non-members")
    return None


def _start_up() -> None:
    """numba's set-up (the distances' kernel) and the shadow model's gradient boosting."""
    warm()
    start_models("sklearn.ensemble")


FAMILY = MeasureFamily(
    name="membership",
    title="Membership inference",
    section="attacks",
    params=MembershipParams,
    run=_run,
    figures=lambda p, roles: figure_directions(_attack_names(p, roles)),
    needs=("original",),
    reads=("control",),
    distance=True,
    alarm=_alarm,
    refutes=_refutes,
    fits_models=True,
    start_up=_start_up,
    how_to_read=(
        "Whether someone holding a person's record can tell from the release that the person "
        "was in the original. Members (original rows) and non-members (control rows) are "
        "attacked alike: by their distance to the closest released row, the same calibrated "
        "by their distance to the population, and by the release's density over the "
        "population's. AUC 0.5 means no signal; 1 means members are told apart perfectly. The "
        "true-positive rate at 1 % and 0.1 % false positives tells how many members are "
        "exposed with confidence, which matters even when the AUC is close to 0.5. Each "
        "headline figure is the worst case over the attacks. The epsilon bound is a lower "
        "bound on the epsilon of any differentially private mechanism that could have made "
        "this release (95 % confidence, the threshold chosen on other targets than those "
        "counted): it can refute a claim of differential privacy, never certify one, and "
        "only when the control is a random holdout of the original's population."),
    advice=(
        "The release sits near its training rows: remove near copies (rows of the original "
        "with small noise), train the generator with fewer epochs or differential privacy, "
        "or coarsen the columns that make rows distinctive; the report counts the members "
        "above the 1 % false-positive threshold."),
)
