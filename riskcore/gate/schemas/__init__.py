"""Versioned JSON schemas of riskgate's outputs, shipped with the package.

One schema per document riskgate writes: ``decision.json`` (``riskgate.decision/1``),
``measures.json`` and ``riskgate measure --json`` (``riskgate.measures/1``), ``validation.json``
(``riskgate.validation/1``), ``riskgate attack --json`` (``riskgate.attack/1``) and
``riskgate alc --json`` (``riskgate.alc/1`` for one scenario, ``riskgate.alc-set/1`` for
several). A breaking change to a layout gets a new version number and a new schema file.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent
SCHEMAS = {"riskgate.decision/1": "decision-1.schema.json",
           "riskgate.measures/1": "measures-1.schema.json",
           "riskgate.validation/1": "validation-1.schema.json",
           "riskgate.attack/1": "attack-1.schema.json",
           "riskgate.alc/1": "alc-1.schema.json",
           "riskgate.alc-set/1": "alc-set-1.schema.json"}


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON schema for a document's ``schema`` value (e.g. ``riskgate.decision/1``)."""
    try:
        return json.loads((_HERE / SCHEMAS[name]).read_text(encoding="utf-8"))
    except KeyError:
        raise KeyError(f"no schema for '{name}'; known: {sorted(SCHEMAS)}") from None


def validate(document: dict[str, Any]) -> None:
    """Validate a riskgate output against the schema it names (raises jsonschema's
    ValidationError with the path of the first problem)."""
    import jsonschema

    schema = load_schema(str(document.get("schema")))
    jsonschema.Draft202012Validator(schema).validate(document)
