"""The gate's flows store their parameters as the JSON they are, without FastAPI.

Prefect stores a flow run's parameters as FastAPI's ``jsonable_encoder`` gives them, and
imports FastAPI for it as each process creates its first flow run: 0.36 s of a command-line
gate's start (``riskgate gate`` without a standby), on its path before its flow begins, for
parameters that are JSON already (a config's URL, overrides, a trigger's reference). Those are
stored as they are; any other value as Prefect stores it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import Flow

#: how deep a parameter may nest and still be stored as it is (deeper: Prefect's encoder)
MAX_DEPTH = 32


def is_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON as it stands: what ``jsonable_encoder`` gives back unchanged
    (None, text, numbers, and lists and string-keyed dicts of them)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, list):
        return all(is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v, depth + 1) for k, v in value.items())
    return False


class PlainParameterFlow(Flow[Any, Any]):
    """A Prefect flow whose JSON parameters are stored as they are (see the module)."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        other = {k: v for k, v in parameters.items() if not is_json(v)}
        encoded = super().serialize_parameters(other) if other else {}
        return {k: encoded[k] if k in other else v for k, v in parameters.items()}


def plain_flow(**options: Any) -> Callable[[Callable[..., Any]], PlainParameterFlow]:
    """``@prefect.flow(**options)``, making a :class:`PlainParameterFlow`."""
    def make(fn: Callable[..., Any]) -> PlainParameterFlow:
        return PlainParameterFlow(fn=fn, **options)

    return make
