"""k-anonymity and its violation counts (sdcMicro ``freqCalc`` / ``print``).

k = min_i fk_i; for each level k, violations_k<k> = sum_i I(fk_i < k) records (and their share).
n1 and n2 are the records in classes of size 1 and 2 (sdcMicro reports n1 as violating
2-anonymity and n1 + n2 as violating 3-anonymity).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import Field, PositiveInt

from ..equivalence import ClassFrequencies
from ..errors import ConfigError
from ..results import MeasureResult
from .family import MeasureFamily, MeasureInputs, Params

DEFAULT_KS = (2, 3, 5, 10)


class KAnonymityParams(Params):
    """Parameters of ``k_anonymity``."""

    ks: list[PositiveInt] = Field(default=list(DEFAULT_KS), min_length=1,
                                  description="k levels to count violating records for")


def k_anonymity(freq: ClassFrequencies, ks: Sequence[int] = DEFAULT_KS) -> MeasureResult:
    """k-anonymity: k = min fk, and for each k the records violating it (sdcMicro).

    Args:
        freq: the sample's class frequencies.
        ks: the k levels to count violations for (default 2, 3, 5, 10).
    """
    levels = sorted({int(k) for k in ks})
    if not levels or levels[0] < 1:
        raise ConfigError(f"k levels must be >= 1, got {levels}")
    fk = freq.fk
    n = freq.n
    figures: dict[str, float | int | None] = {
        "k": _as_number(fk.min()),
        "n": n,
        "n_classes": freq.n_classes,
        "n1": freq.count(fk == 1),
        "n2": freq.count(fk == 2),
    }
    for k in levels:
        count = freq.count(fk < k)
        figures[f"violations_k{k}"] = count
        figures[f"violations_share_k{k}"] = count / n
    sizes, counts = np.unique(freq.class_size.astype(np.int64), return_counts=True)
    return MeasureResult(
        measure="k_anonymity",
        figures=figures,
        parameters={"ks": levels, "quasi_identifiers": list(freq.quasi_identifiers),
                    "missing": freq.missing.value, "alpha": freq.alpha},
        per_record={"fk": fk, "Fk": freq.Fk},
        details={"class_size_histogram": [[int(s), int(c)] for s, c in zip(sizes, counts)]},
    )


def _figures(ks: Sequence[int]) -> dict[str, bool]:
    higher = {"k": False, "n": False, "n_classes": False, "n1": True, "n2": True}
    for k in sorted(set(ks)):
        higher[f"violations_k{k}"] = True
        higher[f"violations_share_k{k}"] = True
    return higher


def _as_number(x: float) -> float | int:
    xf = float(x)
    return int(xf) if xf.is_integer() else xf


def _run(inputs: MeasureInputs, params: KAnonymityParams) -> MeasureResult:
    return k_anonymity(inputs.frequencies(), params.ks)


FAMILY = MeasureFamily(
    name="k_anonymity",
    title="k-anonymity",
    section="reid",
    params=KAnonymityParams,
    run=_run,
    figures=lambda p, roles: _figures(p.ks),
    how_to_read=(
        "k is the size of the smallest group of records that share the same quasi-identifier "
        "values. A record in a group of size 1 is unique: anyone who knows those values finds it. "
        "The violation counts say how many records sit in groups smaller than each k."),
    advice=(
        "Generalize (coarser bands, larger regions) or suppress the quasi-identifier values of "
        "the smallest classes; the class-size histogram shows how many records sit in them."),
    scale="classes",
)
