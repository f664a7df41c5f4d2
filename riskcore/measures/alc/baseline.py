"""The baseline predictor of the ALC (the ALC paper, section 3.3; docs/measures.md 6): the best
model trained on
the ORIGINAL data without the targets, so that the baseline measures what can be inferred about
non-members from raw data, without the release.

Model selection (once per attack scenario, on the whole original): a stratified split with a
test part of 50 % below 6000 rows, else 3000 rows; every candidate is fitted on (at most 6000
rows of) the train part and scored by its best PRC (Wilson width < 0.1) on the test part; the
winner's PRC is the "expected PRC". The winning model class is then re-fitted once per control
block on the original minus the block (minus whole households when a household column is
given) and predicts the block's targets; confidence = the predicted class probability.

Candidates (the package's five, sized so that selection costs seconds, not minutes):
``hist_gradient_boosting`` (100 iterations, early stopping, native categorical splits),
``random_forest`` and ``extra_trees`` (40 trees), ``logistic_regression`` (standardized
continuous columns, 300 iterations) and ``one_to_one`` (the majority secret per value of a
categorical known column whose per-value mode agrees with the secret on >= 95 % of the rows;
confidence 1). Features: continuous known columns raw (missing -> the training median plus a
missing indicator), categorical ones one-hot (missing is a category; above 100 categories the
code is used as an ordinal instead, to keep the matrix small).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...equivalence import group_rows
from ...errors import ConfigError
from ...threads import current_limit, in_chunks, model_rows, tree_jobs
from .inputs import CONTINUOUS, ALCData
from .prc import TIGHT_WIDTH, PRCParams, best_prc

DEFAULT_MODELS = ("hist_gradient_boosting", "random_forest", "extra_trees",
                  "logistic_regression", "one_to_one")
ONE_HOT_MAX = 100
ONE_TO_ONE_AGREEMENT = 0.95
SELECTION_TRAIN_ROWS = 6_000
#: the logistic baseline is fitted on distinct rows, weighted, from this many training rows
DISTINCT_FROM_ROWS = 20_000
#: the split finds each class's test rows by a pass over the rows up to this many classes
#: (a sort of the rows beyond)
SPLIT_CLASSES = 64


@dataclass(frozen=True)
class BaselineSelection:
    """The outcome of model selection.

    Attributes:
        model: the winning candidate's name.
        expected_prc: its best PRC on the test split.
        scores: every candidate's PRC (None when it failed, with the error in ``errors``).
        seconds: fitting time per candidate.
        n_train, n_test: the split's sizes.
        one_to_one_column: the column of the one-to-one predictor, if it was a candidate.
    """

    model: str
    expected_prc: float
    scores: dict[str, float | None]
    seconds: dict[str, float]
    n_train: int
    n_test: int
    one_to_one_column: str | None = None
    errors: dict[str, str] = field(default_factory=dict)


class _Features:
    """Feature matrices over the known columns, fitted on training rows."""

    def __init__(self, data: ALCData, known: Sequence[str], train: np.ndarray) -> None:
        t = data.original
        self.data = data
        self.cont = [c for c in known if data.kinds[c] == CONTINUOUS]
        self.cat = [c for c in known if data.kinds[c] != CONTINUOUS]
        self.medians = {}
        self.indicator = {}
        for c in self.cont:
            v = data.values[t][c][train]
            fin = np.isfinite(v)
            self.medians[c] = float(np.median(v[fin])) if fin.any() else 0.0
            self.indicator[c] = bool((~fin).any())
        self.sizes = {c: len(data.labels[c]) for c in self.cat}

    def dense(self, rows: np.ndarray, one_hot: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(X, categorical mask) for the given rows of the original."""
        t = self.data.original
        parts, mask = [], []
        for c in self.cont:
            v = self.data.values[t][c][rows]
            miss = ~np.isfinite(v)
            parts.append(np.where(miss, self.medians[c], v)[:, None])
            mask.append(False)
            if self.indicator[c]:
                parts.append(miss[:, None].astype(float))
                mask.append(False)
        for c in self.cat:
            codes = self.data.codes[t][c][rows]
            k = self.sizes[c]
            if one_hot and k <= ONE_HOT_MAX:
                oh = np.zeros((len(rows), k + 1), dtype=np.float32)
                oh[np.arange(len(rows)), codes + 1] = 1.0
                parts.append(oh)
                mask += [False] * (k + 1)
            elif not one_hot and k < 250:
                parts.append(np.where(codes < 0, np.nan, codes).astype(float)[:, None])
                mask.append(True)
            else:
                parts.append(codes.astype(float)[:, None])
                mask.append(False)
        X = np.hstack(parts).astype(np.float32) if parts else np.zeros((len(rows), 1), np.float32)
        return X, np.asarray(mask, dtype=bool)


def _sklearn_model(name: str, seed: int, cat_mask: np.ndarray | None,
                   smallest_class: int = 2, n_rows: int | None = None) -> Any:
    """A candidate model. HistGradientBoosting stops early on a stratified validation split,
    which needs two members of every class: with a one-member class it fits without early
    stopping (scikit-learn would refuse the split). Forests grow their trees on the threads
    :func:`riskcore.threads.tree_jobs` gives for ``n_rows`` training rows."""
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "hist_gradient_boosting":
        return HistGradientBoostingClassifier(
            max_iter=100, early_stopping=smallest_class >= 2, n_iter_no_change=10,
            validation_fraction=0.1,
            categorical_features=cat_mask if cat_mask is not None and cat_mask.any() else None,
            random_state=seed)
    if name == "random_forest":
        return RandomForestClassifier(n_estimators=40, n_jobs=tree_jobs(n_rows),
                                      random_state=seed)
    if name == "extra_trees":
        return ExtraTreesClassifier(n_estimators=40, n_jobs=tree_jobs(n_rows),
                                    random_state=seed)
    if name == "logistic_regression":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=300,
                                                                  random_state=seed))
    raise ConfigError(f"ALC baseline: unknown model '{name}'; choose from {list(DEFAULT_MODELS)}")


class BaselineModel:
    """One fitted baseline: ``predict(rows)`` gives (predicted code, confidence)."""

    def __init__(self, data: ALCData, secret: str, known: Sequence[str], name: str,
                 seed: int, one_to_one_column: str | None = None) -> None:
        self.data, self.secret, self.known = data, secret, list(known)
        self.name, self.seed = name, seed
        self.one_to_one_column = one_to_one_column
        self._model: Any = None
        self._map: np.ndarray | None = None
        self._features: _Features | None = None
        self._majority = 0

    def fit(self, rows: np.ndarray) -> BaselineModel:
        y = self.data.codes[self.data.original][self.secret][rows]
        self._majority = int(np.bincount(y).argmax())
        if self.name == "one_to_one":
            assert self.one_to_one_column is not None
            col = self.data.codes[self.data.original][self.one_to_one_column][rows]
            self._map = _mode_per_value(col, y, len(self.data.labels[self.one_to_one_column]),
                                        len(self.data.labels[self.secret]))
            return self
        self._features = _Features(self.data, self.known, rows)
        one_hot = self.name != "hist_gradient_boosting"
        # the logistic loss is a sum over rows: each distinct row once, weighted by how often
        # it occurs, is the same objective (and the scaler's weighted moments the same moments)
        distinct = _distinct_rows(self.data, self.known, rows, y) \
            if self.name == "logistic_regression" else None
        X, mask = self._features.dense(rows if distinct is None else rows[distinct[0]],
                                       one_hot=one_hot)
        present = np.bincount(y)
        self._model = _sklearn_model(self.name, self.seed, None if one_hot else mask,
                                     smallest_class=int(present[present > 0].min()),
                                     n_rows=len(rows))
        if len(np.unique(y)) == 1:
            self._model = None  # a constant: every prediction is that value
            return self
        with model_rows(len(X)):  # OpenMP's threads by the rows fitted, not the table's
            if distinct is None:
                self._model.fit(X, y)
            else:
                w = distinct[1].astype(np.float64)
                self._model.fit(X, y[distinct[0]], standardscaler__sample_weight=w,
                                logisticregression__sample_weight=w)
        return self

    def predict(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(rows)
        if self.name == "one_to_one":
            assert self._map is not None and self.one_to_one_column is not None
            col = self.data.codes[self.data.original][self.one_to_one_column][rows]
            pred = self._map[col + 1]
            known = pred >= 0
            return np.where(known, pred, self._majority), np.where(known, 1.0, 0.0)
        if self._model is None:
            return np.full(n, self._majority, np.int64), np.ones(n)
        assert self._features is not None
        X, _ = self._features.dense(rows, one_hot=self.name != "hist_gradient_boosting")
        with model_rows(n):
            proba = self._model.predict_proba(X)
        i = np.argmax(proba, axis=1)
        classes = np.asarray(self._model.classes_)
        return classes[i].astype(np.int64), proba[np.arange(n), i]


def _distinct_rows(data: ALCData, known: Sequence[str], rows: np.ndarray, y: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """Positions in ``rows`` of the first row of each distinct (known values, secret)
    combination and the combination's count, when there are at most half as many
    combinations as rows (None otherwise: weighting would not pay)."""
    if len(rows) < DISTINCT_FROM_ROWS:
        return None
    t = data.original
    cols = [pd.factorize(data.values[t][c][rows])[0] if data.kinds[c] == CONTINUOUS
            else data.codes[t][c][rows] for c in known]
    ids, u = group_rows(np.column_stack([*cols, y]))
    if u > len(rows) // 2:
        return None
    _, first, counts = np.unique(ids, return_index=True, return_counts=True)
    return first, counts


def _mode_per_value(col: np.ndarray, y: np.ndarray, k_col: int, k_y: int) -> np.ndarray:
    """The most frequent y per value of col (index code + 1; -1 where the value is unseen)."""
    counts = np.bincount((col + 1) * k_y + y, minlength=(k_col + 1) * k_y).reshape(k_col + 1, k_y)
    out = counts.argmax(axis=1).astype(np.int64)
    out[counts.sum(axis=1) == 0] = -1
    return out


def one_to_one_column(data: ALCData, secret: str, known: Sequence[str],
                      rows: np.ndarray) -> str | None:
    """The categorical known column whose per-value mode agrees best with the secret, if that
    agreement reaches 95 % (the package's OneToOnePredictor test)."""
    y = data.codes[data.original][secret][rows]
    k_y = len(data.labels[secret])
    best, best_share = None, ONE_TO_ONE_AGREEMENT
    for c in known:
        if data.kinds[c] == CONTINUOUS:
            continue
        col = data.codes[data.original][c][rows]
        counts = np.bincount((col + 1) * k_y + y, minlength=(len(data.labels[c]) + 1) * k_y)
        share = counts.reshape(-1, k_y).max(axis=1).sum() / len(rows)
        if share >= best_share:
            best, best_share = c, share
    return best


def _split(rng: np.random.Generator, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stratified train/test positions: test = 50 % below 6000 rows, else 3000 rows: each
    class's first rows in a seeded random order, as many as its share of the test part
    (rounded by largest remainder). Linear in the rows where the classes are a few codes."""
    n = len(y)
    n_test = n // 2 if n < 6000 else 3000
    order = rng.permutation(n)
    ordered = y[order]
    codes = n > 0 and ordered.dtype.kind in "iu" and 0 <= int(ordered.min()) and int(
        ordered.max()) < 2 * n + SPLIT_CLASSES
    if codes:  # a count per code, no sort of the rows
        present = np.bincount(ordered)
        classes = np.flatnonzero(present)
        counts = present[classes]
    else:
        classes, inv = np.unique(ordered, return_inverse=True)
        counts = np.bincount(inv)
    # stratified: take the same share of every class, rounding by largest remainder
    share = counts * n_test / n
    take = np.floor(share).astype(int)
    extra = n_test - take.sum()
    if extra > 0:
        take[np.argsort(-(share - take), kind="stable")[:extra]] += 1
    if codes and len(classes) <= SPLIT_CLASSES:  # one pass a class: its first rows in order
        is_test = np.zeros(n, dtype=bool)
        for c, t in zip(classes.tolist(), take.tolist(), strict=True):
            if t:
                is_test[np.flatnonzero(ordered == c)[:t]] = True
        return order[~is_test], order[is_test]
    if codes:
        lookup = np.zeros(present.size, dtype=np.int64)
        lookup[classes] = np.arange(len(classes))
        inv = lookup[ordered]
    rank = np.empty(n, dtype=np.int64)
    sort_idx = np.argsort(inv, kind="stable")
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    rank[sort_idx] = np.arange(n) - np.repeat(starts, counts)
    is_test = rank < take[inv]
    return order[~is_test], order[is_test]


def select_baseline(data: ALCData, secret: str, known: Sequence[str], rows: np.ndarray,
                    seed: int, models: Sequence[str] = DEFAULT_MODELS,
                    params: PRCParams = PRCParams(),
                    max_train_rows: int | None = SELECTION_TRAIN_ROWS) -> BaselineSelection:
    """Choose the baseline model on a held-out split of the original's ``rows`` (the
    candidates are fitted on at most ``max_train_rows`` of the train part: selection ranks
    models, and the winner is re-fitted on all the training rows of each control block)."""
    unknown = [m for m in models if m not in DEFAULT_MODELS]
    if unknown or not models:
        raise ConfigError(f"ALC baseline: unknown model(s) {unknown}; choose from "
                          f"{list(DEFAULT_MODELS)}")
    rng = np.random.default_rng(seed)
    y = data.codes[data.original][secret][rows]
    train_pos, test_pos = _split(rng, y)
    if max_train_rows is not None and len(train_pos) > max_train_rows:
        train_pos = train_pos[:max_train_rows]  # already in random order
    train, test = rows[train_pos], rows[test_pos]
    otop = one_to_one_column(data, secret, known, rows) if "one_to_one" in models else None
    scores: dict[str, float | None] = {}
    seconds: dict[str, float] = {}
    errors: dict[str, str] = {}
    candidates = [m for m in models if not (m == "one_to_one" and otop is None)]
    # per candidate: (predictions or the error that skips it, seconds), each slot its fit's own
    fitted: list[tuple[tuple[np.ndarray, np.ndarray] | str, float]] = [("", 0.0)] * len(
        candidates)

    def fit(sl: slice) -> None:
        for i in range(sl.start, sl.stop):
            t0 = time.perf_counter()
            outcome: tuple[np.ndarray, np.ndarray] | str
            try:
                outcome = BaselineModel(data, secret, known, candidates[i], seed,
                                        otop).fit(train).predict(test)
            except (ValueError, MemoryError) as exc:  # a candidate that cannot fit is skipped
                outcome = str(exc)[:300]
            fitted[i] = (outcome, round(time.perf_counter() - t0, 3))

    # the candidates are independent fits of one model thread each (under 100,000 rows): they
    # share the attack's threads (the family's budget, :func:`tree_jobs`) instead of queueing
    in_chunks(len(candidates), fit, 1, threads=max(1, tree_jobs() // (current_limit() or 1)))
    best_name, best_score = None, -1.0
    # in the candidates' order, whichever fit ended first: the same choice, the same keys
    for name, (outcome, took) in zip(candidates, fitted, strict=True):
        seconds[name] = took
        if isinstance(outcome, str):
            scores[name] = None
            errors[name] = outcome
            continue
        pred, conf = outcome
        point = best_prc(conf, pred == y[test_pos], TIGHT_WIDTH, params)
        score = point.prc if point else 0.0
        scores[name] = score
        if score > best_score:
            best_name, best_score = name, score
    if best_name is None:
        raise ConfigError(f"ALC baseline: no candidate model could be fitted ({errors})")
    return BaselineSelection(model=best_name, expected_prc=best_score, scores=scores,
                             seconds=seconds, n_train=len(train), n_test=len(test),
                             one_to_one_column=otop, errors=errors)
