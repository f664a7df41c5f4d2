"""Column roles and types (docs/measures.md 1): what each column of a table is for.

Plain Python, no numpy or pandas: the gate config is validated against these without loading
any data library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from .errors import ConfigError


class ColumnType(str, Enum):
    """The type of a column, decided once (config) or inferred and then recorded."""

    CONTINUOUS = "continuous"
    INTEGER = "integer"
    CATEGORICAL = "categorical"
    BOOLEAN = "boolean"
    DATETIME = "datetime"

    @property
    def is_numeric(self) -> bool:
        return self in (ColumnType.CONTINUOUS, ColumnType.INTEGER)


#: the tables that stand for people in no release (the yardstick of chance): the control, and
#: the custodian's own control when a trigger payload named another (both are judged)
CONTROLS = ("control", "custodian_control")
#: the tables that are published (the release) or stand for a release (the controls)
PUBLISHED = ("released", *CONTROLS)


class MissingPolicy(str, Enum):
    """How equivalence-class measures treat missing key values (docs/measures.md 1 and 3.2)."""

    OWN = "own"  # missing is its own value (riskgate's default)
    WILDCARD = "wildcard"  # missing matches anything (sdcMicro freqCalc / ARX), weighted by alpha


@dataclass(frozen=True)
class Roles:
    """Column roles of a table (docs/measures.md 1).

    Attributes:
        quasi_identifiers: what an attacker may know (sdcMicro's key variables).
        sensitive: attributes that must not be inferred (l-diversity, t-closeness, secrets).
        weight: sample weight column: each record stands for ``w`` population records.
        household: household / cluster id column.
        direct_identifiers: columns that must never appear in a released table.
        types: explicit column types; every other used column's type is inferred.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...] = ()
    weight: str | None = None
    household: str | None = None
    direct_identifiers: tuple[str, ...] = ()
    types: Mapping[str, ColumnType] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for role, cols in self.assignments():
            for col in cols:
                if col in seen and seen[col] != role:
                    raise ConfigError(
                        f"column '{col}' is given two roles ({seen[col]} and {role}); "
                        "give each column one role in the config"
                    )
                if col in seen:
                    raise ConfigError(
                        f"column '{col}' is listed twice as {role}; list it once"
                    )
                seen[col] = role
        for col, typ in self.types.items():
            if not isinstance(typ, ColumnType):
                raise ConfigError(f"column '{col}': unknown type {typ!r}")

    def assignments(self) -> list[tuple[str, tuple[str, ...]]]:
        return [
            ("quasi_identifiers", tuple(self.quasi_identifiers)),
            ("sensitive", tuple(self.sensitive)),
            ("weight", (self.weight,) if self.weight else ()),
            ("household", (self.household,) if self.household else ()),
            ("direct_identifiers", tuple(self.direct_identifiers)),
        ]

    @property
    def compared_columns(self) -> tuple[str, ...]:
        """The columns a family compares by default: quasi-identifiers, then sensitive
        columns (each once)."""
        return tuple(dict.fromkeys((*self.quasi_identifiers, *self.sensitive)))

    @property
    def measured_columns(self) -> tuple[str, ...]:
        """Columns the measures read (QIs, sensitive, weight, household)."""
        cols = list(self.quasi_identifiers) + list(self.sensitive)
        cols += [c for c in (self.weight, self.household) if c]
        return tuple(cols)

    def required_in(self, table: str) -> tuple[str, ...]:
        """The columns a table must hold: an identification table the quasi-identifiers
        (what an adversary can look people up by); a control, a held-out sample compared with
        the original on what people are, the measured columns but the release's weight and
        household; the original and the release every measured column."""
        if table == "identification":
            return tuple(self.quasi_identifiers)
        if table in CONTROLS:
            return tuple(c for c in self.measured_columns
                         if c not in (self.weight, self.household))
        return self.measured_columns

    @property
    def all_columns(self) -> tuple[str, ...]:
        """Every column that has a role, direct identifiers included."""
        return self.measured_columns + tuple(self.direct_identifiers)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Roles:
        """Build roles from a config mapping (keys as the attributes, or 'qi' for short)."""
        known = {"quasi_identifiers", "qi", "sensitive", "weight", "household",
                 "direct_identifiers", "types"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(
                f"unknown role(s) {sorted(unknown)}; known roles are {sorted(known - {'qi'})}"
            )
        qi = data.get("quasi_identifiers", data.get("qi", ()))
        types_raw = data.get("types") or {}
        if not isinstance(types_raw, Mapping):
            raise ConfigError("'types' must map column names to a type")
        types = {}
        for col, typ in types_raw.items():
            try:
                types[str(col)] = ColumnType(str(typ))
            except ValueError:
                raise ConfigError(
                    f"column '{col}': unknown type '{typ}'; use one of "
                    f"{[t.value for t in ColumnType]}"
                ) from None
        return cls(
            quasi_identifiers=_as_tuple(qi, "quasi_identifiers"),
            sensitive=_as_tuple(data.get("sensitive", ()), "sensitive"),
            weight=_as_opt_str(data.get("weight")),
            household=_as_opt_str(data.get("household")),
            direct_identifiers=_as_tuple(data.get("direct_identifiers", ()), "direct_identifiers"),
            types=types,
        )


def _as_tuple(value: object, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    raise ConfigError(f"'{name}' must be a list of column names")


def _as_opt_str(value: object) -> str | None:
    return None if value in (None, "") else str(value)


