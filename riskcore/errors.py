"""The riskgate error hierarchy.

Every message names the file (or table), the column and what to do, so that a data custodian
can act on it without reading code.
"""

from __future__ import annotations


class RiskgateError(Exception):
    """Base class of every error riskgate raises on purpose."""


class InputError(RiskgateError):
    """The data cannot be used as given (missing column, bad values, empty table...)."""


class ConfigError(RiskgateError):
    """The configuration is inconsistent (a role given twice, an unknown measure...)."""


class StorageError(RiskgateError):
    """Reading or writing through fsspec failed."""


class InsufficientEvidence(RiskgateError):
    """A measure ran but its evidence does not allow a conclusion."""


def where(table: str | None, column: str | None = None) -> str:
    """Format the 'table X, column Y' part of a message."""
    parts = []
    if table:
        parts.append(f"table '{table}'")
    if column:
        parts.append(f"column '{column}'")
    return ", ".join(parts) if parts else "input"
