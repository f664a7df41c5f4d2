"""Policy: thresholds, review bands, fail-closed verdicts."""

import pytest

from riskcore.gate.policy import CheckVerdict, Verdict, decide, parse_policy
from riskcore.results import MeasureResult, Status, not_computable


def result(measure, **figures):
    return MeasureResult(measure=measure, figures=figures)


POLICY = parse_policy({"version": 1, "checks": [
    {"figure": "k_anonymity.k", "min": 5},
    {"figure": "alc.max", "max": 0.5, "review_max": 0.75},
    "reid.pRb <= 0.2",
]})


@pytest.mark.parametrize("k,alc,prb,verdict", [
    (5, 0.5, 0.2, Verdict.APPROVED),
    (5, 0.6, 0.2, Verdict.NEEDS_REVIEW),
    (5, 0.76, 0.2, Verdict.REJECTED),
    (4, 0.1, 0.1, Verdict.REJECTED),
    (5, 0.1, 0.21, Verdict.REJECTED),
])
def test_thresholds_and_review_band(k, alc, prb, verdict):
    d = decide(POLICY, {"k_anonymity": result("k_anonymity", k=k), "alc": result("alc", max=alc),
                        "reid": result("reid", pRb=prb)})
    assert d.verdict is verdict


def test_missing_or_not_computable_figure_never_passes():
    d = decide(POLICY, {"k_anonymity": result("k_anonymity", k=9),
                        "alc": not_computable("alc", "too few attacks",
                                              status=Status.INSUFFICIENT_EVIDENCE),
                        "reid": result("reid", pRa=0.0)})
    assert d.verdict is Verdict.NEEDS_REVIEW
    assert [c.verdict for c in d.checks] == [CheckVerdict.PASS, CheckVerdict.INSUFFICIENT,
                                             CheckVerdict.INSUFFICIENT]
    strict = parse_policy({"version": 1, "on_insufficient": "reject",
                           "checks": ["k_anonymity.k >= 5"]})
    assert decide(strict, {}).verdict is Verdict.REJECTED


def test_any_error_is_error():
    d = decide(POLICY, {"k_anonymity": result("k_anonymity", k=9)}, errors={"reid": "boom"})
    assert d.verdict is Verdict.ERROR and Verdict.ERROR.exit_code == 3
