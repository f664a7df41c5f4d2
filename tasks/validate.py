"""Prefect task: the cleanliness checks (Great Expectations) over every input table."""

from __future__ import annotations

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.cleanliness import CleanlinessReport, validate_tables
from riskcore.data import Roles


@task(name="validate", cache_policy=NO_CACHE)
def validate_inputs(frames: dict[str, pd.DataFrame], roles: Roles) -> CleanlinessReport:
    return validate_tables(frames, roles)
