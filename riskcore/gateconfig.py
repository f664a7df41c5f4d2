"""The release-gate configuration (one YAML file, loaded safely, validated with pydantic).

Relative paths in a config file are resolved against the file's folder. Credentials are never
accepted here (see :func:`riskcore.tableio.check_storage_options`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .data import MissingPolicy, Roles
from .errors import ConfigError
from .tableio import DEFAULT_MAX_TABLE_MB, DEFAULT_NA_VALUES, check_storage_options


class ReadOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["auto", "csv", "parquet", "jsonl"] = "auto"
    encoding: str = "utf-8"
    na_values: list[str] = Field(default_factory=lambda: list(DEFAULT_NA_VALUES))
    sep: str | None = None


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_table_mb: float = Field(DEFAULT_MAX_TABLE_MB, gt=0)
    gate_concurrency: int = Field(5, ge=1, description="gate runs at once (seed 001: 5)")
    trigger_rate_per_minute: int = Field(60, ge=1, description="triggered runs (seed 001: 60)")


class Storage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    options: dict[str, Any] = Field(default_factory=dict)
    credentials_block: str | None = Field(
        None, description="name of a Prefect Secret block holding fsspec storage options")

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_storage_options(value, "gate config (storage.options)")
        return value


class ReportOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    detail: Literal["summary", "full"] = Field(
        "summary", description="'full' adds quasi-identifier values of the riskiest records, "
        "labelled as example values; sensitive values and direct identifiers never appear")
    examples: int = Field(10, ge=0, le=1000, description="riskiest records shown with 'full'")


class GateConfig(BaseModel):
    """Everything one gate run needs; see examples/gate.yaml."""

    model_config = ConfigDict(extra="forbid")

    release_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    original: str
    released: str
    control: str | None = None
    identification: str | None = None
    output_url: str
    roles: dict[str, Any]
    missing: MissingPolicy = MissingPolicy.OWN
    alpha: float = Field(1.0, ge=0.0, le=1.0)
    measures: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"k_anonymity": {}, "reid": {}})
    policy: str | dict[str, Any]
    seed: int = 0
    read: ReadOptions = Field(default_factory=ReadOptions)
    limits: Limits = Field(default_factory=Limits)
    storage: Storage = Field(default_factory=Storage)
    review: Literal["none", "pause"] = "none"
    review_timeout_s: int = Field(3600, ge=1)
    report: ReportOptions = Field(default_factory=ReportOptions)

    @field_validator("roles")
    @classmethod
    def _roles_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        Roles.from_mapping(value)
        return value

    @property
    def role_spec(self) -> Roles:
        return Roles.from_mapping(self.roles)

    def tables(self) -> dict[str, str]:
        """Role name -> URL of every table in the run."""
        out = {"original": self.original, "released": self.released}
        if self.control:
            out["control"] = self.control
        if self.identification:
            out["identification"] = self.identification
        return out

    def public_dict(self) -> dict[str, Any]:
        """The config as recorded in outputs (URLs without credentials)."""
        from .tableio import redact_url

        data = self.model_dump(mode="json")
        for key in ("original", "released", "control", "identification", "output_url"):
            if data.get(key):
                data[key] = redact_url(data[key])
        return data


def _resolve(path: str | None, base: Path) -> str | None:
    if path is None or "://" in path or os.path.isabs(path):
        return path
    return str((base / path).resolve())


def load_gate_config(source: str | Path | dict[str, Any], base_dir: Path | None = None
                     ) -> GateConfig:
    """Load and validate a gate config from a YAML file or a mapping.

    Relative table, output and policy paths are resolved against the file's folder (or
    ``base_dir``).
    """
    if isinstance(source, dict):
        data = dict(source)
        base = base_dir or Path.cwd()
    else:
        path = Path(source)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file '{path}' does not exist") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file '{path}' is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping at the top level")
        base = base_dir or path.parent.resolve()
    for key in ("original", "released", "control", "identification", "output_url"):
        if isinstance(data.get(key), str):
            data[key] = _resolve(data[key], base)
    if isinstance(data.get("policy"), str):
        data["policy"] = _resolve(data["policy"], base)
    try:
        return GateConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"{loc}: {err['msg']}")
        raise ConfigError("invalid gate config:\n  " + "\n  ".join(lines)) from None
