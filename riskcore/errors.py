"""The riskgate error hierarchy.

Every message names the file (or table), the column or key, and what to do, so that a data
custodian can act on it without reading code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class RiskgateError(Exception):
    """Base class of every error riskgate raises on purpose."""


class InputError(RiskgateError):
    """The data cannot be used as given (missing column, bad values, empty table...)."""


class ConfigError(RiskgateError):
    """The configuration is inconsistent (a role given twice, an unknown measure...)."""


class StorageError(RiskgateError):
    """Reading or writing through fsspec failed (the store may come back: retried)."""


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


def _allowed(err: Any) -> str:
    ctx = err.get("ctx") or {}
    expected = ctx.get("expected")
    return f" (allowed: {expected})" if expected else ""


def validation_lines(exc: ValidationError, prefix: str = "") -> list[str]:
    """One line per pydantic error: the dotted key, what is wrong and what is allowed."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (*([prefix] if prefix else []), *err["loc"]))
        msg = err["msg"]
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc or '(top level)'}: {msg}{_allowed(err)}")
    return lines


def config_error(exc: ValidationError, source: str, prefix: str = "",
                 allowed: dict[str, list[str]] | None = None) -> ConfigError:
    """A ConfigError naming the file, every bad key, and the allowed keys where one is unknown.

    Args:
        exc: pydantic's error.
        source: the file (or "gate config") the keys came from.
        prefix: the key under which the validated mapping sits (e.g. ``measures.reid``).
        allowed: for an unknown key under a mapping, the keys it may hold (by dotted parent).
    """
    lines = validation_lines(exc, prefix)
    if allowed:
        for err in exc.errors():
            if err.get("type") == "extra_forbidden":
                parent = ".".join(str(p) for p in (*([prefix] if prefix else []),
                                                   *err["loc"][:-1]))
                if parent in allowed:
                    lines.append(f"{parent} allows: {', '.join(sorted(allowed[parent]))}")
    body = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(dict.fromkeys(lines))
    return ConfigError(f"{source}: {body}")
