"""The trigger contract: what the ``riskgate.anonymization.completed`` event may carry.

A pipeline that has just anonymized a table emits the event with a payload naming the release
and the released file, optionally the control table and the SHA-256 of the files it wrote, and
only the further keys that the custodian's pinned config allows (``trigger.allow``). The party
whose release is judged never chooses the rules it is judged by: the config, the policy, the
original and the output folder come from the deployment (``riskgate deploy --trigger-config``),
never from a payload. Any other key is an ERROR naming the key and the config that forbids it;
with ``trigger.released_prefixes``, ``released`` and ``control`` must lie under one of them.
The checksums are verified against what is read, and a payload without ``release_id`` or
``released`` is an ERROR with its reason, never a silent run on the config's defaults.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError, config_error
from ..redact import find_credentials

#: what a release id may be: it names folders, tags and runs
RELEASE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

TRIGGER_EVENT = "riskgate.anonymization.completed"
SHA256 = r"^[0-9a-f]{64}$"


#: what a payload may always name; ``ALLOWABLE`` keys only when the pinned config allows them
BASE_KEYS = ("release_id", "released", "control", "checksums")
ALLOWABLE = ("identification",)
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
                  config_name: str | None = None) -> TriggerPayload:
    """Validate a trigger payload against the contract and, given the pinned config's
    ``trigger`` rules (:class:`riskcore.gate.config.TriggerRules`) and its name, against what
    that config allows. ConfigError naming the event, the key and the config."""
    where = f"trigger event {event_id}" if event_id else "trigger event"
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
            raise ConfigError(
                f"{where}: payload key '{key}' is not allowed by {pinned} (a payload names "
                f"{', '.join(BASE_KEYS)}, and what the config's trigger.allow lists: "
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
            if url is not None and (not any(url.startswith(p) for p in prefixes)
                                    or {".", ".."} & set(url.split("/"))):
                raise ConfigError(
                    f"{where}: payload.{key} lies outside every trigger.released_prefixes of "
                    f"{pinned} ({', '.join(prefixes)}); a pipeline may only name files there")
    return parsed
