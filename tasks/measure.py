"""Prefect tasks: encode once, then one task per measure family (deterministic: no retries)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.states import Cancelled, State

from riskcore.gate.config import Gate
from riskcore.gate.run import ChecksOutcome, encode_measured, measure
from riskcore.measures import MeasureInputs
from riskcore.measures.family import Params
from riskcore.results import MeasureResult

from .common import Held, clean_failure


@task(name="encode", cache_policy=NO_CACHE, retries=0)
@clean_failure
def encode_inputs(gate: Held[Gate], frames: Held[dict[str, pd.DataFrame]]) -> MeasureInputs:
    return encode_measured(gate.value, frames.value)


@task(name="encode", cache_policy=NO_CACHE, retries=0)
def encode_beside_checks(gate: Held[Gate], frames: Held[dict[str, pd.DataFrame]],
                         checks: Held[ChecksOutcome]) -> Any:
    """:func:`encode_inputs` run beside the validate task. If it fails and the checks failed
    too, the data they rejected is what broke it: the task ends Cancelled ("not needed"),
    not Failed, and the run's verdict is the checks' REJECTED; if the checks passed, its
    failure stands, as the encode task's always did."""
    try:
        result = encode_inputs.fn(gate, frames)
    except Exception:
        if checks.value.passed():
            raise
        return _not_needed()
    if isinstance(result, State) and result.is_failed() and not checks.value.passed():
        return _not_needed()
    return result


def _not_needed() -> State:
    return Cancelled(name="Not needed", message="not encoded: the cleanliness checks "
                     "rejected the data, which is never measured")


@task(name="measure", task_run_name="measure-{name}", cache_policy=NO_CACHE, retries=0)
@clean_failure
def run_family(name: str, inputs: Held[MeasureInputs], params: Held[Params]) -> MeasureResult:
    return measure(name, inputs.value, params.value)
