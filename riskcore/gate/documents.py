"""The small YAML documents riskgate reads (gate configs, policies): from any URL, bounded in
size before parsing and in expanded size after (YAML alias bombs), loaded safely."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from ..errors import ConfigError
from ..redact import redact_text
from ..storage import check_url, read_text

#: a config or policy document larger than this is refused before parsing
MAX_DOCUMENT_BYTES = 1 << 20
#: YAML nodes after expanding aliases: a "billion laughs" document stops here
MAX_DOCUMENT_NODES = 100_000


def parse_yaml(text: str, what: str) -> Any:
    """YAML loaded safely, with a bound on the document's expanded size (alias bombs)."""
    if len(text.encode("utf-8")) > MAX_DOCUMENT_BYTES:
        raise ConfigError(f"{what} is larger than {MAX_DOCUMENT_BYTES // 1024} KB; a gate "
                          "config or policy is a short document")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"{what} is not valid YAML{at}: {problem}") from None
    _bounded(data, what)
    return data


def _bounded(data: Any, what: str) -> None:
    count = 0
    stack = [data]
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_DOCUMENT_NODES:
            raise ConfigError(f"{what} expands to more than {MAX_DOCUMENT_NODES:,} values "
                              "(YAML aliases repeated many times?); write the document out")
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_document(source: str, storage_options: Mapping[str, Any] | None, what: str) -> Any:
    """A YAML document from a path or URL: size-bounded, safely loaded, alias-bounded."""
    check_url(source, what)
    text = read_text(source, storage_options, max_bytes=MAX_DOCUMENT_BYTES,
                     what=f"{what} '{redact_text(source)}'")
    return parse_yaml(text, f"{what} '{redact_text(source)}'")


