"""Every flow test talks to the suite's real Prefect server."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _api(prefect_server):  # noqa: ANN001 - a fixture
    yield prefect_server
