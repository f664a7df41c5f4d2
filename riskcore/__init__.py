"""riskcore: re-identification risk measures for anonymized and synthetic tables.

A plain library (no Prefect): data roles and encoding, equivalence classes, measures, policy and
reports. The release gate in ``flows/`` orchestrates it.
"""

from .classes import ClassFrequencies, frequencies, group_rows
from .data import ColumnType, EncodedTable, MissingPolicy, Roles, encode_table, encode_tables
from .diversity import l_diversity, t_closeness
from .errors import ConfigError, InputError, InsufficientEvidence, RiskgateError, StorageError
from .reid import k_anonymity, reidentification_risk
from .results import MeasureResult

__version__ = "0.1.0"

__all__ = [
    "ClassFrequencies", "ColumnType", "ConfigError", "EncodedTable", "InputError",
    "InsufficientEvidence", "MeasureResult", "MissingPolicy", "RiskgateError", "Roles",
    "StorageError", "encode_table", "encode_tables", "frequencies", "group_rows", "k_anonymity",
    "l_diversity", "reidentification_risk", "t_closeness", "__version__",
]
