"""The ALC attack loop (the ALC paper, section 3 and 5.1; anonymity_loss_coefficient 1.0.32
``ALCManager`` and ``ScoreInterval.ok_to_halt``; docs/measures.md 6).

Targets are records of the original, drawn in a seeded random order and taken in control
blocks of 1000 rows (or 10 % + 1 of the rows when that is smaller). For every block the
baseline model is re-fitted on the original minus the block (minus the households of the
block), then every target gets two predictions: the baseline's and the attack's (an attack may
abstain: the baseline's value with confidence 0 stands in). Every 50 predictions a checkpoint
decides whether to halt:

1. Best PRC of both sides with Wilson width < 0.1 ("tight"). If either has none: with width
   < 0.25 ("loose"), halt ``early_high_loose`` if the pessimistic ALC (base at its upper bound,
   attack at its lower bound) > 0.9, ``early_low_loose`` if the optimistic ALC (base at its
   lower bound, attack at its upper bound) < 0; otherwise continue.
2. Tight: halt ``early_low_tight`` if ALC < 0, ``early_high_tight`` if ALC > 0.98.
3. Diminishing returns: the first tight checkpoint stores the best PRCs; later ones compare;
   progress = a gain >= max(0.01, 0.05 (1 - best)). Without progress on either side: halt
   ``diminishing_returns`` if ALC < 0.5, ``close_to_expected_loose`` if ALC < 0.75 and the
   expected PRC (model selection) exceeds the base PRC by < 0.05, ``close_to_expected_tight``
   if ALC >= 0.75 and by < 0.01.
4. Otherwise the next block; ``exhausted`` when every target was attacked, ``max_attacks``
   or ``time_budget`` at the configured limits.

riskgate's correction (``halting="paper"``, the default): a halt that would call the release
safe (early-low, diminishing returns, close-to-expected below 0.5) is held back while the
attack's top-confidence predictions form a group (at least 3 right predictions) that is not yet
significant but, if its measured precision held, would give an ALC of at least 0.4 against the
base's lower bound (the paper's early-low threshold, section 5.1;
:func:`~riskcore.alc.prc.exposed_group`):
the ALC paper, section 5.1 keeps attacking while the lowest-recall measures still improve and are
not yet significant. The package's rules alone (``halting="package"``) stop such an attack at
a checkpoint where only high-recall, low-precision prefixes are significant.

The final ALC comes from the best tight pair of each side (loose when one side has no tight
pair); with no pair at all the attack ends as "insufficient evidence" (no ALC), which the gate
never treats as a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...arrays import unique
from ...errors import ConfigError, InputError
from ...results import to_jsonable
from ...threads import current_limit, model_threads, thread_budget, tree_threads
from .baseline import DEFAULT_MODELS, BaselineModel, BaselineSelection, select_baseline
from .brm import BestRowMatch, Predictions
from .inputs import ALCData
from .prc import (
    LOOSE_WIDTH,
    TIGHT_WIDTH,
    PRCParams,
    PRPoint,
    alc,
    alc_from_pr,
    band,
    best_prc,
    exposed_group,
    prc,
    prc_table,
)
from .swap import swap_arrays

INSUFFICIENT = "insufficient_evidence"
#: the baseline of a control block is fitted on at most this many of the original's other rows
#: (a seeded sample): a model of a few known columns learns what it can well before (on the
#: bench's 1M-row census its fit took 4 s of the family's 8), and a weaker baseline can only
#: raise the ALC, never lower it
BLOCK_TRAIN_ROWS = 200_000


class Attack(Protocol):
    """A pluggable attack: predict the secret code of a block of the original's rows
    (``-1`` = abstain) with a rank score."""

    def predict(self, targets: np.ndarray) -> Predictions: ...


class PerTargetAttack:
    """Adapter for an attack written one target at a time, as in the paper's ALCManager loop:
    ``fn(known_values) -> (secret_value, rank_score)`` or ``None`` to abstain. Values are the
    decoded labels (continuous known columns as numbers, a continuous secret as its bin
    label)."""

    def __init__(self, data: ALCData, secret: str, known: Sequence[str],
                 fn: Callable[[dict[str, Any]], tuple[Any, float] | None]) -> None:
        self.data, self.secret, self.known, self.fn = data, secret, list(known), fn
        self._lookup = {v: i for i, v in enumerate(data.labels[secret].tolist())}

    def predict(self, targets: np.ndarray) -> Predictions:
        t = self.data.original
        pred = np.full(len(targets), -1, np.int64)
        conf = np.zeros(len(targets))
        for i, row in enumerate(targets):  # the user's function is per target by contract
            known = {}
            for c in self.known:
                if c in self.data.values[t]:
                    known[c] = float(self.data.values[t][c][row])
                else:
                    code = int(self.data.codes[t][c][row])
                    known[c] = None if code < 0 else self.data.labels[c][code]  # type: ignore[assignment]
            answer = self.fn(known)
            if answer is None:
                continue
            value, score = answer
            if value not in self._lookup:
                raise InputError(f"ALC: the attack predicted {value!r}, which is not a value of "
                                 f"the secret '{self.secret}'")
            pred[i] = self._lookup[value]
            conf[i] = float(score)
        return Predictions(pred, conf)


@dataclass(frozen=True)
class ALCConfig:
    """Parameters of one ALC attack (defaults: the package's, docs/measures.md 6)."""

    prc: PRCParams = PRCParams()
    halting: str = "paper"  # or "package"
    checkpoint: int = 50
    tight_width: float = TIGHT_WIDTH
    loose_width: float = LOOSE_WIDTH
    loose_low_alc: float = 0.0
    loose_high_alc: float = 0.9
    tight_low_alc: float = 0.0
    tight_high_alc: float = 0.98
    ignore_expected_alc: float = 0.5
    loose_expected_alc: float = 0.75
    loose_expected_closeness: float = 0.05
    tight_expected_closeness: float = 0.01
    max_control_size: int = 1000
    max_control_fraction: float = 0.1
    max_attacks: int | None = 5000
    time_budget: float | None = None
    exposed_min_correct: int = 3
    exposed_alc: float = 0.4
    models: tuple[str, ...] = DEFAULT_MODELS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.halting not in ("paper", "package"):
            raise ConfigError(f"ALC: halting must be 'paper' or 'package', got {self.halting!r}")
        if self.checkpoint < 1:
            raise ConfigError("ALC: checkpoint must be at least 1")
        if self.max_attacks is not None and self.max_attacks < 1:
            raise ConfigError("ALC: max_attacks must be at least 1")


@dataclass(frozen=True)
class ALCResult:
    """One attack scenario's outcome (the ALC paper, section 5, the package's results row).

    ``alc`` is None when no precision/recall pair of a side reached significance
    (``halt_reason`` is then "insufficient_evidence" or the limit that stopped the attack).
    """

    secret: str
    known: tuple[str, ...]
    mode: str
    alc: float | None
    band: str
    halt_reason: str
    significance: str | None
    attack: PRPoint | None
    base: PRPoint | None
    n_attacks: int
    n_abstentions: int
    baseline: BaselineSelection | None
    attack_table: tuple[PRPoint, ...]
    base_table: tuple[PRPoint, ...]
    predictions: dict[str, np.ndarray]
    checkpoints: tuple[dict[str, Any], ...]
    held_back: int
    seconds: dict[str, float]
    warnings: tuple[str, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, with_predictions: bool = True) -> dict[str, Any]:
        """JSON-ready dict. Predictions carry row numbers and secret *codes*, never values.

        Wall-clock seconds stay out (``self.seconds``): the same seed gives the same bytes.
        """
        d = {
            "schema": "riskgate.alc/1",
            "secret": self.secret, "known": list(self.known), "mode": self.mode,
            "alc": self.alc, "band": self.band, "halt_reason": self.halt_reason,
            "significance": self.significance,
            "attack": self.attack.to_dict() if self.attack else None,
            "base": self.base.to_dict() if self.base else None,
            "n_attacks": self.n_attacks, "n_abstentions": self.n_abstentions,
            "baseline": None if self.baseline is None else {
                "model": self.baseline.model, "expected_prc": self.baseline.expected_prc,
                "scores": self.baseline.scores,
                "n_train": self.baseline.n_train, "n_test": self.baseline.n_test,
                "one_to_one_column": self.baseline.one_to_one_column,
                "errors": self.baseline.errors},
            "attack_table": [p.to_dict() for p in self.attack_table],
            "base_table": [p.to_dict() for p in self.base_table],
            "checkpoints": list(self.checkpoints), "held_back": self.held_back,
            "warnings": list(self.warnings),
            "parameters": self.parameters,
        }
        if with_predictions:
            d["predictions"] = {k: v for k, v in self.predictions.items()}
        return to_jsonable(d)


class _Halting:
    """The checkpoint rules (package) plus the exposed-group hold-back (paper)."""

    def __init__(self, cfg: ALCConfig, expected_prc: float, recall_scale: float) -> None:
        self.cfg = cfg
        self.expected = expected_prc
        self.scale = recall_scale
        self.best_base: PRPoint | None = None
        self.best_attack: PRPoint | None = None
        self.held_back = 0
        self.log: list[dict[str, Any]] = []

    def _best(self, conf: np.ndarray, correct: np.ndarray, width: float) -> PRPoint | None:
        return best_prc(conf, correct, width, self.cfg.prc, self.scale)

    def check(self, bc: np.ndarray, bk: np.ndarray, ac: np.ndarray, ak: np.ndarray
              ) -> str | None:
        cfg = self.cfg
        n = len(bc)
        base = self._best(bc, bk, cfg.tight_width)
        atk = self._best(ac, ak, cfg.tight_width)
        entry: dict[str, Any] = {"n": n}
        halt: str | None = None
        if base is None or atk is None:
            base_l = self._best(bc, bk, cfg.loose_width)
            atk_l = self._best(ac, ak, cfg.loose_width)
            if base_l is not None and atk_l is not None:
                high = alc_from_pr(atk_l.ci_low, atk_l.recall, base_l.ci_high, base_l.recall,
                                   cfg.prc)
                low = alc_from_pr(atk_l.ci_high, atk_l.recall, base_l.ci_low, base_l.recall,
                                  cfg.prc)
                entry.update(base_prc=base_l.prc, attack_prc=atk_l.prc, alc=alc(
                    atk_l.prc, base_l.prc, cfg.prc), alc_pessimistic=high, alc_optimistic=low,
                    level="loose")
                if high > cfg.loose_high_alc:
                    halt = "early_high_loose"
                elif low < cfg.loose_low_alc:
                    halt = "early_low_loose"
                base_ref = _optimistic_base(base_l, cfg)
            else:
                entry["level"] = "none"
                base_ref = _optimistic_base(base_l or base, cfg)
        else:
            value = alc(atk.prc, base.prc, cfg.prc)
            entry.update(base_prc=base.prc, attack_prc=atk.prc, alc=value, level="tight")
            base_ref = _optimistic_base(base, cfg)
            if value < cfg.tight_low_alc:
                halt = "early_low_tight"
            elif value > cfg.tight_high_alc:
                halt = "early_high_tight"
            elif self.best_base is None or self.best_attack is None:
                self.best_base, self.best_attack = base, atk
            else:
                b_gain = max(0.01, 0.05 * (1.0 - self.best_base.prc))
                a_gain = max(0.01, 0.05 * (1.0 - self.best_attack.prc))
                b_prog = base.prc - self.best_base.prc >= b_gain
                a_prog = atk.prc - self.best_attack.prc >= a_gain
                if base.prc > self.best_base.prc:
                    self.best_base = base
                if atk.prc > self.best_attack.prc:
                    self.best_attack = atk
                if not b_prog and not a_prog:
                    best_alc = alc(self.best_attack.prc, self.best_base.prc, cfg.prc)
                    gap = self.expected - self.best_base.prc
                    if best_alc < cfg.ignore_expected_alc:
                        halt = "diminishing_returns"
                    elif best_alc < cfg.loose_expected_alc and gap < cfg.loose_expected_closeness:
                        halt = "close_to_expected_loose"
                    elif best_alc >= cfg.loose_expected_alc and gap < cfg.tight_expected_closeness:
                        halt = "close_to_expected_tight"
        if halt and cfg.halting == "paper" and _says_safe(halt, entry.get("alc")):
            group = exposed_group(ac, ak, base_ref, cfg.prc, self.scale, cfg.tight_width,
                                  cfg.exposed_min_correct, cfg.exposed_alc)
            if group is not None:
                entry["held_back"] = {"halt": halt, "group_n": group.n,
                                      "group_correct": group.correct,
                                      "group_precision": round(group.precision_measured, 4),
                                      "group_recall": group.recall}
                self.held_back += 1
                halt = None
        entry["halt"] = halt
        self.log.append(entry)
        return halt


def _optimistic_base(point: PRPoint | None, cfg: ALCConfig) -> float:
    """The base PRC at the lower bound of its best pair: the reference an exposed group is
    measured against (as the package's early-low test uses the base's lower bound)."""
    if point is None:
        return 0.0
    return float(prc(point.ci_low, point.recall, cfg.prc))


def _says_safe(halt: str, value: float | None) -> bool:
    if halt in ("early_low_loose", "early_low_tight", "diminishing_returns"):
        return True
    return halt.startswith("close_to_expected") and (value is None or value < 0.5)


def control_size(n: int, max_size: int = 1000, max_fraction: float = 0.1) -> int:
    """docs/measures.md 6: 1000 if 0.1 N >= 1000, else floor(0.1 N) + 1."""
    return max_size if n * max_fraction >= max_size else int(n * max_fraction) + 1


def _swap_table(data: ALCData, rows: np.ndarray, fraction: float,
                rng: np.random.Generator) -> ALCData:
    """A non-member table for the prior approach: the given rows of the original with, per
    column, int(fraction n) random disjoint row pairs swapping their values (prep_anon.py)."""
    t = data.original
    n = len(rows)
    codes = {c: v[rows].copy() for c, v in data.codes[t].items()}
    values = {c: v[rows].copy() for c, v in data.values[t].items()}
    for c in data.columns:
        swap_arrays([codes[c]] + ([values[c]] if c in values else []), fraction, rng)
    return ALCData(names=data.names + ("prior",), kinds=data.kinds,
                   codes={**data.codes, "prior": codes}, values={**data.values, "prior": values},
                   labels=data.labels, n={**data.n, "prior": n}, household=data.household)


def run_alc(data: ALCData, secret: str, known: Sequence[str],
            config: ALCConfig = ALCConfig(), attack: Attack | None = None,
            targets: np.ndarray | None = None, recall: str = "targeted",
            baseline: str = "model", prior_swap_fraction: float = 0.1,
            progress: Callable[[int, int, str], None] | None = None) -> ALCResult:
    """:func:`_run_alc` inside the thread budget: its many small model fits take
    one thread per 100,000 original rows, within the process's budget (a gate's lower
    budget for parallel families stays in force); forests grow as many trees at once as the
    budget in force when the attack starts."""
    with tree_threads(current_limit() or 1), \
            thread_budget(model_threads(data.n[data.original]), models=True):
        return _run_alc(data, secret, known, config, attack, targets, recall, baseline,
                        prior_swap_fraction, progress)


def _target_pool(targets: np.ndarray | None, usable: np.ndarray, recall: str
                 ) -> tuple[str, np.ndarray, float]:
    """The mode, the rows that may be attacked and the recall's scale: random mode attacks
    every row with a secret; pre-targeted mode the targets among them, its recall relative to
    the targets (eq. 5) or to the whole original (eq. 4, ``recall="population"``)."""
    if targets is None:
        return "random", usable, 1.0
    pool = np.intersect1d(np.asarray(targets, dtype=np.int64), usable)
    if len(pool) == 0:
        raise InputError("ALC: the target selection matches no original row with a secret "
                         "value; widen the selection")
    return "pretargeted", pool, 1.0 if recall == "targeted" else len(pool) / len(usable)


def _block_baseline(data: ALCData, secret: str, known: Sequence[str], block: np.ndarray,
                    selection: Any, seed: int, prior_swap_fraction: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The baseline's predictions and confidences for one control block, trained without the
    block (and its households): the selected model (``selection``), or with none the prior
    approach, the same attack on a swapped copy of the rest."""
    t = data.original
    sec = data.codes[t][secret]
    train_mask = np.ones(data.n[t], dtype=bool)
    train_mask[block] = False
    if data.household is not None:
        hh = unique(data.household[block])
        train_mask &= ~np.isin(data.household, hh[hh >= 0])
    train_mask &= sec >= 0
    train = np.flatnonzero(train_mask)
    if selection is not None:
        if train.size > BLOCK_TRAIN_ROWS:  # a seeded sample, in row order (docs/measures.md 6)
            pick = np.random.default_rng([seed, block.size, 0xA1C]).choice(
                train.size, BLOCK_TRAIN_ROWS, replace=False)
            train = train[np.sort(pick)]
        model = BaselineModel(data, secret, known, selection.model, seed,
                              selection.one_to_one_column).fit(train)
        return model.predict(block)  # type: ignore[no-any-return]
    prior = _swap_table(data, train, prior_swap_fraction, rng)
    p = BestRowMatch(prior, secret, known, tables=["prior"]).predict(block)
    return (np.where(p.predicted >= 0, p.predicted, int(np.bincount(sec[train]).argmax())),
            np.ones(len(block)))


class _Attacking:
    """The attack loop's state: the predictions so far, checked against the halting rule at
    every checkpoint; ``halt`` names why it stopped (None while it runs)."""

    def __init__(self, atk: Any, sec: np.ndarray, cfg: ALCConfig, halting: _Halting, *,
                 prior: bool, limit: int, at_limit: str, started: float,
                 progress: Callable[[int, int, str], None] | None) -> None:
        self.atk, self.sec, self.cfg, self.halting = atk, sec, cfg, halting
        self.prior, self.limit, self.started, self.progress = prior, limit, started, progress
        self.rec: dict[str, list[np.ndarray]] = {k: [] for k in (
            "target", "true", "attack_predicted", "attack_confidence", "base_predicted",
            "base_confidence", "abstained")}
        self.done, self.seconds = 0, 0.0
        self.halt: str | None = None
        #: why the loop stops at ``limit``: every target attacked, or cfg.max_attacks
        self.at_limit = at_limit

    def attack_block(self, block: np.ndarray, b_pred: np.ndarray, b_conf: np.ndarray) -> None:
        """Attack the block's rows a checkpoint at a time until the block ends or it halts;
        an abstention takes the baseline's prediction at confidence 0."""
        cfg, rec, pos = self.cfg, self.rec, 0
        while pos < len(block) and self.halt is None:
            step = min(cfg.checkpoint - self.done % cfg.checkpoint, len(block) - pos,
                       self.limit - self.done)
            rows = block[pos:pos + step]
            ta = time.perf_counter()
            p = self.atk.predict(rows)
            self.seconds += time.perf_counter() - ta
            abst = p.predicted < 0
            rec["target"].append(rows)
            rec["true"].append(self.sec[rows])
            rec["attack_predicted"].append(np.where(abst, b_pred[pos:pos + step], p.predicted))
            rec["attack_confidence"].append(np.where(abst, 0.0, p.confidence))
            rec["base_predicted"].append(b_pred[pos:pos + step])
            rec["base_confidence"].append(b_conf[pos:pos + step])
            rec["abstained"].append(abst)
            pos += step
            self.done += step
            if self.done % cfg.checkpoint == 0:
                self._check()
            if self.halt is None and self.done >= self.limit:
                self.halt = self.at_limit
            if (self.halt is None and cfg.time_budget is not None
                    and time.perf_counter() - self.started > cfg.time_budget):
                self.halt = "time_budget"

    def _check(self) -> None:
        arr = {k: np.concatenate(v) for k, v in self.rec.items()}
        ac = np.ones(self.done) if self.prior else arr["attack_confidence"]
        self.halt = self.halting.check(arr["base_confidence"],
                                       arr["base_predicted"] == arr["true"], ac,
                                       arr["attack_predicted"] == arr["true"])
        if self.progress:
            self.progress(self.done, self.limit, self.halt or "running")


def _best_pair(a_conf: np.ndarray, a_ok: np.ndarray, b_conf: np.ndarray, b_ok: np.ndarray,
               cfg: ALCConfig, scale: float) -> tuple[Any, Any, str | None]:
    """The attack's and the baseline's best significant precision/recall pairs: within the
    tight interval width, else the loose one ("loose"), else none (None, None, None)."""
    for width, significance in ((cfg.tight_width, "tight"), (cfg.loose_width, "loose")):
        atk_best = best_prc(a_conf, a_ok, width, cfg.prc, scale)
        base_best = best_prc(b_conf, b_ok, width, cfg.prc, scale)
        if atk_best is not None and base_best is not None:
            return atk_best, base_best, significance
    return atk_best, base_best, None


def _run_alc(data: ALCData, secret: str, known: Sequence[str],
            config: ALCConfig = ALCConfig(), attack: Attack | None = None,
            targets: np.ndarray | None = None, recall: str = "targeted",
            baseline: str = "model", prior_swap_fraction: float = 0.1,
            progress: Callable[[int, int, str], None] | None = None) -> ALCResult:
    """Run one ALC attack: secret ``secret`` from the ``known`` columns.

    Args:
        data: the encoded tables (:func:`riskcore.alc.data.from_frames`).
        secret: the secret column (a continuous one is predicted as its bin).
        known: the attacker's known columns.
        config: loop, halting and PRC parameters; ``config.seed`` drives every random step.
        attack: the attack (default: :class:`BestRowMatch` on the released tables).
        targets: pre-targeted mode: the original's rows that may be attacked (None: random
            mode, every row).
        recall: pre-targeted recall: "targeted" (eq. 5, relative to the targets) or
            "population" (eq. 4, relative to the whole original).
        baseline: "model" (the paper's: the best model on the original without the targets)
            or "prior" (the ALC paper, section 6: the same attack on an anonymized non-member set,
            recall 1 on both sides).
        prior_swap_fraction: how the prior approach anonymizes the non-member set.
        progress: called as ``progress(done, planned, status)`` after every checkpoint.

    Returns:
        The :class:`ALCResult`.
    """
    t_start = time.perf_counter()
    warnings = list(data.check(secret, known))
    if baseline not in ("model", "prior"):
        raise ConfigError(f"ALC: baseline must be 'model' or 'prior', got {baseline!r}")
    if recall not in ("targeted", "population"):
        raise ConfigError(f"ALC: recall must be 'targeted' or 'population', got {recall!r}")
    cfg = config
    rng = np.random.default_rng(cfg.seed)
    t = data.original
    sec = data.codes[t][secret]
    usable = np.flatnonzero(sec >= 0)
    n_missing = data.n[t] - len(usable)
    if n_missing:
        warnings.append(f"{n_missing} original row(s) have no value for the secret "
                        f"'{secret}': they are neither attacked nor used by the baseline")
    mode, pool, recall_scale = _target_pool(targets, usable, recall)
    cs = control_size(len(usable), cfg.max_control_size, cfg.max_control_fraction)
    if len(usable) - min(cs, len(pool)) < 2 * cfg.checkpoint and baseline == "model":
        raise InputError(f"ALC: the original has {len(usable)} usable rows, too few for a "
                         f"control block of {cs} plus a training set for the baseline; an ALC "
                         f"needs at least {cs + 2 * cfg.checkpoint} rows")
    order = rng.permutation(pool)
    blocks = [order[i:i + cs] for i in range(0, len(order), cs)]

    selection = None
    expected = 0.0
    t0 = time.perf_counter()
    if baseline == "model":
        selection = select_baseline(data, secret, known, usable, cfg.seed, cfg.models, cfg.prc)
        expected = selection.expected_prc
    t_select = time.perf_counter() - t0
    scale = 1.0 if baseline == "prior" else recall_scale
    loop = _Attacking(attack if attack is not None else BestRowMatch(data, secret, known),
                      sec, cfg, _Halting(cfg, expected, scale), prior=baseline == "prior",
                      limit=len(pool) if cfg.max_attacks is None
                      else min(len(pool), cfg.max_attacks),
                      at_limit="exhausted" if cfg.max_attacks is None
                      or cfg.max_attacks >= len(pool) else "max_attacks",
                      started=t_start, progress=progress)
    t_fit = 0.0
    for block in blocks:
        tf = time.perf_counter()
        b_pred, b_conf = _block_baseline(data, secret, known, block, selection, cfg.seed,
                                         prior_swap_fraction, rng)
        t_fit += time.perf_counter() - tf
        loop.attack_block(block, b_pred, b_conf)
        if loop.halt is not None:
            break
    halt = loop.halt or "exhausted"
    done = loop.done
    arr = {k: np.concatenate(v) if v else np.empty(0) for k, v in loop.rec.items()}
    a_conf = np.ones(done) if baseline == "prior" else arr["attack_confidence"]
    a_ok = arr["attack_predicted"] == arr["true"]
    b_ok = arr["base_predicted"] == arr["true"]
    atk_best, base_best, significance = _best_pair(a_conf, a_ok, arr["base_confidence"], b_ok,
                                                   cfg, scale)
    value = None
    if atk_best is None or base_best is None:
        if halt in ("exhausted",):
            halt = INSUFFICIENT
        warnings.append("no precision/recall pair reached significance: insufficient evidence "
                        "(more targets are needed); this is never a pass")
    else:
        value = alc(atk_best.prc, base_best.prc, cfg.prc)
    t_attack = loop.seconds
    predictions = {
        "target": arr["target"].astype(np.int64), "true": arr["true"].astype(np.int64),
        "attack_predicted": arr["attack_predicted"].astype(np.int64),
        "attack_rank_score": a_conf, "attack_correct": a_ok,
        "abstained": arr["abstained"].astype(bool),
        "base_predicted": arr["base_predicted"].astype(np.int64),
        "base_confidence": arr["base_confidence"], "base_correct": b_ok,
    }
    return ALCResult(
        secret=secret, known=tuple(known), mode=mode if baseline == "model" else f"{mode}/prior",
        alc=value, band=band(value), halt_reason=halt, significance=significance,
        attack=atk_best, base=base_best, n_attacks=done,
        n_abstentions=int(arr["abstained"].sum()) if done else 0, baseline=selection,
        attack_table=tuple(prc_table(a_conf, a_ok, cfg.prc, scale)),
        base_table=tuple(prc_table(arr["base_confidence"], b_ok, cfg.prc, scale)),
        predictions=predictions, checkpoints=tuple(loop.halting.log),
        held_back=loop.halting.held_back,
        seconds={"total": round(time.perf_counter() - t_start, 3),
                 "baseline_selection": round(t_select, 3), "baseline_fits": round(t_fit, 3),
                 "attack": round(t_attack, 3)},
        warnings=tuple(warnings),
        parameters={"seed": cfg.seed, "halting": cfg.halting, "alpha": cfg.prc.alpha,
                    "r_min": cfg.prc.r_min, "abs_weight": cfg.prc.abs_weight,
                    "control_size": cs, "max_attacks": cfg.max_attacks,
                    "time_budget": cfg.time_budget, "recall": recall, "baseline": baseline,
                    "n_targets": int(len(pool)), "n_records": int(len(usable))})
