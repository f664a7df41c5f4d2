"""Release policy: thresholds -> per-check verdicts -> one decision (docs/measures.md 8).

A policy is a versioned YAML document::

    version: 1
    on_insufficient: review      # a figure that could not be computed: review | reject
    on_inconclusive: review      # an attack no better than its baseline: review | pass
                                 # (default: review when a column was not fully comparable)
    checks:
      - figure: k_anonymity.k
        min: 5                   # pass when value >= 5
      - figure: reid.pRb
        max: 0.2                 # pass when value <= 0.2
      - figure: alc.max
        max: 0.5                 # pass at or below 0.5 ...
        review_max: 0.75         # ... needs review up to 0.75, rejected above
      - "reid.jRc <= 0.05"       # compact form

The decision is APPROVED only when every check passes. Any error makes it ERROR; a failed check
REJECTED; a check in its review band, or whose figure is missing or not computable (insufficient
evidence never counts as a pass), NEEDS_REVIEW (or REJECTED with ``on_insufficient: reject``).
A measure that ran and shows severe disclosure (its family's alarm) but has no check in the
policy is not ignored: it adds a review outcome with the reason.

Every number is validated when the policy is loaded: finite, min <= max, review bands outside the
pass band; figure names are checked against the measure families by the gate config's loader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import ConfigError
from ..results import MeasureResult, Record, Status
from ..verdict import Verdict

POLICY_VERSION = 1
_COMPACT = re.compile(r"^\s*([A-Za-z_][\w.\-\[\]]*)\s*(<=|>=|<|>)\s*(\S+)\s*$")
_CHECK_KEYS = ("figure", "min", "max", "review_min", "review_max", "strict", "id",
               "description")


class CheckVerdict(str, Enum):
    PASS = "pass"
    REVIEW = "review"
    FAIL = "fail"
    INSUFFICIENT = "insufficient"
    ERROR = "error"


@dataclass(frozen=True)
class Check:
    """One policy check on one figure (``measure.figure``)."""

    figure: str
    min: float | None = None
    max: float | None = None
    review_min: float | None = None
    review_max: float | None = None
    strict: bool = False
    id: str = ""
    description: str = ""

    @property
    def measure(self) -> str:
        return self.figure.split(".", 1)[0]

    @property
    def figure_name(self) -> str:
        return self.figure.split(".", 1)[1] if "." in self.figure else ""

    def threshold_text(self) -> str:
        parts = []
        lt, gt = ("<", ">") if self.strict else ("<=", ">=")
        if self.min is not None:
            parts.append(f"{gt} {self.min:g}")
        if self.max is not None:
            parts.append(f"{lt} {self.max:g}")
        if self.review_min is not None:
            parts.append(f"review down to {self.review_min:g}")
        if self.review_max is not None:
            parts.append(f"review up to {self.review_max:g}")
        return ", ".join(parts)

    def evaluate(self, value: float) -> CheckVerdict:
        def ok_max(v: float, bound: float) -> bool:
            return v < bound if self.strict else v <= bound

        def ok_min(v: float, bound: float) -> bool:
            return v > bound if self.strict else v >= bound

        passed = (self.max is None or ok_max(value, self.max)) and (
            self.min is None or ok_min(value, self.min))
        if passed:
            return CheckVerdict.PASS
        in_review = (self.review_max is not None and self.max is not None
                     and value > self.max and value <= self.review_max) or (
            self.review_min is not None and self.min is not None
            and value < self.min and value >= self.review_min)
        return CheckVerdict.REVIEW if in_review else CheckVerdict.FAIL


@dataclass(frozen=True)
class Policy:
    checks: tuple[Check, ...]
    version: int = POLICY_VERSION
    on_insufficient: CheckVerdict = CheckVerdict.REVIEW
    name: str = "policy"
    #: "review", "pass", or None: review only when the attack's columns were not fully
    #: comparable with the release (riskcore.generalization)
    on_inconclusive: str | None = None
    #: the SHA-256 of the policy document (its text, or canonical JSON of an inline mapping)
    sha256: str | None = None

    @property
    def measures(self) -> set[str]:
        return {c.measure for c in self.checks}


@dataclass(frozen=True)
class CheckOutcome(Record):
    """One check's outcome; ``min``/``max`` are the check's bounds (for plots), ``kind`` is
    "check" for a policy check, "alarm" for an unchecked family's alarm and "claim" for a
    claim of the config the data refutes."""

    id: str
    figure: str
    value: float | None
    threshold: str
    verdict: CheckVerdict
    message: str
    min: float | None = None
    max: float | None = None
    kind: str = "check"

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if self.value is not None and not math.isfinite(self.value):
            d["value"] = None
        return d


@dataclass(frozen=True)
class Decision(Record):
    verdict: Verdict
    checks: tuple[CheckOutcome, ...]
    reasons: tuple[str, ...] = ()
    review: Mapping[str, Any] | None = field(default=None)

    @property
    def under_review(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.verdict in (CheckVerdict.REVIEW,
                                                         CheckVerdict.INSUFFICIENT)]


def _number(raw: Any, key: str, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ConfigError(f"{where}: '{key}' must be a number, got {type(raw).__name__}")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{where}: '{key}' must be a number, got '{raw}'") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: '{key}' must be a finite number, got {raw!r}")
    return value


def load_policy(source: Any, storage_options: Mapping[str, Any] | None = None,
                name: str | None = None) -> Policy:
    """A policy from a mapping, or from a YAML file at a path or any fsspec URL."""
    from dataclasses import replace

    from .documents import mapping_digest, read_document_digest

    if isinstance(source, str):
        from ..redact import redact_text

        data, digest = read_document_digest(source, storage_options, "policy file")
        return replace(parse_policy(data, name or f"policy file '{redact_text(source)}'"),
                       sha256=digest)
    return replace(parse_policy(source, name or "policy"), sha256=mapping_digest(source))


def parse_policy(data: Any, name: str = "policy") -> Policy:
    """Validate a policy mapping (already loaded safely)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name}: a policy must be a mapping with 'version' and 'checks'")
    allowed = {"version", "checks", "on_insufficient", "on_inconclusive", "name", "description"}
    unknown = set(map(str, data)) - allowed
    if unknown:
        raise ConfigError(f"{name}: unknown policy key(s) {sorted(unknown)} (allowed: "
                          f"{', '.join(sorted(allowed))})")
    version = data.get("version", POLICY_VERSION)
    if version != POLICY_VERSION:
        raise ConfigError(f"{name}: policy version {version!r} is not supported (use 1)")
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise ConfigError(f"{name}: 'checks' must be a non-empty list")
    checks = [_parse_check(raw, f"{name}: check {i + 1}") for i, raw in enumerate(raw_checks)]
    ids = [c.id for c in checks]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"{name}: check ids must be unique; repeated: {dup} (give each "
                          "check on the same figure an 'id')")
    on_insufficient = data.get("on_insufficient", "review")
    if on_insufficient not in ("review", "reject"):
        raise ConfigError(f"{name}: on_insufficient must be 'review' or 'reject', got "
                          f"{on_insufficient!r}")
    on_inconclusive = data.get("on_inconclusive")
    if on_inconclusive not in (None, "review", "pass"):
        raise ConfigError(f"{name}: on_inconclusive must be 'review' or 'pass', got "
                          f"{on_inconclusive!r}")
    return Policy(checks=tuple(checks), version=POLICY_VERSION,
                  on_insufficient=CheckVerdict.REVIEW if on_insufficient == "review"
                  else CheckVerdict.FAIL, name=name, on_inconclusive=on_inconclusive)


def _parse_check(raw: Any, where: str) -> Check:
    if isinstance(raw, str):
        m = _COMPACT.match(raw)
        if not m:
            raise ConfigError(f"{where}: cannot read '{raw}'; write e.g. 'reid.pRb <= 0.2'")
        figure, op, num = m.group(1), m.group(2), _number(m.group(3), "threshold", where)
        if "." not in figure:
            raise ConfigError(f"{where}: '{figure}' must be 'measure.figure', e.g. 'reid.pRb'")
        strict = op in ("<", ">")
        if op in ("<=", "<"):
            return Check(figure=figure, max=num, strict=strict, id=figure)
        return Check(figure=figure, min=num, strict=strict, id=figure)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a check is a mapping or a string like 'reid.pRb <= 0.2'")
    unknown = set(map(str, raw)) - set(_CHECK_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: "
                          f"{', '.join(_CHECK_KEYS)}")
    figure = raw.get("figure")
    if not isinstance(figure, str) or "." not in figure:
        raise ConfigError(f"{where}: 'figure' must be 'measure.figure', e.g. 'reid.pRb'")
    nums = {key: _number(raw[key], key, where) for key in ("min", "max", "review_min",
                                                           "review_max")
            if raw.get(key) is not None}
    if "min" not in nums and "max" not in nums:
        raise ConfigError(f"{where}: give 'min' or 'max' for {figure}")
    if "min" in nums and "max" in nums and nums["min"] > nums["max"]:
        raise ConfigError(f"{where}: min ({nums['min']:g}) is above max ({nums['max']:g}) for "
                          f"{figure}: no value could pass")
    if "review_max" in nums and ("max" not in nums or nums["review_max"] < nums["max"]):
        raise ConfigError(f"{where}: review_max needs max and must be >= max")
    if "review_min" in nums and ("min" not in nums or nums["review_min"] > nums["min"]):
        raise ConfigError(f"{where}: review_min needs min and must be <= min")
    strict = raw.get("strict", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"{where}: 'strict' must be true or false")
    return Check(figure=figure, strict=strict, id=str(raw.get("id") or figure),
                 description=str(raw.get("description", "")), **nums)


def _unavailable_reason(result: MeasureResult, name: str) -> str:
    reason = result.unavailable.get(name)
    if reason:
        return f"figure '{name}' of '{result.measure}' is not available: {reason}"
    if name in result.figures:
        return f"figure '{name}' of '{result.measure}' could not be computed for this data"
    return f"figure '{name}' is not reported by '{result.measure}'"


def _inconclusive(policy: Policy, result: MeasureResult) -> str | None:
    """Why a passing attack figure needs a person: the attack did no better than its random
    baseline (anonymeter's invalid assessment), and the policy says so, or by default its
    columns were not fully comparable with the release."""
    if not result.figures.get("inconclusive") or policy.on_inconclusive == "pass":
        return None
    partly = list(result.details.get("partly_comparable") or [])
    if policy.on_inconclusive is None and not partly:
        return None
    cols = f"; columns not fully comparable with the release: {partly}" if partly else ""
    return (f"{result.measure}: inconclusive: the attack did no better than its random "
            f"baseline, which is not evidence of safety{cols} (declare the generalization, "
            "or set on_inconclusive: pass in the policy)")


def _axis_words(measure: str) -> str:
    """What a failed check on ``measure`` says of the release: not safe, or not useful."""
    from ..measures import BY_NAME

    fam = BY_NAME.get(measure)
    return "not useful" if fam is not None and fam.axis == "utility" else "not safe"


def _check_outcome(policy: Policy, check: Check, results: Mapping[str, MeasureResult],
                   errors: Mapping[str, str], unavailable: Mapping[str, str]) -> CheckOutcome:
    """One check of the policy against its measure's result: ERROR when the measure failed,
    INSUFFICIENT when it did not run, could not measure or left the figure unmeasured, else
    the threshold's verdict (a pass the family calls inconclusive goes to review)."""
    name = check.measure
    thr = check.threshold_text()
    lo, hi = check.min, check.max

    def without_value(verdict: CheckVerdict, why: str) -> CheckOutcome:
        return CheckOutcome(check.id, check.figure, None, thr, verdict, why, min=lo, max=hi)

    if name in errors:
        return without_value(CheckVerdict.ERROR, f"measure '{name}' failed: {errors[name]}")
    result = results.get(name)
    if result is None:
        return without_value(CheckVerdict.INSUFFICIENT,
                             unavailable.get(name, f"measure '{name}' was not run"))
    if result.status is not Status.OK:
        return without_value(CheckVerdict.INSUFFICIENT, f"{name}: {result.status.value}: "
                             f"{result.reason or 'no reason given'}")
    value = result.figures.get(check.figure_name)
    if value is None or not math.isfinite(float(value)):
        return without_value(CheckVerdict.INSUFFICIENT,
                             _unavailable_reason(result, check.figure_name))
    check_verdict = check.evaluate(float(value))
    message = {CheckVerdict.PASS: "within the threshold",
               CheckVerdict.REVIEW: "in the review band: a person must decide",
               CheckVerdict.FAIL: f"outside the threshold: {_axis_words(name)}"
               }[check_verdict]
    inconclusive = _inconclusive(policy, result)
    if check_verdict is CheckVerdict.PASS and inconclusive is not None:
        check_verdict = CheckVerdict.REVIEW
        message = inconclusive
    return CheckOutcome(check.id, check.figure, float(value), thr, check_verdict, message,
                        min=lo, max=hi)


def decide(policy: Policy, results: Mapping[str, MeasureResult],
           errors: Mapping[str, str] | None = None,
           unavailable: Mapping[str, str] | None = None,
           alarms: Mapping[str, Callable[[MeasureResult], str | None]] | None = None,
           refutations: Mapping[str, Callable[[MeasureResult], str | None]] | None = None
           ) -> Decision:
    """Apply the policy to the measures' results.

    Args:
        policy: the release policy.
        results: measure name -> result.
        errors: measure name -> error message for measures that raised.
        unavailable: measure name -> why it was not run.
        alarms: measure name -> the family's alarm; a family the policy does not check whose
            alarm fires adds a review outcome (severe disclosure is never passed silently).
        refutations: measure name -> the family's check of a claim the config makes (a
            claimed epsilon); a claim the data refutes adds a failed outcome, checked or not.
    """
    errors = dict(errors or {})
    unavailable = dict(unavailable or {})
    outcomes = [_check_outcome(policy, check, results, errors, unavailable)
                for check in policy.checks]
    for name, refute in (refutations or {}).items():
        result = results.get(name)
        refuted = refute(result) if result is not None and result.status is Status.OK \
            else None
        if refuted:
            outcomes.append(CheckOutcome(
                f"{name}.claim", f"{name}.epsilon_excess",
                result.figures.get("epsilon_excess") if result is not None else None,
                "<= 0 (the config's claim)", CheckVerdict.FAIL, refuted, kind="claim"))
    for name, alarm in (alarms or {}).items():
        result = results.get(name)
        if name in policy.measures or result is None or result.status is not Status.OK:
            continue
        alarm_text = alarm(result)
        if alarm_text:
            outcomes.append(CheckOutcome(
                f"{name}.alarm", f"{name}.alarm", None, "no check in the policy",
                CheckVerdict.REVIEW, f"{alarm_text}; the policy has no check on '{name}', so a "
                "person must decide (add a check to the policy)", kind="alarm"))

    reasons = [f"measure '{name}' failed: {msg}" for name, msg in errors.items()
               if name not in policy.measures]
    effective = [policy.on_insufficient if o.verdict is CheckVerdict.INSUFFICIENT else o.verdict
                 for o in outcomes]
    if errors or CheckVerdict.ERROR in effective:
        verdict = Verdict.ERROR
    elif CheckVerdict.FAIL in effective:
        verdict = Verdict.REJECTED
    elif CheckVerdict.REVIEW in effective:
        verdict = Verdict.NEEDS_REVIEW
    else:
        verdict = Verdict.APPROVED
    for o in outcomes:
        if o.verdict is not CheckVerdict.PASS:
            reasons.append(f"{o.id}: {o.verdict.value}: {o.message}"
                           + (f" (value {o.value:.4g}, threshold {o.threshold})"
                              if o.value is not None else ""))
    return Decision(verdict=verdict, checks=tuple(outcomes), reasons=tuple(reasons))


def fixed_decision(verdict: Verdict, reasons: list[str]) -> Decision:
    """A decision reached before the policy could be applied (dirty data, load errors)."""
    return Decision(verdict=verdict, checks=(), reasons=tuple(reasons))
