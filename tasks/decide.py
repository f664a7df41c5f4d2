"""Prefect task: apply the release policy to the measures' results."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.policy import Decision, Policy, decide
from riskcore.results import MeasureResult


@task(name="decide", cache_policy=NO_CACHE)
def decide_release(policy: Policy, results: dict[str, MeasureResult], errors: dict[str, str],
                   unavailable: dict[str, str]) -> Decision:
    return decide(policy, results, errors, unavailable)
