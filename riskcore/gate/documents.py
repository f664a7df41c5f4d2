"""The small YAML documents riskgate reads (gate configs, policies): from any URL, bounded in
size before parsing and in expanded size after (YAML alias bombs), loaded safely."""

from __future__ import annotations

import hashlib
import json
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
#: collections nested deeper than this are refused (a config nests a few levels)
MAX_DOCUMENT_DEPTH = 50


class _DocumentError(Exception):
    """A duplicate key or too deep a nesting, found while composing (turned into ConfigError)."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses duplicate keys (the last value would silently win) and
    nesting deeper than :data:`MAX_DOCUMENT_DEPTH` (PyYAML's composer recurses per level)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DOCUMENT_DEPTH:
                mark = self.peek_event().start_mark
                raise _DocumentError(f"nests deeper than {MAX_DOCUMENT_DEPTH} levels at line "
                                     f"{mark.line + 1}; a gate config or policy nests a few")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *alias' may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen[key] = line
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if first is not None:
                raise _DocumentError(
                    f"has the key '{key}' twice (lines {first} and {line}); the last one "
                    "would silently win: keep one")
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, what: str) -> Any:
    """YAML loaded safely, with a bound on the document's expanded size (alias bombs)."""
    if len(text.encode("utf-8")) > MAX_DOCUMENT_BYTES:
        raise ConfigError(f"{what} is larger than {MAX_DOCUMENT_BYTES // 1024} KB; a gate "
                          "config or policy is a short document")
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except _DocumentError as exc:
        raise ConfigError(f"{what} {exc}") from None
    except RecursionError:
        raise ConfigError(f"{what} nests too deeply to read; a gate config or policy nests a "
                          "few levels") from None
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
    return read_document_digest(source, storage_options, what)[0]


def read_document_digest(source: str, storage_options: Mapping[str, Any] | None, what: str
                         ) -> tuple[Any, str]:
    """:func:`read_document` and the SHA-256 of the text it parsed (UTF-8): the digest that
    decision.json records for the config and the policy."""
    check_url(source, what)
    text = read_text(source, storage_options, max_bytes=MAX_DOCUMENT_BYTES,
                     what=f"{what} '{redact_text(source)}'")
    return (parse_yaml(text, f"{what} '{redact_text(source)}'"),
            hashlib.sha256(text.encode("utf-8")).hexdigest())


def mapping_digest(data: Any) -> str:
    """The SHA-256 of a document given as a mapping (canonical JSON: sorted keys)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"),
                                     default=str).encode("utf-8")).hexdigest()


