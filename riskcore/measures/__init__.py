"""The measure families and their one registry.

``FAMILIES`` is an explicit tuple, in report order; the gate config, the policy, the CLI, the
report and the tests read it and keep no list of their own. Adding a family means one module
with a :class:`~riskcore.measures.family.MeasureFamily` and one entry here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from functools import partial
from typing import Any

from .. import progress
from ..errors import ConfigError
from ..results import MeasureResult, Status
from ..threads import Beside
from . import (
    composition,
    copies,
    drisk,
    k_anonymity,
    l_diversity,
    membership,
    population,
    reid,
    sdc,
    suda,
    t_closeness,
    utility,
)
from .alc import measure as alc
from .attacks import inference, linkability, singling_out
from .family import SECTIONS, MeasureFamily, MeasureInputs, Params

FAMILIES: tuple[MeasureFamily, ...] = (
    k_anonymity.FAMILY,
    reid.FAMILY,
    sdc.FAMILY,
    suda.FAMILY,
    l_diversity.FAMILY,
    t_closeness.FAMILY,
    population.FAMILY,
    drisk.FAMILY,
    copies.FAMILY,
    singling_out.FAMILY,
    linkability.FAMILY,
    inference.FAMILY,
    membership.FAMILY,
    composition.FAMILY,
    alc.FAMILY,
    utility.FAMILY,
)

BY_NAME: dict[str, MeasureFamily] = {f.name: f for f in FAMILIES}


def family(name: str) -> MeasureFamily:
    """The family called ``name`` (ConfigError listing the known ones otherwise)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ConfigError(f"unknown measure '{name}'; known: {', '.join(BY_NAME)}") from None


def run_measure(name: str, inputs: MeasureInputs,
                params: Params | Mapping[str, Any] | None = None) -> MeasureResult:
    """Run one family on the encoded inputs (parameters validated if given raw): not
    computable, with the reason, when a table it needs is absent (:attr:`MeasureFamily.needs`);
    each figure's direction as the family declares it (:func:`with_directions`).

    A distance family (:attr:`MeasureFamily.distance`) with columns read both ways
    (:attr:`MeasureInputs.split`: a handful of whole numbers, a code whose values are
    numbers) runs twice, with them read as encoded and the other way, and reports the worse
    (:func:`worse_reading`): an attacker reads a column whichever way serves, so the worst
    case is never one reading's alone."""
    fam = family(name)
    parsed = fam.parse(params)
    missing = fam.missing_tables(inputs)
    if missing is not None:
        return missing
    with progress.scope(name):
        result = with_directions(fam, parsed, inputs, fam.run(inputs, parsed))
        if not (fam.distance and inputs.split) or result.status is not Status.OK:
            return result
        other = with_directions(fam, parsed, inputs,
                                fam.run(inputs.read_other_way(inputs.split), parsed))
    return worse_reading(result, other, inputs.split)


def with_directions(fam: MeasureFamily, params: Params, inputs: MeasureInputs,
                    result: MeasureResult) -> MeasureResult:
    """The result with each figure's direction as the family declares it
    (:attr:`MeasureFamily.figures`, the one place a direction is written)."""
    declared = fam.figures(params, inputs.released.roles)
    directions = {**{k: v for k, v in result.higher_is_riskier.items() if k not in declared},
                  **{k: declared[k] for k in result.figures if k in declared}}
    return replace(result, higher_is_riskier=directions)


def worse_reading(numbers: MeasureResult, codes: MeasureResult, split: Sequence[str]
                  ) -> MeasureResult:
    """The worse of a family's results under two readings of the columns ``split``
    (``numbers``: as encoded; ``codes``: the other way): each figure the worse of the two (by
    its direction), the per-record values, details and tables of the reading worse on most
    figures, and in the details which reading gave each figure."""
    if codes.status is not Status.OK:
        return numbers
    worse: dict[str, Any] = {}
    source: dict[str, str] = {}
    votes = 0
    for key, value in numbers.figures.items():
        alt = codes.figures.get(key)
        higher = numbers.higher_is_riskier.get(key, True)
        if isinstance(value, (int, float)) and isinstance(alt, (int, float)) and (
                (alt > value) if higher else (alt < value)):
            worse[key], source[key] = alt, "codes"
            votes += 1
        else:
            worse[key], source[key] = value, "numbers"
            votes -= isinstance(alt, (int, float)) and alt != value
    base = codes if votes > 0 else numbers
    reading = {"both_ways": list(split), "kept": "other" if votes > 0 else "as encoded",
               "figures_from_other": sorted(k for k, v in source.items() if v == "codes"),
               "as_encoded": dict(numbers.figures), "other_way": dict(codes.figures)}
    note = (f"columns {', '.join(split)} measured both as codes and as numbers: the worse "
            "reading of each figure is reported")
    return replace(base, figures=worse, details={**base.details, "readings": reading},
                   warnings=(*base.warnings, note))


def set_up(names: Iterable[str], cancelled: threading.Event | None = None) -> None:
    """The families' one-off set-up (:attr:`MeasureFamily.start_up`) in the calling thread,
    in the given order, until ``cancelled`` is set; a set-up that fails is only logged (the
    family sets itself up again when it runs, and reports its own error)."""
    for name in names:
        if cancelled is not None and cancelled.is_set():
            return
        fam = BY_NAME.get(name)
        if fam is None or fam.start_up is None:
            continue
        try:
            fam.start_up()
        except Exception:
            logging.getLogger(__name__).debug("start-up of %s failed", name, exc_info=True)


class StartUp:
    """The one-off set-up of the families ``names`` (:attr:`MeasureFamily.start_up`), begun
    in a thread: a gate runs it while its tables load and its checks run, and its families
    then start without it (it was 0.5-1.3 s of one thread in each attack family's
    first run, 80-97 % of it on the benchmark's 20,000 rows). ``cancel`` skips the families
    not yet begun (a run that ends before its measures: unclean data). A set-up that fails
    is only logged: the family sets itself up again when it runs, and reports its own error.
    """

    def __init__(self, names: Collection[str]) -> None:
        self._cancelled = threading.Event()
        # in the order the families' runs start (:func:`longest_first`)
        self._work = Beside(partial(self._run, longest_first(names)), name="riskgate-start-up")

    def _run(self, names: list[str]) -> None:
        set_up(names, self._cancelled)

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the start-up to end, for at most ``timeout`` seconds."""
        with suppress(TimeoutError):
            self._work.wait(timeout)

    def is_alive(self) -> bool:
        return not self._work.done


#: the order families start in when fewer workers than families run them, by how they scale
_STARTS = {"rows": 1, "whole": 2, "classes": 3}


def longest_first(names: Iterable[str]) -> list[str]:
    """Families in the order their runs should start when fewer workers than families run
    them: those that fit models first, then those that read rows (attacks, copies), the whole
    table, and last equivalence classes (the cheapest), each group in the given order. The
    longest then start first, and the last to end is not one that started last (the ALC at
    1M rows, 2.2-3 s, is the example config's eleventh family of twelve, behind four
    workers)."""
    def rank(name: str) -> int:
        fam = BY_NAME.get(name)
        if fam is None:  # not a family: last (its run says so)
            return len(_STARTS) + 1
        return 0 if fam.fits_models else _STARTS[fam.scale]

    return sorted(names, key=rank)


def start_up(names: Collection[str]) -> StartUp:
    """Begin the families' one-off set-up in a thread (:class:`StartUp`)."""
    return StartUp(names)


__all__ = ["BY_NAME", "FAMILIES", "SECTIONS", "MeasureFamily", "MeasureInputs", "Params",
           "StartUp", "family", "longest_first", "run_measure", "set_up", "start_up"]
