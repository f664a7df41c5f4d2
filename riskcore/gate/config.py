"""The release-gate configuration: one YAML document, loaded safely and validated completely
before any table is read.

:func:`load_gate` reads the config from a path or any fsspec URL, applies overrides (a trigger
event's payload), resolves relative paths against the config's own folder, validates every key
(unknown keys, wrong types, each measure family's parameters with its own model), refuses
credentials wherever they hide, loads the policy and checks every figure it names against the
families' figures. A typo is a :class:`~riskcore.errors.ConfigError` naming the file, the key
and the allowed values, in well under a second.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ConfigError, RiskgateError, config_error
from ..formats import Markers
from ..generalization import (
    DEFAULT_MIN_COMPARABLE,
    DEFAULT_SUPPRESSED,
    NUMERIC_KINDS,
    GeneralizationSpec,
    parse_spec,
)
from ..identifiers.phones import DEFAULT_REGIONS
from ..measures import BY_NAME, family
from ..measures.family import Params
from ..redact import redact_text, urls_with_credentials
from ..roles import ColumnType, MissingPolicy, Roles
from ..storage import check_storage_options, check_url, parent, resolve
from .documents import mapping_digest, read_document_digest
from .policy import Policy, load_policy
from .trigger import RELEASE_ID_PATTERN

DEFAULT_NA_VALUES = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
DEFAULT_MAX_TABLE_MB = 2048.0
#: the keys an event payload or the CLI may override
OVERRIDABLE = ("release_id", "original", "released", "control", "identification", "output_url",
               "policy", "report_detail")
URL_KEYS = ("original", "released", "control", "custodian_control", "identification",
            "output_url")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReadOptions(_Model):
    format: Literal["auto", "csv", "parquet", "jsonl"] = "auto"
    encoding: str = Field("utf-8", description="text encoding of CSV/JSONL, or auto")
    na_values: list[str] = Field(default_factory=lambda: list(DEFAULT_NA_VALUES))
    sep: str | None = Field(None, min_length=1, max_length=1)


class Limits(_Model):
    max_table_mb: float = Field(DEFAULT_MAX_TABLE_MB, gt=0,
                                description="size limit per table, after decompression")

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            moved = [k for k in ("gate_concurrency", "trigger_rate_per_minute") if k in data]
            if moved:
                raise ValueError(
                    f"{', '.join(moved)} no longer belong in a gate config (one config must not "
                    "resize the limit every gate shares): set them once with 'riskgate limits "
                    "--gate N --trigger-rate M'")
        return data


class Storage(_Model):
    options: dict[str, str | int | float | bool | None | dict[str, Any] | list[Any]] = Field(
        default_factory=dict, description="fsspec storage options (never credentials)")
    credentials_block: str | None = Field(
        None, description="name of a Prefect Secret block holding fsspec storage options")

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_storage_options(value, "storage.options")
        return value


class TriggerRules(_Model):
    """What a trigger's payload (an event's, or a release manifest's) may name, pinned by the
    custodian's config.

    A payload always names ``release_id`` and ``released``, and may name ``checksums``; any
    further key must be listed in ``allow`` (``control`` and ``identification`` can be: the
    control is the custodian's holdout, so the config's own is used unless the custodian lets
    the pipeline name one); ``config``, ``policy``, ``original`` and ``output_url`` never come
    from a payload. With ``released_prefixes``, every table a payload names must lie under one
    of them, and a pipeline publishes manifests there (``watch-releases``)."""

    allow: list[Literal["identification", "control"]] = Field(default_factory=list)
    released_prefixes: list[str] = Field(default_factory=list)

    @field_validator("released_prefixes")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            check_url(prefix, "trigger.released_prefixes")
            if not prefix.endswith("/"):
                raise ValueError(f"trigger.released_prefixes: '{prefix}' must end with '/' "
                                 "(a folder), so that s3://releases/census-x cannot pass "
                                 "for s3://releases/census/")
        return value


class Signing(_Model):
    """Kept so that an older config's ``signing.secret_block`` is one clear line: the key is
    never in a Prefect Secret block (anyone holding the API's auth string can read blocks);
    the gate signs through ``riskgate signer`` (RISKGATE_SIGNER_SOCKET)."""

    secret_block: str | None = None

    @field_validator("secret_block")
    @classmethod
    def _not_a_block(cls, value: str | None) -> str | None:
        if value:
            raise ValueError(
                "a signing key in a Prefect Secret block is readable by anyone holding the "
                "API's auth string; remove signing.secret_block, run riskgate signer as its "
                "own user and set RISKGATE_SIGNER_SOCKET on the worker")
        return value


class ReportOptions(_Model):
    detail: Literal["summary", "full"] = Field(
        "summary", description="'full' adds quasi-identifier values of the riskiest records, "
        "labelled as example values; sensitive values and direct identifiers never appear")
    examples: int = Field(10, ge=0, le=1000, description="riskiest records shown with 'full'")
    base_url: str | None = Field(
        None, description="HTTP(S) URL under which output_url is served: the report link "
        "becomes base_url + <release>/<run>/report.html")
    link_expiry_s: int = Field(7 * 24 * 3600, ge=60, le=7 * 24 * 3600,
                               description="lifetime of a presigned report link (S3)")


class RolesConfig(_Model):
    quasi_identifiers: list[str] = Field(default_factory=list, alias="qi")
    sensitive: list[str] = Field(default_factory=list)
    weight: str | None = None
    household: str | None = None
    direct_identifiers: list[str] = Field(default_factory=list)
    types: dict[str, ColumnType] = Field(default_factory=dict)
    #: column -> the cells that mean missing in it (besides the config's missing_values)
    missing_values: dict[str, list[str]] = Field(default_factory=dict)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _consistent(self) -> RolesConfig:
        if not self.quasi_identifiers:
            raise ValueError("name at least one quasi-identifier (roles.quasi_identifiers)")
        try:
            roles = self.to_roles()
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        for col in self.missing_values:
            if col not in roles.measured_columns:
                raise ValueError(f"missing_values names column '{col}', which has no measured "
                                 f"role (those: {list(roles.measured_columns)}); give it a "
                                 "role or drop the entry")
        return self

    def to_roles(self) -> Roles:
        return Roles(quasi_identifiers=tuple(self.quasi_identifiers),
                     sensitive=tuple(self.sensitive), weight=self.weight,
                     household=self.household,
                     direct_identifiers=tuple(self.direct_identifiers), types=dict(self.types))


class IdentifierRules(_Model):
    """The scan for direct identifiers nobody declared (:mod:`riskcore.identifiers`): the
    kinds the custodian accepts in a column, the share of cells above which a kind fails
    (national identifiers, cards and IBANs fail at one), and the regions whose phone numbers
    are read in their national form."""

    allow: dict[str, list[str]] = Field(default_factory=dict)
    threshold: float = Field(0.001, ge=0.0, lt=1.0)
    regions: list[str] = Field(default_factory=lambda: list(DEFAULT_REGIONS))

    @field_validator("allow")
    @classmethod
    def _kinds(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        from ..identifiers import kind_name, kind_titles

        known = kind_titles()
        for col, kinds in value.items():
            bad = [k for k in kinds if kind_name(k) not in known]
            if bad:
                raise ValueError(f"identifiers.allow.{col}: unknown kind(s) {bad} (known: "
                                 f"{', '.join(known)})")
        return {col: [kind_name(k) for k in kinds] for col, kinds in value.items()}

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        from ..identifiers.phones import valid_region

        upper = [str(r).upper() for r in value]
        bad = [r for r in upper if not valid_region(r)]
        if bad:
            raise ValueError(f"identifiers.regions: unknown region(s) {bad}; give ISO 3166 "
                             "two-letter codes (DE, FR, US)")
        return list(dict.fromkeys(upper))


class TablesConfig(_Model):
    """The tables of a run and how to read, type and encode them (what the gate and the
    ``measure``, ``attack`` and ``alc`` commands share)."""

    original: str | None = None
    released: str
    control: str | None = None
    #: the config's own control when a trigger payload named another (``trigger.allow:
    #: [control]``): the release is judged against both and the worse verdict kept
    custodian_control: str | None = None
    identification: str | None = None
    roles: RolesConfig
    missing: MissingPolicy = MissingPolicy.OWN
    alpha: float = Field(1.0, ge=0.0, le=1.0)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    read: ReadOptions = Field(default_factory=lambda: ReadOptions())
    limits: Limits = Field(default_factory=lambda: Limits())
    #: released column -> how it was generalized from the original (riskcore.generalization)
    generalization: dict[str, str | dict[str, float | str]] = Field(default_factory=dict)
    #: released cells meaning "any value" (suppressed); empty cells stay missing
    suppressed: list[str] = Field(default_factory=lambda: list(DEFAULT_SUPPRESSED))
    #: the domain check: an attack on a column whose share of comparable values is lower is
    #: insufficient evidence
    min_comparable: float = Field(DEFAULT_MIN_COMPARABLE, ge=0.0, le=1.0)
    #: cells that mean missing in every column of every table (survey data's N, -9, ?),
    #: applied at load before any type is decided; per column: roles.missing_values
    missing_values: list[str] = Field(default_factory=list)
    #: released columns the original lacks that the custodian accepts in the release
    #: unmeasured (any other such column is refused)
    ignore_columns: list[str] = Field(default_factory=list)
    #: the scan of every published column for undeclared direct identifiers
    identifiers: IdentifierRules = Field(default_factory=lambda: IdentifierRules())

    @property
    def markers(self) -> Markers:
        """The missing-value markers: for every column, and per column."""
        return Markers(tuple(self.missing_values),
                       {c: tuple(v) for c, v in self.roles.missing_values.items()})

    @model_validator(mode="after")
    def _generalization(self) -> TablesConfig:
        roles = self.roles.to_roles()
        known = set(roles.quasi_identifiers) | set(roles.sensitive)
        for col, raw in self.generalization.items():
            if col not in known:
                raise ValueError(f"generalization names column '{col}' that is neither a "
                                 f"quasi-identifier nor sensitive (those: {sorted(known)})")
            parse_spec(raw, col)
        return self

    def generalization_specs(self) -> dict[str, GeneralizationSpec]:
        """The declared generalizations, validated."""
        return {col: parse_spec(raw, col) for col, raw in self.generalization.items()}

    @model_validator(mode="after")
    def _urls(self) -> TablesConfig:
        for key in ("original", "released", "control", "custodian_control", "identification"):
            value = getattr(self, key)
            if value:
                check_url(value, key)
        if self.original and self.original == self.released:
            raise ValueError("original and released name the same file; gate the anonymized "
                             "file against its original")
        return self

    @property
    def role_spec(self) -> Roles:
        """The roles; a column generalized into labels (intervals, masks, hierarchy levels) is
        categorical unless its type is given."""
        roles = self.roles.to_roles()
        labelled = {col: ColumnType.CATEGORICAL for col, spec in
                    self.generalization_specs().items()
                    if spec.kind not in NUMERIC_KINDS and col not in roles.types}
        if not labelled:
            return roles
        return replace(roles, types={**roles.types, **labelled})

    def tables(self) -> dict[str, str]:
        """Role name -> URL of every table in the run."""
        out = {"original": self.original, "released": self.released,
               "control": self.control, "custodian_control": self.custodian_control,
               "identification": self.identification}
        return {k: v for k, v in out.items() if v}


class GateConfig(TablesConfig):
    """Everything one gate run needs; see examples/gate.yaml."""

    release_id: str = Field(pattern=RELEASE_ID_PATTERN)
    original: str
    output_url: str
    measures: dict[str, SerializeAsAny[Params]] = Field(
        default_factory=lambda: {"k_anonymity": BY_NAME["k_anonymity"].parse({}),
                                 "reid": BY_NAME["reid"].parse({})})
    policy: str | dict[str, Any]
    storage: Storage = Field(default_factory=lambda: Storage())
    review: Literal["none", "pause"] = "none"
    review_timeout_s: int = Field(3600, ge=1, le=30 * 24 * 3600)
    report: ReportOptions = Field(default_factory=lambda: ReportOptions())
    trigger: TriggerRules = Field(default_factory=lambda: TriggerRules())
    signing: Signing = Field(default_factory=lambda: Signing())

    @field_validator("measures", mode="before")
    @classmethod
    def _families(cls, value: Any) -> dict[str, Params]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("measures must map family names to their parameters")
        out: dict[str, Params] = {}
        for name, raw in value.items():
            if name not in BY_NAME:
                raise ValueError(f"unknown measure family '{name}' (allowed: "
                                 f"{', '.join(BY_NAME)})")
            if raw is not None and not isinstance(raw, (Mapping, Params)):
                raise ValueError(f"measures.{name} must be a mapping of parameters")
            out[str(name)] = BY_NAME[name].parse(raw)
        return out

    @model_validator(mode="after")
    def _cross_checks(self) -> GateConfig:
        roles = self.role_spec
        for name, params in self.measures.items():
            BY_NAME[name].validate_for(params, roles, "gate config")
        check_url(self.output_url, "output_url")
        if isinstance(self.policy, str):
            check_url(self.policy, "policy")
        if self.report.base_url and not self.report.base_url.startswith(("http://", "https://")):
            raise ValueError("report.base_url must start with http:// or https://")
        return self

    def public_dict(self) -> dict[str, Any]:
        """The config as recorded in outputs (redacted)."""
        from ..redact import redact

        return redact(self.model_dump(mode="json", by_alias=False))  # type: ignore[no-any-return]


#: where a config comes from: a path, an fsspec URL, or the mapping itself
Source = str | os.PathLike[str] | Mapping[str, Any]


def tables_config(data: Mapping[str, Any], source: str) -> TablesConfig:
    """The tables part of a config built by a command (ConfigError naming the key)."""
    try:
        return TablesConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise config_error(exc, source) from None


@dataclass(frozen=True)
class Gate:
    """A loaded, validated gate: its config, its policy and the measures it will run.

    ``measures`` holds every configured family plus every family the policy checks (with its
    default parameters), each validated.
    """

    config: GateConfig
    policy: Policy
    measures: dict[str, Params]
    source: str
    #: config, policy and each table: where it came from, its URL and (config, policy) SHA-256
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)


def config_mapping(source: Source, overrides: Mapping[str, Any] | None = None,
                   storage_options: Mapping[str, Any] | None = None,
                   digest: list[str] | None = None, keep_own: tuple[str, ...] = ()
                   ) -> tuple[dict[str, Any], str]:
    """The raw config mapping with overrides applied and relative paths resolved (and, into
    ``digest``, the SHA-256 of the document as read). For each key of ``keep_own`` (a
    control a trigger payload names) that the overrides replace, the config's own value is
    kept beside it as ``custodian_<key>``: the judged party's table never replaces the
    custodian's, it is judged beside it."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, Mapping):
        data: Any = dict(source)
        base, name = ".", "gate config"
        sha = mapping_digest(data)
    else:
        data, sha = read_document_digest(source, storage_options, "config file")
        base, name = parent(source), f"config file '{redact_text(source)}'"
    if digest is not None:
        digest[:] = [sha]
    if not isinstance(data, Mapping):
        raise ConfigError(f"{name} must hold a mapping at the top level")
    data = dict(data)
    bad = sorted(set(overrides or {}) - set(OVERRIDABLE))
    if bad:
        raise ConfigError(f"overrides: unknown key(s) {bad} (allowed: {', '.join(OVERRIDABLE)})")
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    for key in keep_own:
        own = data.get(key)
        if key in given and isinstance(own, str) and own and own != given[key]:
            data[f"custodian_{key}"] = own
    if "report_detail" in given:
        report = data.get("report")
        data["report"] = {**(report if isinstance(report, Mapping) else {}),
                          "detail": given.pop("report_detail")}
    data.update(given)
    found = urls_with_credentials({k: v for k, v in data.items() if k != "storage"})
    if found:
        raise ConfigError(f"{name}: '{found}' carries credentials (user:password@ or a secret "
                          "key); remove them and set them in the environment or a Prefect "
                          "Secret block")
    for key in (*URL_KEYS, "policy"):
        if isinstance(data.get(key), str):
            data[key] = resolve(data[key], base)
    data["generalization"] = resolve_hierarchies(data.get("generalization"), base)
    return data, name


def resolve_hierarchies(generalization: Any, base: str) -> Any:
    """Hierarchy files of a ``generalization:`` mapping, like tables, relative to the config."""
    if not isinstance(generalization, Mapping):
        return generalization if generalization is not None else {}
    return {col: ({**spec, "hierarchy": resolve(spec["hierarchy"], base)}
                  if isinstance(spec, Mapping) and isinstance(spec.get("hierarchy"), str)
                  else spec) for col, spec in generalization.items()}


def load_config(source: Source, overrides: Mapping[str, Any] | None = None,
                storage_options: Mapping[str, Any] | None = None,
                digest: list[str] | None = None, keep_own: tuple[str, ...] = ()
                ) -> GateConfig:
    """Load and validate a gate config (see :func:`load_gate` for the policy too)."""
    data, name = config_mapping(source, overrides, storage_options, digest, keep_own)
    try:
        return GateConfig.model_validate(data)
    except ValidationError as exc:
        allowed = {"": list(GateConfig.model_fields),
                   "roles": ["quasi_identifiers", "sensitive", "weight", "household",
                             "direct_identifiers", "types", "missing_values"],
                   "read": list(ReadOptions.model_fields),
                   "limits": list(Limits.model_fields),
                   "report": list(ReportOptions.model_fields),
                   "storage": list(Storage.model_fields),
                   "trigger": list(TriggerRules.model_fields),
                   "identifiers": list(IdentifierRules.model_fields),
                   "signing": list(Signing.model_fields)}
        raise config_error(exc, name, allowed=allowed) from None
    except RiskgateError as exc:  # a family's own ConfigError, already naming the key
        raise ConfigError(f"{name}: {str(exc).removeprefix('gate config: ')}") from None


def load_gate(source: Source, overrides: Mapping[str, Any] | None = None,
              storage_options: Mapping[str, Any] | None = None,
              origins: Mapping[str, str] | None = None) -> Gate:
    """Config, policy and the validated measures of one gate run; no table is read.

    Args:
        source: a path or fsspec URL of a YAML file, or the mapping itself.
        overrides: keys that replace the config's (see :data:`OVERRIDABLE`).
        storage_options: fsspec options to read the config (the config's own
            ``storage.options`` are added for the policy).
        origins: where the config and each overridden key came from ("command line",
            "payload", "deployment", "parameter"), recorded in the decision's provenance;
            the config defaults to "command line", every other key to "config".
    """
    digest: list[str] = []
    given = dict(origins or {})
    # a control named by a trigger payload is judged beside the config's own, never instead
    keep_own = ("control",) if given.get("control") == "payload" else ()
    cfg = load_config(source, overrides, storage_options, digest, keep_own)
    options = {**dict(storage_options or {}), **cfg.storage.options}
    name = "gate config" if isinstance(source, Mapping) else redact_text(os.fspath(source))
    if isinstance(cfg.policy, str):
        policy = load_policy(cfg.policy, options)
    else:
        policy = load_policy(cfg.policy, name=f"{name}: policy")
    measures = dict(cfg.measures)
    roles = cfg.role_spec
    for check in policy.checks:
        fam_name = check.measure
        if fam_name not in BY_NAME:
            raise ConfigError(f"{policy.name}: check '{check.id}' names measure '{fam_name}', "
                              f"which does not exist (known: {', '.join(BY_NAME)})")
        fam = family(fam_name)
        if fam_name not in measures:
            try:
                measures[fam_name] = fam.parse({}, f"{policy.name} checks {fam_name}, so")
            except ConfigError as exc:
                raise ConfigError(f"{exc}; configure measures.{fam_name} in the gate config"
                                  ) from None
            fam.validate_for(measures[fam_name], roles, f"{name} (measures.{fam_name})")
        known = fam.figures(measures[fam_name], roles)
        if check.figure_name not in known:
            raise ConfigError(
                f"{policy.name}: check '{check.id}': figure '{check.figure}' does not exist; "
                f"{fam_name} reports: {', '.join(sorted(known))}")
    provenance: dict[str, dict[str, Any]] = {
        "config": {"source": given.get("config", "command line"),
                   "url": None if isinstance(source, Mapping) else redact_text(
                       os.fspath(source)),
                   "sha256": digest[0] if digest else None},
        "policy": {"source": given.get("policy", "config"),
                   "url": redact_text(cfg.policy) if isinstance(cfg.policy, str) else None,
                   "sha256": policy.sha256}}
    for table, url in cfg.tables().items():
        provenance[table] = {"source": given.get(table, "config"), "url": redact_text(url)}
    return Gate(config=cfg, policy=policy, measures=measures, source=name,
                provenance=provenance)
