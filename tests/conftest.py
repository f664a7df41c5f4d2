"""Shared test fixtures: the reference data folder and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    env = os.environ.get("RISKGATE_SHARED")
    path = Path(env) if env else ROOT.parent / "shared"
    if not (path / "SPEC.md").exists():
        raise RuntimeError(f"reference data not found at {path}; set RISKGATE_SHARED")
    return path


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()


@pytest.fixture(scope="session")
def testdata(shared: Path) -> pd.DataFrame:
    return pd.read_csv(shared / "datasets/sdcmicro/testdata.csv")


TESTDATA_KEYS = ("urbrur", "roof", "walls", "water", "electcon", "relat", "sex")
