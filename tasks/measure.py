"""Prefect tasks: encode once, then one task per measure family (deterministic: no retries)."""

from __future__ import annotations

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.gate.config import Gate
from riskcore.gate.encoding import encode_measured
from riskcore.gate.run import measure
from riskcore.measures import MeasureInputs
from riskcore.measures.family import Params
from riskcore.results import MeasureResult
from riskcore.threads import Beside

from .common import Held, clean_failure


@task(name="encode", cache_policy=NO_CACHE, retries=0)
@clean_failure
def encode_inputs(gate: Held[Gate], frames: Held[dict[str, pd.DataFrame]]) -> MeasureInputs:
    return encode_measured(gate.value, frames.value)


@task(name="encode", cache_policy=NO_CACHE, retries=0)
@clean_failure
def encode_beside(work: Held[Beside[MeasureInputs]]) -> MeasureInputs:
    """The encoding that began in a thread beside the validate task, once the checks passed:
    this task waits for the rest of it and fails with its error, as the encode task does."""
    return work.value.wait()


@task(name="measure", task_run_name="measure-{name}", cache_policy=NO_CACHE, retries=0)
@clean_failure
def run_family(name: str, inputs: Held[MeasureInputs], params: Held[Params]) -> MeasureResult:
    return measure(name, inputs.value, params.value)
