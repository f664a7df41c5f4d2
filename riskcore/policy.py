"""Release policy: thresholds -> per-check verdicts -> one decision (SPEC section 8).

A policy is a versioned YAML document::

    version: 1
    on_insufficient: review      # a figure that could not be computed: review | reject
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
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .results import MeasureResult, Status

POLICY_VERSION = 1
_COMPACT = re.compile(r"^\s*([A-Za-z_][\w.\-\[\]]*)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


class Verdict(str, Enum):
    APPROVED = "APPROVED"
    NEEDS_REVIEW = "NEEDS_REVIEW"
    REJECTED = "REJECTED"
    ERROR = "ERROR"

    @property
    def exit_code(self) -> int:
        return {"APPROVED": 0, "REJECTED": 1, "NEEDS_REVIEW": 2, "ERROR": 3}[self.value]


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

    @property
    def measures(self) -> set[str]:
        return {c.measure for c in self.checks}


@dataclass(frozen=True)
class CheckOutcome:
    id: str
    figure: str
    value: float | None
    threshold: str
    verdict: CheckVerdict
    message: str

    def to_dict(self) -> dict[str, Any]:
        value = self.value if self.value is None or math.isfinite(self.value) else None
        return {"id": self.id, "figure": self.figure, "value": value,
                "threshold": self.threshold, "verdict": self.verdict.value,
                "message": self.message}


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    checks: tuple[CheckOutcome, ...]
    reasons: tuple[str, ...] = ()
    review: Mapping[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value,
                "checks": [c.to_dict() for c in self.checks],
                "reasons": list(self.reasons),
                "review": dict(self.review) if self.review else None}


def parse_policy(data: Any, name: str = "policy") -> Policy:
    """Validate a policy mapping (already loaded with yaml.safe_load)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name}: a policy must be a mapping with 'version' and 'checks'")
    unknown = set(data) - {"version", "checks", "on_insufficient", "name", "description"}
    if unknown:
        raise ConfigError(f"{name}: unknown policy key(s) {sorted(unknown)}")
    version = data.get("version", POLICY_VERSION)
    if version != POLICY_VERSION:
        raise ConfigError(f"{name}: policy version {version} is not supported (use 1)")
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise ConfigError(f"{name}: 'checks' must be a non-empty list")
    checks = []
    for i, raw in enumerate(raw_checks):
        checks.append(_parse_check(raw, f"{name}: check {i + 1}"))
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{name}: check ids must be unique, got {ids}")
    on_insufficient = data.get("on_insufficient", "review")
    if on_insufficient not in ("review", "reject"):
        raise ConfigError(f"{name}: on_insufficient must be 'review' or 'reject'")
    return Policy(checks=tuple(checks), version=version,
                  on_insufficient=CheckVerdict.REVIEW if on_insufficient == "review"
                  else CheckVerdict.FAIL, name=str(data.get("name", name)))


def _parse_check(raw: Any, where: str) -> Check:
    if isinstance(raw, str):
        m = _COMPACT.match(raw)
        if not m:
            raise ConfigError(f"{where}: cannot read '{raw}'; write e.g. 'reid.pRb <= 0.2'")
        figure, op, num = m.group(1), m.group(2), float(m.group(3))
        strict = op in ("<", ">")
        if op in ("<=", "<"):
            return Check(figure=figure, max=num, strict=strict, id=figure)
        return Check(figure=figure, min=num, strict=strict, id=figure)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a check is a mapping or a string like 'reid.pRb <= 0.2'")
    allowed = {"figure", "min", "max", "review_min", "review_max", "strict", "id", "description"}
    unknown = set(raw) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    figure = raw.get("figure")
    if not isinstance(figure, str) or "." not in figure:
        raise ConfigError(f"{where}: 'figure' must be 'measure.figure', e.g. 'reid.pRb'")
    nums = {}
    for key in ("min", "max", "review_min", "review_max"):
        if raw.get(key) is not None:
            try:
                nums[key] = float(raw[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: '{key}' must be a number") from None
    if "min" not in nums and "max" not in nums:
        raise ConfigError(f"{where}: give 'min' or 'max' for {figure}")
    if "review_max" in nums and ("max" not in nums or nums["review_max"] < nums["max"]):
        raise ConfigError(f"{where}: review_max needs max and must be >= max")
    if "review_min" in nums and ("min" not in nums or nums["review_min"] > nums["min"]):
        raise ConfigError(f"{where}: review_min needs min and must be <= min")
    return Check(figure=figure, strict=bool(raw.get("strict", False)),
                 id=str(raw.get("id") or figure), description=str(raw.get("description", "")),
                 **nums)


def load_policy(source: str | Path | Mapping[str, Any], storage_options=None) -> Policy:
    """Load a policy from a mapping, a local path or any fsspec URL (YAML, loaded safely)."""
    if isinstance(source, Mapping):
        return parse_policy(source)
    import fsspec

    name = str(source)
    try:
        with fsspec.open(name, "r", encoding="utf-8", **dict(storage_options or {})) as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"policy file '{name}' does not exist") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"policy file '{name}' is not valid YAML: {exc}") from None
    return parse_policy(data, name=Path(name).name)


def decide(policy: Policy, results: Mapping[str, MeasureResult],
           errors: Mapping[str, str] | None = None,
           unavailable: Mapping[str, str] | None = None) -> Decision:
    """Apply the policy to the measures' results.

    Args:
        policy: the release policy.
        results: measure name -> result.
        errors: measure name -> error message for measures that raised.
        unavailable: measure name -> why it was not run (e.g. not in this riskgate version).
    """
    errors = dict(errors or {})
    unavailable = dict(unavailable or {})
    outcomes = []
    for check in policy.checks:
        name = check.measure
        thr = check.threshold_text()
        if name in errors:
            outcomes.append(CheckOutcome(check.id, check.figure, None, thr, CheckVerdict.ERROR,
                                         f"measure '{name}' failed: {errors[name]}"))
            continue
        result = results.get(name)
        if result is None:
            why = unavailable.get(name, f"measure '{name}' was not run")
            outcomes.append(CheckOutcome(check.id, check.figure, None, thr,
                                         CheckVerdict.INSUFFICIENT, why))
            continue
        if result.status is not Status.OK:
            outcomes.append(CheckOutcome(
                check.id, check.figure, None, thr, CheckVerdict.INSUFFICIENT,
                f"{name}: {result.status.value}: {result.reason or 'no reason given'}"))
            continue
        value = result.figures.get(check.figure_name)
        if value is None or not math.isfinite(float(value)):
            known = ", ".join(sorted(result.figures)) or "none"
            outcomes.append(CheckOutcome(
                check.id, check.figure, None, thr, CheckVerdict.INSUFFICIENT,
                f"figure '{check.figure_name}' is not available from '{name}' (figures: {known})"))
            continue
        verdict = check.evaluate(float(value))
        message = {CheckVerdict.PASS: "within the threshold",
                   CheckVerdict.REVIEW: "in the review band: a person must decide",
                   CheckVerdict.FAIL: "outside the threshold"}[verdict]
        outcomes.append(CheckOutcome(check.id, check.figure, float(value), thr, verdict, message))

    reasons = []
    for name, msg in errors.items():
        if name not in policy.measures:
            reasons.append(f"measure '{name}' failed: {msg}")
    verdicts = [o.verdict for o in outcomes]
    insufficient_as = policy.on_insufficient
    effective = [insufficient_as if v is CheckVerdict.INSUFFICIENT else v for v in verdicts]
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
                           + (f" (value {o.value:.6g}, threshold {o.threshold})"
                              if o.value is not None else ""))
    return Decision(verdict=verdict, checks=tuple(outcomes), reasons=tuple(reasons))


def fixed_decision(verdict: Verdict, reasons: list[str]) -> Decision:
    """A decision reached before the policy could be applied (dirty data, load errors)."""
    return Decision(verdict=verdict, checks=(), reasons=tuple(reasons))
