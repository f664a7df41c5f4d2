"""The gate's shared limits (Protegrity's best practices: 5 gate runs at once, 60 triggered runs a
minute).

Both are Prefect global concurrency limits, shared by every worker, every deployment and every
CLI run against the same API. Their size is set by an administrator (``riskgate limits``, or
``riskgate deploy``), never by a gate config; a gate run creates a missing limit with Protegrity's
default and never resizes one.

A gate holds its slot as a *lease* of :data:`LEASE_S` seconds that the running process renews:
a gate killed with SIGKILL (or by the OOM killer) stops renewing, and its slot returns to the
pool when the lease expires, instead of never. While waiting for a slot the gate says so in its
log every :data:`WAIT_TICK_S` seconds, and gives up with an error after ``wait_s``.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import ExitStack
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import (
    GlobalConcurrencyLimitCreate,
    GlobalConcurrencyLimitUpdate,
)
from prefect.concurrency.sync import concurrency, rate_limit
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from riskcore.errors import RiskgateError

GATE_LIMIT = "riskgate-gate"
TRIGGER_RATE_LIMIT = "riskgate-trigger-rate"
DEFAULT_GATE_CONCURRENCY = 5  # Protegrity's best practices: job queue limit
DEFAULT_TRIGGER_RATE = 60  # Protegrity's best practices: requests per minute
LEASE_S = 60.0  # the shortest lease Prefect accepts
WAIT_TICK_S = 10.0
DEFAULT_WAIT_S = 3600.0


class SlotTimeout(RiskgateError):
    """No gate slot became free in time."""


def ensure_limit(name: str, limit: int, slot_decay_per_second: float = 0.0) -> None:
    """Create the limit if it does not exist (never resize an existing one)."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
            return
        except ObjectNotFound:
            pass
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(
                name=name, limit=limit, slot_decay_per_second=slot_decay_per_second))
        except ObjectAlreadyExists:
            pass  # another gate created it at the same moment
        except Exception as exc:  # 409 surfaces as an HTTP error on some versions
            if "409" not in str(exc) and "already exists" not in str(exc).lower():
                raise


def set_limits(gate: int | None = None, trigger_rate: int | None = None
               ) -> dict[str, dict[str, Any] | None]:
    """The administrator's command: create or resize the limits; returns their state."""
    wanted = {GATE_LIMIT: (gate, 0.0),
              TRIGGER_RATE_LIMIT: (trigger_rate, None)}
    out: dict[str, dict[str, Any] | None] = {}
    with get_client(sync_client=True) as client:
        for name, (size, decay) in wanted.items():
            if size is not None:
                decay_v = size / 60.0 if decay is None else decay
                try:
                    client.read_global_concurrency_limit_by_name(name)
                    client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(
                        limit=size, slot_decay_per_second=decay_v))
                except ObjectNotFound:
                    client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(
                        name=name, limit=size, slot_decay_per_second=decay_v))
            try:
                cur = client.read_global_concurrency_limit_by_name(name)
                out[name] = {"limit": cur.limit, "active_slots": cur.active_slots,
                             "slot_decay_per_second": cur.slot_decay_per_second}
            except ObjectNotFound:
                out[name] = None
    return out


def current_gate_limit() -> int:
    """The size of the gate limit (the administrator's, else Protegrity's default)."""
    with get_client(sync_client=True) as client:
        try:
            return int(client.read_global_concurrency_limit_by_name(GATE_LIMIT).limit)
        except ObjectNotFound:
            return DEFAULT_GATE_CONCURRENCY


def set_pool_limit(size: int) -> bool:
    """The gate's work pool takes the same size as its concurrency limit, so that runs beyond
    it wait Scheduled at the door instead of starting a process that waits for a slot; False
    when the pool does not exist yet (``riskgate deploy`` sizes it when it creates it)."""
    from prefect.client.schemas.actions import WorkPoolUpdate

    from .names import WORK_POOL

    with get_client(sync_client=True) as client:
        try:
            client.update_work_pool(WORK_POOL, WorkPoolUpdate(concurrency_limit=size))
        except ObjectNotFound:
            return False
    return True


def ensure_defaults() -> None:
    ensure_limit(GATE_LIMIT, DEFAULT_GATE_CONCURRENCY)
    ensure_limit(TRIGGER_RATE_LIMIT, DEFAULT_TRIGGER_RATE,
                 slot_decay_per_second=DEFAULT_TRIGGER_RATE / 60.0)


def take_trigger_rate(log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """One slot of the trigger rate limit (decays at the configured rate per minute)."""
    log.debug("taking a trigger-rate slot")
    rate_limit(TRIGGER_RATE_LIMIT, occupy=1, timeout_seconds=DEFAULT_WAIT_S, strict=False)


class GateSlot:
    """One slot of the gate limit, leased; released before a review pause and taken again."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter[Any],
                 wait_s: float = DEFAULT_WAIT_S) -> None:
        self.log = log
        self.wait_s = wait_s
        self._stack: ExitStack | None = None
        self.held: list[tuple[float, float]] = []
        self.waited = 0.0
        self._since = 0.0

    def acquire(self) -> None:
        started = time.monotonic()
        done = threading.Event()

        def tell() -> None:  # says so in the log while the acquisition blocks
            while not done.wait(WAIT_TICK_S):
                self.log.info("waiting for a gate slot: all slots of '%s' are in use "
                              "(%.0f s so far)", GATE_LIMIT, time.monotonic() - started)

        teller = threading.Thread(target=tell, daemon=True)
        teller.start()
        stack = ExitStack()
        try:
            stack.enter_context(concurrency(GATE_LIMIT, occupy=1, timeout_seconds=self.wait_s,
                                            lease_duration=LEASE_S, strict=False,
                                            raise_on_lease_renewal_failure=False))
        except TimeoutError:
            stack.close()
            raise SlotTimeout(
                f"no gate slot became free in {self.wait_s:.0f} s (limit '{GATE_LIMIT}': all "
                "slots in use); try again later or raise it with 'riskgate limits --gate N'"
            ) from None
        finally:
            done.set()
        self._stack = stack
        self._since = time.time()
        self.waited += time.monotonic() - started

    def release(self) -> None:
        if self._stack is not None:
            # the span recorded lies inside the true hold: from after the grant to before
            # the release (so that spans of two gates never overlap because of the clock)
            self.held.append((self._since, time.time()))
            self._stack.close()
            self._stack = None

    def __enter__(self) -> GateSlot:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
