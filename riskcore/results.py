"""The result type every measure returns, and its JSON form (schema ``riskgate.measure/1``).

A result carries headline figures named as in the seeds (``pRa``, ``jRc``...), the parameters it
was computed with, for each figure whether a higher value means more risk, per-record arrays
(written to ``per_record.parquet`` and *referenced* from the JSON, never inlined), details such as
histograms, and warnings. A measure that cannot be computed says so with a reason; it never
returns NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any, ClassVar

import numpy as np

MEASURE_SCHEMA = "riskgate.measure/1"


class Status(str, Enum):
    OK = "ok"
    NOT_COMPUTABLE = "not_computable"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


@dataclass(frozen=True)
class MeasureResult:
    """A measure's outcome: figures, parameters, directions, per-record arrays, details."""

    measure: str
    figures: Mapping[str, float | int | None]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    higher_is_riskier: Mapping[str, bool] = field(default_factory=dict)
    per_record: Mapping[str, np.ndarray] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    status: Status = Status.OK
    reason: str | None = None
    #: named tables whose rows are not the released table's records (e.g. the ALC's
    #: predictions per target), written as ``<name>.parquet`` beside the results
    records: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)
    #: why a figure that is None could not be computed (named for the policy's message)
    unavailable: Mapping[str, str] = field(default_factory=dict)

    def figure(self, name: str) -> float | int | None:
        return self.figures.get(name)

    def to_dict(self, per_record_ref: str = "per_record.parquet") -> dict[str, Any]:
        """JSON-ready dict; per-record arrays become references ``<file>#<measure>.<name>``."""
        return {
            "schema": MEASURE_SCHEMA,
            "measure": self.measure,
            "status": self.status.value,
            "reason": self.reason,
            "figures": {k: to_jsonable(v) for k, v in self.figures.items()},
            "direction": {
                k: ("higher_is_riskier" if v else "lower_is_riskier")
                for k, v in self.higher_is_riskier.items()
            },
            "parameters": to_jsonable(dict(self.parameters)),
            "per_record": {
                name: f"{per_record_ref}#{self.measure}.{name}" for name in self.per_record
            },
            "details": to_jsonable(dict(self.details)),
            "warnings": list(self.warnings),
            **({"records": {name: f"{name}.parquet" for name in self.records}}
               if self.records else {}),
            **({"unavailable": dict(self.unavailable)} if self.unavailable else {}),
        }


def not_computable(measure: str, reason: str, parameters: Mapping[str, Any] | None = None,
                   status: Status = Status.NOT_COMPUTABLE) -> MeasureResult:
    """A result that says why no figure could be computed."""
    return MeasureResult(measure=measure, figures={}, parameters=parameters or {},
                         status=status, reason=reason)


class Record:
    """Mixin for frozen dataclasses: one serialization for every result riskgate writes.

    ``to_dict`` maps each field through :func:`to_jsonable`; fields named in ``json_exclude``
    are left out (e.g. large arrays written elsewhere).
    """

    json_exclude: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        assert is_dataclass(self)
        return {f.name: to_jsonable(getattr(self, f.name)) for f in fields(self)
                if f.name not in self.json_exclude}


def to_jsonable(value: Any) -> Any:
    """Convert numpy / enum / nested values into plain JSON types (NaN and inf become None)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    return value
