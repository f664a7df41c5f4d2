"""The trigger contract: what a judged pipeline may say about its release.

A pipeline that has just anonymized a table announces it in one of two ways, and says the
same things in both: the release id, the released file and, optionally, the SHA-256 of the
files it wrote, plus only the further keys that the custodian's pinned config allows
(``trigger.allow``: ``control``, ``identification``).

* **A release manifest** (the way for a judged pipeline): ``release.json`` beside the release,
  under one of the config's ``trigger.released_prefixes``, written with nothing but the
  pipeline's write access to that prefix (:func:`parse_manifest`); the ``watch-releases``
  deployment finds it.
* **An event**, ``riskgate.anonymization.completed`` (for a pipeline the custodian runs: it
  needs the Prefect API's auth string, and whoever holds that holds the rules).

The party whose release is judged never chooses the rules it is judged by: the config, the
policy, the original, the control (unless allowed) and the output folder come from the
deployment (``riskgate deploy --trigger-config``), never from a payload. Any other key is an
ERROR naming the key and the config that forbids it; with ``trigger.released_prefixes``, every
table a payload names must lie under one of them. The checksums are verified against what is
read, and a payload without ``release_id`` or ``released`` is an ERROR with its reason, never a
silent run on the config's defaults.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError, config_error
from ..redact import find_credentials
from ..storage import under_prefix

#: what a release id may be: it names folders, tags and runs
RELEASE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

TRIGGER_EVENT = "riskgate.anonymization.completed"
SHA256 = r"^[0-9a-f]{64}$"


#: what a payload may always name; ``ALLOWABLE`` keys only when the pinned config allows them
#: (the control is the custodian's holdout: a judged party that named its own made-up rows as
#: the control would turn a membership alarm into a pass)
BASE_KEYS = ("release_id", "released", "checksums")
ALLOWABLE = ("identification", "control")
#: what a payload may never name: the custodian's rules and the inputs they are judged on
NEVER = ("config", "policy", "original", "output_url")


class TriggerPayload(BaseModel):
    """The payload of ``riskgate.anonymization.completed``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    release_id: str = Field(pattern=RELEASE_ID_PATTERN)
    released: str = Field(min_length=1, description="URL of the released table to gate")
    control: str | None = None
    identification: str | None = None
    checksums: dict[str, str] = Field(
        default_factory=dict, description="table name -> SHA-256 of the file as written")

    def overrides(self) -> dict[str, Any]:
        keys = ("release_id", "released", "control", "identification")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


def payload_sha256(payload: Mapping[str, Any]) -> str:
    """SHA-256 of the payload as canonical JSON (recorded in decision.json)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                     default=str).encode("utf-8")).hexdigest()


def parse_payload(payload: Any, event_id: str | None = None, rules: Any = None,
                  config_name: str | None = None, where: str | None = None) -> TriggerPayload:
    """Validate a trigger payload against the contract and, given the pinned config's
    ``trigger`` rules (:class:`riskcore.gate.config.TriggerRules`) and its name, against what
    that config allows. ConfigError naming the event (or ``where``), the key and the config."""
    where = where or (f"trigger event {event_id}" if event_id else "trigger event")
    pinned = f"the config {config_name}" if config_name else "the deployment's pinned config"
    if not isinstance(payload, Mapping):
        raise ConfigError(f"{where}: the payload must be a mapping with release_id and "
                          "released")
    found = find_credentials(dict(payload))
    if found:
        raise ConfigError(f"{where}: payload key '{found}' carries credentials; pipelines "
                          "must never send credentials in events")
    allowed = set(BASE_KEYS) | set(getattr(rules, "allow", None) or (
        ALLOWABLE if rules is None else ()))
    for key in map(str, payload):
        if key in NEVER:
            raise ConfigError(
                f"{where}: payload key '{key}' is forbidden by {pinned}: the config, policy, "
                "original and output folder are the custodian's, pinned by the deployment "
                "(riskgate deploy --trigger-config URL), never named by the pipeline")
        if key not in allowed:
            why = (" (the control is the custodian's holdout: the config's own is used)"
                   if key == "control" else "")
            raise ConfigError(
                f"{where}: payload key '{key}' is not allowed by {pinned}{why} (a payload "
                f"names {', '.join(BASE_KEYS)}, and what the config's trigger.allow lists: "
                f"{sorted(getattr(rules, 'allow', None) or []) or 'nothing'})")
    try:
        parsed = TriggerPayload.model_validate(dict(payload))
    except ValidationError as exc:
        raise config_error(exc, where, prefix="payload",
                           allowed={"payload": sorted(allowed)}) from None
    bad = {k: v for k, v in parsed.checksums.items()
           if k not in ("original", "released", "control", "identification")
           or not isinstance(v, str) or len(v) != 64
           or any(ch not in "0123456789abcdef" for ch in v)}
    if bad:
        raise ConfigError(f"{where}: payload.checksums must map table names (original, "
                          "released, control, identification) to lowercase SHA-256 hex; bad: "
                          f"{sorted(bad)}")
    prefixes = list(getattr(rules, "released_prefixes", None) or [])
    if prefixes:
        for key in ("released", "control", "identification"):
            url = getattr(parsed, key)
            if url is not None and not any(under_prefix(url, p) for p in prefixes):
                raise ConfigError(
                    f"{where}: payload.{key} lies outside every trigger.released_prefixes of "
                    f"{pinned} ({', '.join(prefixes)}); a pipeline may only name files there")
    return parsed


#: the manifest a pipeline writes beside its release
MANIFEST_NAME = "release.json"


def folder_release_id(url: str) -> str:
    """The release id a manifest's refusal is filed under when the manifest names none that
    can be read: its folder's path, bucket included, with '-' for '/' (``s3://releases/
    census/v2/release.json`` -> ``releases-census-v2``): what ``riskgate history`` finds."""
    import re

    folder = url.split("://", 1)[-1].rsplit("/", 1)[0]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", folder).strip("-._")
    slug = slug[-128:].lstrip("-._") or "manifest"
    return slug if re.match(RELEASE_ID_PATTERN, slug) else "manifest"
#: a manifest larger than this is refused unread (it names a few files)
MAX_MANIFEST_BYTES = 64 * 1024
#: a manifest's keys that name files beside it
_FILE_KEYS = ("released", "control", "identification")


def parse_manifest(raw: bytes, url: str, rules: Any = None,
                   config_name: str | None = None) -> TriggerPayload:
    """A release manifest (``release.json``) as a trigger payload: ``{"release_id": ...,
    "released": "<file or folder beside it>", "checksums": {...}}``, strict JSON (a key named
    twice is refused), each file named relative to the manifest's folder and resolved there
    (never a URL, an absolute path or a '..'), then :func:`parse_payload` with the pinned
    rules. ConfigError naming the manifest and the key."""
    from ..signing import DuplicateKey, strict_json

    where = f"release manifest '{url}'"
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ConfigError(f"{where} is {len(raw):,} bytes; a manifest names a few files "
                          f"(at most {MAX_MANIFEST_BYTES // 1024} KB)")
    try:
        doc = strict_json(raw)
    except DuplicateKey as exc:
        raise ConfigError(f"{where} names the key '{exc}' twice; keep one") from None
    except ValueError as exc:
        raise ConfigError(f"{where} is not JSON ({exc}); write {{\"release_id\": ..., "
                          "\"released\": \"<file beside it>\"}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where} must hold a JSON object with release_id and released")
    folder = url.rsplit("/", 1)[0] + "/"
    payload = dict(doc)
    for key in _FILE_KEYS:
        name = payload.get(key)
        if name is None:
            continue
        if not isinstance(name, str) or not name.strip() or "://" in name or \
                name.startswith(("/", "\\")) or {".", ".."} & set(name.split("/")):
            raise ConfigError(f"{where}: '{key}' must name a file or folder beside the "
                              "manifest, relative to its folder (no URL, absolute path or "
                              "'..')")
        payload[key] = folder + name
    return parse_payload(payload, rules=rules, config_name=config_name, where=where)
