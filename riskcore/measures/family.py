"""What a measure family is: its parameters, its computation, its figures and its report text.

A family module defines one :class:`MeasureFamily`; :data:`riskcore.measures.FAMILIES` lists them.
The gate config validates each family's parameters with its ``Params`` model when it is loaded,
the policy checks figure names against ``figures``, the report takes titles, sections, how-to-read
and advice from here, the CLI maps flags onto ``Params`` and the common tests run every family.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, config_error
from ..results import MeasureResult, Status, not_computable
from ..roles import ColumnType, MissingPolicy, Roles
from .releases import Lineage

if TYPE_CHECKING:
    from ..alignment import Alignment
    from ..data import EncodedColumn, EncodedTable
    from ..equivalence import ClassFrequencies

#: report sections, in page order: (key, title)
SECTIONS: tuple[tuple[str, str], ...] = (
    ("reid", "Re-identification risk"),
    ("sdc", "sdcMicro measures"),
    ("copies", "Copies and closeness"),
    ("attacks", "Attacks (Anonymeter)"),
    ("alc", "Anonymity Loss Coefficient"),
    ("utility", "Utility beside risk"),
)


class Params(BaseModel):
    """Base of every family's parameter model: unknown keys are refused, values are frozen.

    ``column_fields`` names the fields that hold column names; the gate config checks them
    against the roles when it is loaded.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    column_fields: ClassVar[tuple[str, ...]] = ()

    def named_columns(self) -> list[str]:
        """Every column name the parameters refer to."""
        out: list[str] = []
        for name in self.column_fields:
            value = getattr(self, name)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, Mapping):
                out.extend(str(k) for k in value)
            elif value:
                out.extend(str(v) for v in value)
        return out


@dataclass(frozen=True, eq=False)
class MeasureInputs:
    """The encoded tables of one run (jointly encoded) and run-wide settings.

    Equivalence classes are computed once per run and shared by every family that needs them
    (:meth:`frequencies`, :meth:`classes`); the cache is local to the process.
    """

    released: EncodedTable
    original: EncodedTable | None = None
    control: EncodedTable | None = None
    #: the custodian's own control when a trigger payload named ``control``: the families that
    #: read a control run again against it (:func:`riskcore.gate.run.judge_both_controls`)
    custodian_control: EncodedTable | None = None
    identification: EncodedTable | None = None
    missing: MissingPolicy = MissingPolicy.OWN
    alpha: float = 1.0
    seed: int = 0
    #: how the other tables were aligned with a generalized release (None: not aligned)
    alignment: Alignment | None = None
    #: for a partitioned table, whose ``released`` holds its distinct rows with their
    #: multiplicity: seeded samples of every table's records, for the families that need rows
    sampled: MeasureInputs | None = None
    #: the earlier releases of the same data, for ``composition``
    #: (:func:`riskcore.gate.lineage.load_lineage`)
    lineage: Lineage | None = None
    #: columns read both ways (:attr:`riskcore.anatomy.ColumnReading.both_ways`: a handful of
    #: whole numbers, a code whose values are numbers): the distance families run once more
    #: with each read the other way (:meth:`read_other_way`)
    split: tuple[str, ...] = ()
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_lock")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_lock", threading.Lock())

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._cache:
                self._cache[key] = make()
            return self._cache[key]

    def frequencies(self, *, with_population: bool = True,
                    missing: MissingPolicy | None = None) -> ClassFrequencies:
        """fk/Fk of the released table over its quasi-identifiers (docs/measures.md 3.1, 3.2), once
        a run.

        Args:
            with_population: take F from the identification table when there is one.
            missing: override the run's missing-value policy (``own`` for population models).
        """
        from ..equivalence import frequencies

        policy = MissingPolicy(missing or self.missing)
        population = self.identification if with_population else None
        alpha = self.alpha if policy is MissingPolicy.WILDCARD else 1.0
        return self._cached(
            ("freq", with_population and population is not None, policy.value, alpha),
            lambda: frequencies(self.released, population=population, missing=policy,
                                alpha=alpha))

    def classes(self, keys: Sequence[str]) -> tuple[np.ndarray, int]:
        """Exact-key equivalence classes of the released table (missing = own value)."""
        from ..equivalence import group_rows

        keys = tuple(keys)
        if keys == tuple(self.released.roles.quasi_identifiers):
            freq = self.frequencies(missing=MissingPolicy.OWN, with_population=False)
            return freq.class_id, freq.n_classes
        return self._cached(("classes", keys), lambda: group_rows(self.released.codes(keys)))

    def read_other_way(self, columns: Sequence[str]) -> MeasureInputs:
        """The same inputs with ``columns`` read the other way: a numeric column as codes
        (categories, no numbers), a categorical column of numbers as numbers (each code's
        label parsed; a label that is not a number is missing); equivalence classes are
        unchanged."""
        def flip(col: EncodedColumn) -> EncodedColumn:
            if col.values is not None:
                return replace(col, type=ColumnType.CATEGORICAL, values=None)
            # once per run and set of labels (every family that reads a column the other
            # way shares it; the tables encoded together share their labels)
            labels = self._cached(("label numbers", col.name, id(col.categories)),
                                  lambda: _label_numbers(col.categories))
            values = np.append(labels, np.nan)[np.where(col.codes < 0, len(labels),
                                                        col.codes)]
            return replace(col, type=ColumnType.CONTINUOUS, values=values)

        def table(t: EncodedTable | None) -> EncodedTable | None:
            if t is None:
                return None
            cols = dict(t.columns)
            for c in columns:
                if c in cols:
                    cols[c] = flip(cols[c])
            return replace(t, columns=cols)

        released = table(self.released)
        assert released is not None
        return replace(self, released=released, original=table(self.original),
                       control=table(self.control), custodian_control=table(
                           self.custodian_control), identification=table(self.identification),
                       split=(), _cache={}, _lock=threading.Lock())

    def wildcards(self, columns: Sequence[str]) -> dict[str, int]:
        """Column -> the code of the release's suppression token in it (cells that mean "any
        value"), for the columns where the release holds one."""
        from ..generalization import DEFAULT_SUPPRESSED

        tokens = (self.alignment.suppressed_tokens if self.alignment is not None
                  else DEFAULT_SUPPRESSED)
        out: dict[str, int] = {}
        for c in columns:
            col = self.released.column(c)
            if col.values is not None:
                continue
            for token in tokens:
                if token == "":  # empty cells declared suppressed: missing means any value
                    if col.missing.any():
                        out[c] = -1
                    continue
                hits = np.flatnonzero(col.categories == token)
                if hits.size and (col.codes == hits[0]).any():
                    out[c] = int(hits[0])
        return out

    def domain_check(self, measure: str, columns: Sequence[str]) -> MeasureResult | None:
        """An insufficient-evidence result when a column the attack compares has too few
        values comparable with the release's (see riskcore.generalization)."""
        if self.alignment is None:
            return None
        reason = self.alignment.insufficient_reason(columns)
        if reason is None:
            return None
        return MeasureResult(measure=measure, figures={}, status=Status.INSUFFICIENT_EVIDENCE,
                             reason=reason, details={"alignment": self.alignment_of(columns)})

    def alignment_of(self, columns: Sequence[str]) -> list[dict[str, Any]]:
        """The alignment record of ``columns`` (for a result's details)."""
        if self.alignment is None:
            return []
        return [self.alignment.columns[c].to_dict() for c in columns
                if c in self.alignment.columns]

    def with_alignment(self, result: MeasureResult, columns: Sequence[str]) -> MeasureResult:
        """The result with the alignment of its columns in its details: how each was put into
        the release's domain and the share of comparable values; ``partly_comparable`` lists
        the columns not fully comparable (the policy's ``on_inconclusive`` default reads it)."""
        if self.alignment is None:
            return result
        return replace(result, details={**result.details,
                                        "alignment": self.alignment_of(columns),
                                        "partly_comparable": self.alignment.partly(columns)})


RunFn = Callable[[MeasureInputs, Any], MeasureResult]
FiguresFn = Callable[[Any, Roles], dict[str, bool]]


@dataclass(frozen=True)
class MeasureFamily:
    """One measure family.

    Attributes:
        name: the key in ``measures:`` and the figure prefix in the policy (``reid.pRb``).
        title: the report's heading.
        section: the report section it appears in (see :data:`SECTIONS`).
        params: the pydantic parameter model (defaults written there, once).
        run: encoded inputs and validated parameters -> result.
        figures: the figure names the family reports for given parameters and roles, each with
            True when a higher value is riskier (policy names are checked against it).
        how_to_read: a plain-words paragraph for the report.
        advice: what to do when a check on one of its figures fails.
        needs: tables other than the release it needs ("original", ...).
        reads: tables it reads when they are given ("control": the yardstick of chance); a
            release judged against two controls runs these families once against each.
        check: a load-time cross-check of parameters and roles (raises ConfigError).
        alarm: the result -> a sentence when it shows disclosure severe enough that the gate
            must not pass it silently even without a policy check on the family.
        refutes: the result -> a sentence when it refutes a claim the config makes about the
            release (a claimed differential-privacy epsilon): a failed check whatever the
            policy says, since the claim, not the policy, is what the data contradicts.
        scale: how it runs on a partitioned table too large for one process: ``classes``
            (from the distinct rows' counts, exactly), ``rows`` (on seeded samples of the
            records) or ``whole`` (needs every record in one process: not run there).
        fits_models: it fits scikit-learn models (OpenMP threads): the gate loads their
            runtime before the thread budget is set, so that the budget reaches it.
        axis: "risk" (a failed check means the release is not safe) or "utility" (it is not
            useful); the decision's reasons say which.
        start_up: the family's one-off set-up in a process (imports, numba's set-up), which
            its first run would otherwise pay: the gate runs it in a thread while the tables
            load and the checks run (:func:`riskcore.measures.start_up`).
        distance: its figures depend on how a column is read (distances, neighbours): with
            a column whose reading is split (:attr:`MeasureInputs.split`), it runs under both
            readings and reports the worse (:func:`riskcore.measures.run_measure`).
    """

    name: str
    title: str
    section: str
    params: type[Params]
    run: RunFn
    figures: FiguresFn
    how_to_read: str
    advice: str
    needs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    check: Callable[[Any, Roles], None] | None = None
    alarm: Callable[[MeasureResult], str | None] | None = None
    refutes: Callable[[MeasureResult], str | None] | None = None
    scale: Literal["classes", "rows", "whole"] = "rows"
    fits_models: bool = False
    axis: Literal["risk", "utility"] = "risk"
    start_up: Callable[[], None] | None = None
    distance: bool = False

    def parse(self, raw: Mapping[str, Any] | Params | None, source: str = "gate config"
              ) -> Params:
        """Validate raw parameters (ConfigError naming the key and the allowed values)."""
        if isinstance(raw, self.params):
            return raw
        try:
            return self.params.model_validate(dict(raw or {}))
        except ValidationError as exc:
            allowed = {f"measures.{self.name}": list(self.params.model_fields)}
            raise config_error(exc, source, prefix=f"measures.{self.name}",
                               allowed=allowed) from None

    def validate_for(self, params: Params, roles: Roles, source: str = "gate config") -> None:
        """Load-time checks: named columns exist in the roles, then the family's own check."""
        known = set(roles.all_columns)
        unknown = [c for c in params.named_columns() if c not in known]
        if unknown:
            raise ConfigError(
                f"{source}: measures.{self.name} names column(s) {unknown} that have no role; "
                f"add them to roles (quasi_identifiers or sensitive) or fix the names "
                f"(columns with a role: {sorted(known)})")
        if self.check is not None:
            try:
                self.check(params, roles)
            except ConfigError as exc:
                raise ConfigError(f"{source}: measures.{self.name}: {exc}") from None

    def missing_tables(self, inputs: MeasureInputs) -> MeasureResult | None:
        """A not-computable result when a table the family needs is absent."""
        for table in self.needs:
            if getattr(inputs, table) is None:
                return not_computable(self.name, f"{self.title} needs the {table} table: "
                                      f"configure '{table}' in the gate config")
        return None


def compared_columns(columns: Sequence[str] | None, roles: Roles, table: Any = None
                     ) -> list[str]:
    """The columns a family compares: those its parameters name, else the roles' default
    (:attr:`riskcore.roles.Roles.compared_columns`), those ``table`` holds when given."""
    if columns:
        return list(columns)
    return [c for c in roles.compared_columns if table is None or c in table.columns]


def per_column_figures(columns: Sequence[str], names: Sequence[str], higher: bool
                       ) -> dict[str, bool]:
    """``<column>.<name>`` figures for each column, all with the same direction."""
    return {f"{c}.{n}": higher for c in columns for n in names}


def _label_numbers(categories: np.ndarray) -> np.ndarray:
    """Each label read as a number (NaN where it is not one): parsed by Arrow in C++ when
    every label is a plain finite number (a code column's hundreds of thousands of labels),
    else by pandas, as text."""
    from ..data import arrow_numbers, text_series

    text = text_series(np.asarray(categories, dtype=object))
    fast = arrow_numbers(pd.Index(text)) if text.dtype == "str" else None
    if fast is not None:
        return fast
    return pd.to_numeric(text.astype(str), errors="coerce").to_numpy(dtype=float)
