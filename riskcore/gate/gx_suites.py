"""Great Expectations itself: its context, made once per process, and the suites run on it.

The one place that imports GX. :mod:`.cleanliness` builds the checks and reads their results;
it runs them here or, through :mod:`.gx_helper`, in the helper process, which runs the same
:func:`run_suites_here`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

_GX_LOCK = threading.Lock()
_GX: dict[str, Any] = {}


def gx_context() -> tuple[Any, Any, Any]:
    """Great Expectations, its ephemeral context and pandas data source: made once per process
    (importing GX and building a context is a fixed cost of seconds; see
    :func:`riskcore.gate.cleanliness.warm_up`)."""
    with _GX_LOCK:
        if not _GX:
            os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
            import great_expectations as gx
            from great_expectations.data_context.types.base import (
                DataContextConfig,
                InMemoryStoreBackendDefaults,
                ProgressBarsConfig,
            )

            config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(),
                                       progress_bars=ProgressBarsConfig(globally=False),
                                       analytics_enabled=False)
            context = gx.get_context(mode="ephemeral", project_config=config)
            _GX.update(gx=gx, context=context,
                       source=context.data_sources.add_pandas("riskgate"))
        return _GX["gx"], _GX["context"], _GX["source"]


#: one expectation as plain data: GX's class name, the column, its other arguments (what the
#: helper process receives: plain tuples and pandas frames, no class of riskgate to import)
Expectation = tuple[str, str, tuple[tuple[str, Any], ...]]
#: one suite: its name, the frame it validates and its expectations
Job = tuple[str, pd.DataFrame, Sequence[Expectation]]


def run_suites_here(jobs: Sequence[Job]) -> list[list[dict[str, Any]]]:
    """Validate each job's frame against a suite of its expectations, in this process; the
    results as plain data (what the helper process sends back)."""
    gx, _, source = gx_context()
    out = []
    for name, frame, expectations in jobs:
        exps = [getattr(gx.expectations, kind)(column=column, **dict(kwargs))
                for kind, column, kwargs in expectations]
        batch = _batch(source, name, frame)
        suite = gx.ExpectationSuite(name=f"riskgate-{name}", expectations=exps)
        validation = batch.validate(suite, result_format={"result_format": "COMPLETE"})
        rows = []
        for res in validation.results:
            cfg, r = res.expectation_config, res.result or {}
            index = r.get("unexpected_index_list")
            error = res.exception_info or {}
            rows.append({
                "type": cfg.type, "column": cfg.kwargs.get("column"),
                "regex": cfg.kwargs.get("regex"), "success": bool(res.success),
                "index": None if index is None else [int(i) for i in index
                                                     if isinstance(i, (int, np.integer))],
                "counted": "element_count" in r,
                "error": str(error.get("exception_message", ""))[:200]
                if error.get("raised_exception") else ""})
        out.append(rows)
    return out


def _batch(source: Any, name: str, frame: pd.DataFrame) -> Any:
    """A batch of ``frame`` from the process's data source (assets made once per name)."""
    with _GX_LOCK:
        try:
            asset = source.get_asset(name)
        except LookupError:
            asset = source.add_dataframe_asset(name)
        try:
            batch_def = asset.get_batch_definition(f"{name}-all")
        except KeyError:
            batch_def = asset.add_batch_definition_whole_dataframe(f"{name}-all")
    return batch_def.get_batch(batch_parameters={"dataframe": frame})


#: the suites a gate asks first: its tables' column checks and the value checks by size
WARM_NAMES = ("original-columns", "released-columns", "values-0", "values-1")


def warm_suites() -> None:
    """Run each expectation riskgate asks once, on a two-row frame, under the names a gate
    uses first: Great Expectations' first validation in a process costs 0.1-0.15 s more than
    the next (its metric registry, the batch definitions), which the helper pays here, before
    it is ready, rather than on the gate's path."""
    frame = pd.DataFrame({"text": pd.array(["a", None], dtype="str"),
                          "mixed": pd.Series(["a", 1], dtype=object),
                          "number": [1.0, np.nan]})
    expectations: list[Expectation] = [
        ("ExpectColumnToExist", "number", ()),
        ("ExpectColumnUniqueValueCountToBeBetween", "number", (("min_value", 1),)),
        ("ExpectColumnValuesToMatchRegex", "text", (("regex", "^a$"),)),
        ("ExpectColumnValuesToNotMatchRegex", "text", (("regex", "b"),)),
        ("ExpectColumnValuesToNotMatchRegex", "mixed", (("regex", "b"),)),
        ("ExpectColumnValuesToBeInTypeList", "number", (("type_list", ("float64",)),))]
    run_suites_here([(name, frame, expectations) for name in WARM_NAMES])
