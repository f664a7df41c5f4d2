"""Every flow test talks to the suite's real Prefect server."""

from __future__ import annotations

import pytest

# the operations tests' deployed server (a fixture), once per test process
from tests.flows.operations_support import ops  # noqa: F401


@pytest.fixture(autouse=True)
def _api(prefect_server):  # noqa: ANN001 - a fixture
    yield prefect_server

