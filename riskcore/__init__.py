"""riskcore: re-identification risk measures for anonymized and synthetic tables.

A plain library (no Prefect): column roles and the one encoding pass, equivalence classes, the
measure families and their registry, the release gate's steps (``riskcore.gate``) and the
report (``riskcore.report``). The Prefect flows in ``riskgate.flows`` orchestrate it.

    >>> from riskcore import Roles, encode_table, run_measure, MeasureInputs
    >>> table = encode_table(df, Roles(("region", "age", "sex")), name="released")
    >>> run_measure("reid", MeasureInputs(released=table), {"threshold": 0.1}).figures["pRb"]

Names load on first use, so that ``import riskcore.errors`` (or a config check) does not load
the data libraries.
"""

from __future__ import annotations

from typing import Any

from .lazy import load_name

__version__ = "0.2.0"

#: public name -> module that defines it
_API = {
    "ColumnType": "roles", "MissingPolicy": "roles", "Roles": "roles",
    "EncodedTable": "data", "encode_table": "data", "encode_tables": "data",
    "ClassFrequencies": "equivalence", "frequencies": "equivalence",
    "group_rows": "equivalence",
    "ConfigError": "errors", "InputError": "errors", "InsufficientEvidence": "errors",
    "RiskgateError": "errors", "StorageError": "errors",
    "FAMILIES": "measures", "MeasureFamily": "measures", "MeasureInputs": "measures",
    "family": "measures", "run_measure": "measures",
    "k_anonymity": "measures.k_anonymity", "l_diversity": "measures.l_diversity",
    "reidentification_risk": "measures.reid", "t_closeness": "measures.t_closeness",
    "MeasureResult": "results", "Status": "results",
}

__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    return load_name(__name__, _API, globals(), name)


def __dir__() -> list[str]:
    return __all__
