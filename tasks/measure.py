"""Prefect tasks: encode once, then one task per measure (deterministic: no retries)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.gate import prepare_inputs
from riskcore.gateconfig import GateConfig
from riskcore.measures import MeasureInputs, run_measure
from riskcore.results import MeasureResult


@task(name="encode", cache_policy=NO_CACHE)
def encode_inputs(cfg: GateConfig, frames: dict[str, pd.DataFrame]) -> MeasureInputs:
    return prepare_inputs(cfg, frames)


@task(name="measure", task_run_name="measure-{name}", cache_policy=NO_CACHE, retries=0)
def measure(name: str, inputs: MeasureInputs, params: dict[str, Any]) -> MeasureResult:
    return run_measure(name, inputs, params)
