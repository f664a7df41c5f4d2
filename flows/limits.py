"""Global concurrency and rate limits of the gate (seed 001: 5 jobs at once, 60 requests/minute).

Both are Prefect global concurrency limits, created (or resized) from the config when a gate run
starts, so that every worker and every process that runs the gate shares them.
"""

from __future__ import annotations

import logging

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import (GlobalConcurrencyLimitCreate,
                                            GlobalConcurrencyLimitUpdate)
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

GATE_LIMIT = "riskgate-gate"
TRIGGER_RATE_LIMIT = "riskgate-trigger-rate"

log = logging.getLogger(__name__)


def ensure_limit(name: str, limit: int, slot_decay_per_second: float | None = None) -> None:
    """Create the global concurrency limit, or resize it when the config changed."""
    with get_client(sync_client=True) as client:
        try:
            current = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(
                    name=name, limit=limit, slot_decay_per_second=slot_decay_per_second or 0.0))
            except ObjectAlreadyExists:
                pass  # another gate run created it at the same moment
            except Exception as exc:  # 409 surfaces as an HTTP error on some versions
                if "409" not in str(exc) and "already exists" not in str(exc).lower():
                    raise
            return
        want_decay = slot_decay_per_second or 0.0
        if current.limit != limit or (current.slot_decay_per_second or 0.0) != want_decay:
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(
                limit=limit, slot_decay_per_second=want_decay))
