"""What every gate task shares: clean failures and bounded retries of transient storage errors."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from prefect.states import Failed

from riskcore.errors import RiskgateError, StorageError
from riskcore.redact import redact_text

T = TypeVar("T")


class Held(Generic[T]):
    """A task argument Prefect passes through untouched: not traversed for futures (a gate's
    config, tables and encoded arrays are large and not made of futures), and shipped whole to
    a Dask worker (where ``prefect.utilities.annotations.quote`` arrives as a bare tuple)."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Held({type(self.value).__name__})"
#: attempts and delay for a transient storage error inside one task
STORAGE_ATTEMPTS = 3
STORAGE_DELAY_S = 2.0


def clean_failure(fn: Callable[..., T]) -> Callable[..., Any]:
    """Run ``fn``; a RiskgateError becomes a Failed state carrying it (no traceback in the log),
    a StorageError is first retried (the store may come back)."""

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, STORAGE_ATTEMPTS + 1):
            try:
                return fn(*args, **kwargs)
            except StorageError as exc:
                if attempt == STORAGE_ATTEMPTS:
                    return Failed(message=redact_text(str(exc)), data=exc)
                time.sleep(STORAGE_DELAY_S)
            except RiskgateError as exc:
                return Failed(message=redact_text(str(exc)), data=exc)
        raise AssertionError("unreachable")

    return inner
