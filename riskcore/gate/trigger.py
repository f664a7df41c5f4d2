"""The trigger contract: what the ``riskgate.anonymization.completed`` event carries.

A pipeline that has just anonymized a table emits the event with a payload naming the release
and the released file (and optionally the config, the other tables, the output location, the
policy and the SHA-256 of the files it wrote). The triggered gate run gates exactly those files:
every payload key overrides the config's, the checksums are verified against what is read, and
a payload without ``release_id`` or ``released`` is an ERROR with its reason, never a silent run
on the config's defaults.
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


class TriggerPayload(BaseModel):
    """The payload of ``riskgate.anonymization.completed``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    release_id: str = Field(pattern=RELEASE_ID_PATTERN)
    released: str = Field(min_length=1, description="URL of the released table to gate")
    config: str | None = Field(None, description="gate config URL (default: the deployment's)")
    original: str | None = None
    control: str | None = None
    identification: str | None = None
    output_url: str | None = None
    policy: str | None = None
    checksums: dict[str, str] = Field(
        default_factory=dict, description="table name -> SHA-256 of the file as written")

    def overrides(self) -> dict[str, Any]:
        keys = ("release_id", "released", "original", "control", "identification",
                "output_url", "policy")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


def payload_sha256(payload: Mapping[str, Any]) -> str:
    """SHA-256 of the payload as canonical JSON (recorded in decision.json)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                     default=str).encode("utf-8")).hexdigest()


def parse_payload(payload: Any, event_id: str | None = None) -> TriggerPayload:
    """Validate a trigger payload; ConfigError naming the event and every missing/bad key."""
    where = f"trigger event {event_id}" if event_id else "trigger event"
    if not isinstance(payload, Mapping):
        raise ConfigError(f"{where}: the payload must be a mapping with release_id and "
                          "released")
    found = find_credentials(dict(payload))
    if found:
        raise ConfigError(f"{where}: payload key '{found}' carries credentials; pipelines "
                          "must never send credentials in events")
    try:
        parsed = TriggerPayload.model_validate(dict(payload))
    except ValidationError as exc:
        raise config_error(exc, where, prefix="payload",
                           allowed={"payload": list(TriggerPayload.model_fields)}) from None
    bad = {k: v for k, v in parsed.checksums.items()
           if k not in ("original", "released", "control", "identification")
           or not isinstance(v, str) or len(v) != 64
           or any(ch not in "0123456789abcdef" for ch in v)}
    if bad:
        raise ConfigError(f"{where}: payload.checksums must map table names (original, "
                          "released, control, identification) to lowercase SHA-256 hex; bad: "
                          f"{sorted(bad)}")
    return parsed
