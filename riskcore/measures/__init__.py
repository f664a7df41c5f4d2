"""The measure families and their one registry.

``FAMILIES`` is an explicit tuple, in report order; the gate config, the policy, the CLI, the
report and the tests read it and keep no list of their own. Adding a family means one module
with a :class:`~riskcore.measures.family.MeasureFamily` and one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import progress
from ..errors import ConfigError
from ..results import MeasureResult
from . import (
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
    """Run one family on the encoded inputs (parameters validated if given raw)."""
    fam = family(name)
    with progress.scope(name):
        return fam.run(inputs, fam.parse(params))


__all__ = ["BY_NAME", "FAMILIES", "SECTIONS", "MeasureFamily", "MeasureInputs", "Params",
           "family", "run_measure"]
