"""Prefect tasks: the gate's steps over partitioned tables (:mod:`riskcore.gate.partitioned_steps`).

Each step is one task in the Prefect UI; inside it, the partitions' work runs on the steps'
executor (this process, or the Dask cluster the gate was given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.gate.config import Gate
from riskcore.gate.partitioned_steps import PartitionedSteps

from .common import Held, clean_failure


@task(name="partitioned-step", task_run_name="partitioned-{step}", cache_policy=NO_CACHE,
      retries=0)
@clean_failure
def partitioned_step(step: str, fn: Held[Callable[..., Any]], args: Held[tuple[Any, ...]]
                     ) -> Any:
    """One step (load, validate, encode, measures, per-record) of a partitioned gate run."""
    return fn.value(*args.value)


class PrefectPartitionedSteps(PartitionedSteps):
    """:class:`PartitionedSteps` whose steps show as tasks; review and write are the flow's."""

    def __init__(self, base: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base  # the flow's PrefectSteps: review (pause) and write

    def _task(self, step: str, fn: Callable[..., Any], *args: Any) -> Any:
        return partitioned_step.submit(step, Held(fn), Held(args)).result(
            raise_on_failure=True)

    def load(self, gate: Gate, options: Mapping[str, Any]) -> Any:
        return self._task("load", super().load, gate, options)

    def validate(self, gate: Gate, frames: Mapping[str, Any]) -> Any:
        return self._task("validate", super().validate, gate, frames)

    def encode(self, gate: Gate, frames: Mapping[str, Any]) -> Any:
        return self._task("encode", super().encode, gate, frames)

    def measures(self, gate: Gate, inputs: Any) -> Any:
        return self._task("measures", super().measures, gate, inputs)

    def write_per_record(self, gate: Gate, values: Any, folder: str,
                         options: Mapping[str, Any]) -> list[str]:
        return self._task(  # type: ignore[no-any-return]
            "per-record", super().write_per_record, gate, values, folder, options)

    def review(self, gate: Gate, decision: Any, prepare: Any) -> Any:
        return self.base.review(gate, decision, prepare)

    def write(self, folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              options: Mapping[str, Any]) -> dict[str, str]:
        return self.base.write(folder, files, decision, options)  # type: ignore[no-any-return]
