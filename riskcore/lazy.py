"""Names a package loads on first use (PEP 562), so that importing it stays cheap.

``riskcore`` and ``riskcore.gate`` list each public name with the module that defines it; a
name is imported when first read and then kept in the package's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any


def load_name(package: str, api: Mapping[str, str], namespace: dict[str, Any],
              name: str) -> Any:
    """``name`` from the module ``api`` gives it (relative to ``package``), kept in
    ``namespace``; AttributeError for a name the package does not have."""
    module = api.get(name)
    if module is None:
        raise AttributeError(f"module '{package}' has no attribute '{name}'")
    value = getattr(import_module(f".{module}", package), name)
    namespace[name] = value
    return value
