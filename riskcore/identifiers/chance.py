"""Identifiers or codes: does a column pass a kind's checks more often than chance?

A column of random nine-digit codes passes the Dutch BSN's eleven-test about one time in
eleven, the Canadian SIN's Luhn digit one time in ten and the SSA's area rules for a US SSN
nine times in ten: a validated value there is chance, not a person's number. A column of
real numbers of a kind passes its checks every time. For each kind in a column the scan has

* ``candidates``: distinct values holding a candidate of the kind's shape,
* ``valid``: those holding one that passes the kind's checks,
* ``chance``: the rate at which random candidates of the same shapes pass
  (:mod:`riskcore.identifiers.shapes`),

and the kind is found when both hold:

* **beyond chance**: the one-sided binomial tail ``P(X >= valid | candidates, chance)`` is at
  most :data:`ALPHA` (one in a million: a gate scans dozens of kinds in dozens of columns);
* **mostly identifiers**: ``valid / candidates >= (1 + chance) / 2``, past the midpoint
  between codes and identifiers, so a column of codes whose maker avoided a few leading
  digits (and passes a little more often than uniform codes) is still codes.

A kind with a written form of its own (``536-90-4399``, ``233.914.771-99``, the IBAN's
groups of four) counts a single value written that way, validated, in a column whose values
written that way are mostly valid: the form is the evidence (one SSN in a column of notes),
and a column of product codes written in an SSN's groups still passes at chance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the binomial tail below which a column passes a kind's checks beyond chance
ALPHA = 1e-6


def beyond_chance(valid: int, candidates: int, chance: float) -> bool:
    """More validated values than ``chance`` gives, and a majority past the midpoint (see
    the module doc)."""
    if valid <= 0 or candidates <= 0:
        return False
    chance = min(max(chance, 0.0), 1.0)
    if valid / candidates < (1.0 + chance) / 2.0:
        return False
    from scipy.stats import binom

    return bool(binom.sf(valid - 1, candidates, chance) <= ALPHA)


def mostly_valid(valid: int, candidates: int, chance: float) -> bool:
    """Values written in a kind's own form: found when one is valid and the share of valid
    ones is past the midpoint between codes and identifiers."""
    return valid > 0 and candidates > 0 and valid / candidates >= (1.0 + chance) / 2.0


@dataclass(frozen=True)
class Evidence:
    """One kind in one column: the counts the decision reads (distinct values)."""

    candidates: int = 0
    valid: int = 0
    chance: float = 0.0
    written: int = 0
    written_valid: int = 0
    sampled: bool = False
    #: the chance rate above which bare candidates are no evidence (phone numbers: where
    #: most digit strings are valid numbers, a column of codes is all "valid")
    informative_below: float = 1.0

    @property
    def found(self) -> bool:
        bare = self.chance < self.informative_below and beyond_chance(
            self.valid, self.candidates, self.chance)
        return bare or mostly_valid(self.written_valid, self.written, self.chance)

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "valid": self.valid,
                "chance": round(self.chance, 6), "written": self.written,
                "written_valid": self.written_valid, "sampled": self.sampled}


@dataclass
class Tally:
    """One kind's running counts over the values read (summed chance; the positions of the
    values with a valid candidate when ``keep`` is asked), made :class:`Evidence` at the end."""

    candidates: int = 0
    valid: int = 0
    written: int = 0
    written_valid: int = 0
    chance: float = 0.0
    valid_values: list[int] = field(default_factory=list)

    def add(self, valid: bool, written: bool, written_valid: bool, p0: float,
            position: int | None = None) -> None:
        """One value read: its candidates hold a valid one, one written the kind's way, one
        written so and valid; ``p0`` the chance that random candidates like these are."""
        self.candidates += 1
        self.valid += valid
        self.written += written
        self.written_valid += written_valid
        self.chance += p0
        if valid and position is not None:
            self.valid_values.append(position)

    def evidence(self, sampled: bool, named: bool, informative_below: float = 1.0
                 ) -> Evidence:
        """The counts as evidence; bare candidates count only in a column ``named`` for the
        kind."""
        mean = self.chance / self.candidates if self.candidates else 0.0
        bare = (self.candidates, self.valid) if named else (0, 0)
        return Evidence(*bare, mean, self.written, self.written_valid, sampled,
                        informative_below=informative_below)
