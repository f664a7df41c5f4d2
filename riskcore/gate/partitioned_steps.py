"""The gate's steps for partitioned tables too large for one process (:mod:`riskcore.partitions`).

The same sequence as every gate run (:func:`riskcore.gate.run.run_gate`), with steps that never
hold a whole table:

* **load**: one pass per partition on the executor (this process, or a Dask cluster): read,
  hash, clean-check (Great Expectations, per partition), count distinct rows, sample;
* **validate**: the partitions' checks merged into one report (a check fails when it fails in
  any partition; counts add up; example rows are global row numbers, the partition named);
* **encode**: the release's distinct rows, combined in partition order, encoded with their
  multiplicity; the samples encoded (and aligned) as any in-memory run's tables;
* **measures**: families of scale ``classes`` on the distinct rows (exact figures), families of
  scale ``rows`` on the samples, one task each on the executor, saying so in their warnings;
  families of scale ``whole`` (SUDA2, DRisk) are not run, with the reason;
* per-record values are written back partitioned (``per_record/part-NNNNN.parquet``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError, InputError
from ..measures import BY_NAME, MeasureInputs, run_measure
from ..measures.family import Params
from ..partitions import (
    APART,
    RECORDS,
    WEIGHTS,
    Executor,
    LocalExecutor,
    Partitioned,
    PartitionSummary,
    RecordTask,
    combine,
    count_keys,
    discover,
    household_part,
    households_apart,
    is_partitioned,
    part_url,
    per_record_part,
    summarize,
    table_sha256,
    tasks_for,
)
from ..redact import redact_text
from ..results import MeasureResult, not_computable
from ..roles import PUBLISHED, Roles
from .cleanliness import EMPTY_CHECK, CheckResult, CleanlinessReport, validate_tables
from .config import Gate
from .encoding import encode, encode_aligned
from .prepare import extra_columns_check
from .run import measure_error
from .tables import TableInfo, detect_format

#: records drawn from each table for the families that need rows (attacks, copies, ALC)
DEFAULT_SAMPLE_ROWS = 200_000


@dataclass(frozen=True)
class PartitionedTable:
    """A table after its partitions' pass: what the later steps read."""

    table: Partitioned
    summaries: tuple[PartitionSummary, ...]

    def sample(self) -> pd.DataFrame:
        return pd.concat([s.sample for s in self.summaries], ignore_index=True)


def partition_checks(part: str, df: pd.DataFrame, *, table: str, roles: Roles,
                     identifiers: Any = None) -> list[CheckResult]:
    """The cleanliness checks of one partition (Great Expectations, as for a whole table),
    the scan for identifiers with the config's rules among them."""
    report = validate_tables({table: df}, roles, identifiers)
    return list(report.checks)


def merge_checks(table: str, summaries: tuple[PartitionSummary, ...], offsets: list[int]
                 ) -> list[CheckResult]:
    """One result per check over every partition of a table."""
    merged: dict[tuple[str, str | None], CheckResult] = {}
    for summary, offset in zip(summaries, offsets):
        for c in summary.checks or ():
            key = (c.check, c.column)
            prev = merged.get(key)
            rows = tuple(offset + r for r in c.example_rows)
            detail = c.detail if c.success else f"partition '{summary.file}': {c.detail}".rstrip(
                ": ")
            if prev is None:
                merged[key] = replace(c, table=table, example_rows=rows, detail=detail)
                continue
            failing_first = not prev.success
            # a column is empty only when it is empty in every partition
            either = c.check == EMPTY_CHECK
            success = (prev.success or c.success) if either else (prev.success and c.success)
            if either and success:
                merged[key] = replace(prev, success=True, detail="", unexpected_count=0,
                                      example_rows=())
                continue
            merged[key] = replace(
                prev, success=success,
                unexpected_count=prev.unexpected_count + c.unexpected_count,
                element_count=(None if prev.element_count is None or c.element_count is None
                               else prev.element_count + c.element_count),
                example_rows=prev.example_rows if failing_first or c.success else rows,
                detail=prev.detail if failing_first or c.success else detail)
    return list(merged.values())


class PartitionedSteps:
    """Gate steps over partitioned Parquet tables, the partitions' work on ``executor``."""

    def __init__(self, executor: Executor | None = None,
                 sample_rows: int = DEFAULT_SAMPLE_ROWS) -> None:
        self.executor = executor or LocalExecutor()
        self.sample_rows = sample_rows
        self._distinct: pd.DataFrame | None = None
        self._keys: list[str] = []
        self._tables: dict[str, PartitionedTable] = {}
        self._with_households = False
        self._options: Mapping[str, Any] = {}

    @property
    def measures_here(self) -> bool:
        """The families sampled rows feed run in this process (riskcore.gate.run begins
        their start-up here): not on a Dask cluster's workers."""
        return isinstance(self.executor, LocalExecutor)

    # ------------------------------------------------------------ Steps
    def load(self, gate: Gate, options: Mapping[str, Any]
             ) -> tuple[dict[str, Any], list[TableInfo]]:
        cfg = gate.config
        roles = cfg.role_spec
        self._options = options
        if cfg.identification:
            raise ConfigError("an identification table cannot be used with partitioned "
                              "tables; give the release sample weights instead, or gate it on "
                              "one node")
        frames: dict[str, Any] = {}
        infos: list[TableInfo] = []
        for name, url in cfg.tables().items():
            if detect_format(url, cfg.read.format) != "parquet" and not is_partitioned(
                    url, options):
                raise InputError(
                    f"table '{name}': a partitioned release is gated with Parquet tables, and "
                    f"'{redact_text(url)}' is not Parquet: convert it (one file, or a folder "
                    "of Parquet files)")
            table = discover(url, name, options)
            check = partial(partition_checks, table=name, roles=roles,
                            identifiers=cfg.identifiers)
            tasks = tasks_for(table, roles, url=url, sample_rows=self.sample_rows,
                              seed=cfg.seed, options=options, check=check,
                              count=name == "released", markers=cfg.markers,
                              published=name in PUBLISHED)
            summaries = tuple(self.executor.map(summarize, tasks))
            frames[name] = self._tables[name] = PartitionedTable(table, summaries)
            role_cols = [c for c in roles.all_columns if c in table.columns]
            infos.append(TableInfo(
                name=name, url=table.url, format="parquet", encoding=None,
                sha256=table_sha256([s.sha256 for s in summaries]), bytes=table.bytes,
                rows=table.records,
                columns=tuple(role_cols), other_columns=len(table.columns) - len(role_cols)))
        return frames, infos

    def validate(self, gate: Gate, frames: Mapping[str, Any]) -> CleanlinessReport:
        checks: list[CheckResult] = []
        for name, part in frames.items():
            checks.extend(merge_checks(name, part.summaries, part.table.offsets()))
        released, original = frames.get("released"), frames.get("original")
        if released is not None and original is not None:
            checks.append(extra_columns_check(
                list(released.table.columns), frozenset(original.table.columns),
                frozenset(gate.config.ignore_columns)))
        return CleanlinessReport(checks=tuple(checks))

    def encode(self, gate: Gate, frames: Mapping[str, Any]) -> MeasureInputs:
        cfg = gate.config
        released: PartitionedTable = frames["released"]
        keys = count_keys(cfg.role_spec, released.table.columns)
        distinct = combine([s.counts for s in released.summaries], keys)
        self._distinct, self._keys = distinct.loc[:, [*keys, APART]], keys
        samples = {name: part.sample() for name, part in frames.items()}
        # the distinct rows encoded with the original's sample, so that types are decided on
        # the original as in any run
        rows = distinct.loc[:, keys]
        weight = cfg.role_spec.weight
        if weight:  # each distinct row's mean weight: mean x records = the weights' sum
            rows[weight] = distinct[WEIGHTS] / distinct[RECORDS]
        joint = {**{k: v for k, v in samples.items() if k == "original"}, "released": rows}
        no_household = cfg.model_copy(update={"roles": cfg.roles.model_copy(
            update={"household": None})})
        enc, _ = encode_aligned(no_household, joint)
        counts = distinct[RECORDS].to_numpy(dtype=np.float64)
        sampled = encode(cfg, samples)
        return MeasureInputs(released=replace(enc["released"], multiplicity=counts),
                             missing=cfg.missing, alpha=cfg.alpha, seed=cfg.seed,
                             sampled=sampled)

    def measures(self, gate: Gate, inputs: MeasureInputs
                 ) -> tuple[dict[str, MeasureResult], dict[str, str]]:
        results: dict[str, MeasureResult] = {}
        errors: dict[str, str] = {}
        records = inputs.released.records
        sampled = inputs.sampled
        on_rows = [(name, params) for name, params in gate.measures.items()
                   if BY_NAME[name].scale == "rows"]
        for name, params in gate.measures.items():
            fam = BY_NAME[name]
            if fam.scale == "whole":
                results[name] = not_computable(
                    name, f"{fam.title}: needs every record in one process; this release is a "
                    f"partitioned table of {records:,} records, too large for it: gate a "
                    "sample of the release on one node to run it")
            elif fam.scale == "classes":
                try:
                    results[name] = run_measure(name, inputs, params)
                except Exception as exc:  # a measure that raises makes the verdict ERROR
                    errors[name] = measure_error(exc)
                if name == "sdc" and name in results and gate.config.roles.household:
                    results[name] = self._households(gate, results[name], records)
        if on_rows and sampled is not None:
            outcomes = self.executor.map(partial(_run_on_sample, inputs=sampled), on_rows)
            for (name, _), (result, error) in zip(on_rows, outcomes):
                if error is not None:
                    errors[name] = error
                elif result is not None:
                    note = (f"computed on a seeded sample of {sampled.released.n:,} of the "
                            f"{records:,} released records")
                    results[name] = replace(result, warnings=(*result.warnings, note))
        return ({k: results[k] for k in gate.measures if k in results},
                {k: errors[k] for k in gate.measures if k in errors})

    def review(self, gate: Gate, decision: Any, prepare: Any) -> tuple[Any, None]:
        return decision, None

    def write(self, folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              options: Mapping[str, Any]) -> dict[str, str]:
        from .outputs import write_run

        return write_run(folder, files, decision, options)

    # ------------------------------------------------------------ records
    def _record_tasks(self, gate: Gate, values: pd.DataFrame, folder: str | None,
                      options: Mapping[str, Any]) -> list[RecordTask]:
        released = self._tables["released"]
        assert self._distinct is not None
        roles = gate.config.role_spec
        cols = released.table.columns
        return [RecordTask(file=f, offset=off, url=gate.config.released,
                           keys=tuple(self._keys),
                           sensitive=tuple(c for c in roles.sensitive if c in cols),
                           distinct=self._distinct, values=values,
                           target=part_url(folder, i) if folder is not None else None,
                           household=roles.household if self._with_households else None,
                           weight=roles.weight if roles.weight in cols else None,
                           options=dict(options), markers=gate.config.markers)
                for i, (f, off) in enumerate(zip(released.table.files,
                                                 released.table.offsets()))]

    def _households(self, gate: Gate, result: MeasureResult, records: int) -> MeasureResult:
        """sdc's household risk: each partition sums its households' risks (every household
        lies in one partition), the sums added in partition order."""
        from ..measures.sdc import HOUSEHOLD_FIGURES

        apart = households_apart(self._tables["released"].summaries)
        if apart is not None:
            return _without_households(result, f"household risk on a partitioned table "
                                       f"needs each household in one partition: {apart}")
        self._with_households = True
        values = pd.DataFrame({"sdc.risk": result.per_record["risk"]})
        try:
            sums = self.executor.map(household_part, self._record_tasks(gate, values, None,
                                                                          self._options))
        except InputError as exc:  # individual and global risk stand, as on one node
            self._with_households = False
            return _without_households(result, f"household risk not computable: {exc}")
        hier_ER = float(sum(sums))
        return replace(result, figures={**result.figures, "hier_ER": hier_ER,
                                        "hier_risk": hier_ER / records,
                                        "hier_risk_pct": 100.0 * hier_ER / records},
                       higher_is_riskier={**result.higher_is_riskier,
                                          **dict.fromkeys(HOUSEHOLD_FIGURES, True)})

    def write_per_record(self, gate: Gate, values: pd.DataFrame, folder: str,
                         options: Mapping[str, Any]) -> list[str]:
        """Each released partition's per-record values, written beside it in the run folder."""
        return self.executor.map(per_record_part,
                                 self._record_tasks(gate, values, folder, options))


def _without_households(result: MeasureResult, reason: str) -> MeasureResult:
    """sdc's household figures, not available, with the reason."""
    from ..measures.sdc import HOUSEHOLD_FIGURES

    return replace(result, figures={**result.figures, **dict.fromkeys(HOUSEHOLD_FIGURES)},
                   higher_is_riskier={**result.higher_is_riskier,
                                      **dict.fromkeys(HOUSEHOLD_FIGURES, True)},
                   unavailable={**result.unavailable,
                                **dict.fromkeys(HOUSEHOLD_FIGURES, reason)},
                   warnings=(*result.warnings, reason))


def _run_on_sample(item: tuple[str, Params], *, inputs: MeasureInputs
                   ) -> tuple[MeasureResult | None, str | None]:
    name, params = item
    try:
        return run_measure(name, inputs, params), None
    except Exception as exc:
        return None, measure_error(exc)
