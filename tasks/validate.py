"""Prefect task: the cleanliness checks (Great Expectations) over every input table."""

from __future__ import annotations

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.gate.cleanliness import CleanlinessReport
from riskcore.gate.config import Gate
from riskcore.gate.run import validate

from .common import Held, clean_failure


@task(name="validate", cache_policy=NO_CACHE, retries=0)
@clean_failure
def validate_inputs(gate: Held[Gate], frames: Held[dict[str, pd.DataFrame]]
                    ) -> CleanlinessReport:
    return validate(gate.value.config, frames.value)
