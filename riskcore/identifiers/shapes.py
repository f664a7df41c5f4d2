"""What an identifier looks like once its separators are gone, and where one may sit in a value.

A national identifier, a card number or an IBAN is written in many ways (``233.914.771-99``,
``23391477199``, ``233 914 771 99``): the scan reads every value as *runs* of letters and
digits joined by single separators (space, dot, dash, slash, plus), and every *window* of
whole groups inside a run as one candidate, compacted (separators removed; upper case).
Each kind's **shape** is the compact form it can take, written as a sequence of character
classes with a count (``[0-9]{9}``, ``[XYZ][0-9]{7}[A-Z]``), one alternative per length.

The shape also gives the scan its null: random candidates of the same shape (each position
drawn uniformly from its class) pass a kind's checks at a rate its checksum and rules fix
(one in ten for a Luhn digit, about 0.89 for the SSA's area rules). That rate is what a
column of codes shows, so identifiers are told from codes by passing more often than it
(:mod:`riskcore.identifiers.chance`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

#: characters that join the groups of one written identifier
SEPARATORS = " .-/+"
#: a run: groups of letters and digits joined by single separators (linear: a separator is
#: never a group character, so there is one way to match)
_RUN = re.compile(r"[0-9A-Z]++(?:[ .\-/+][0-9A-Z]++)*+")
#: the longest compact candidate any kind takes (an IBAN: 34)
MAX_COMPACT = 34
#: the fewest digits any kind holds (an Argentine DNI: 7)
MIN_DIGITS = 6

_UNIT = re.compile(r"\[([^\]\[]{1,40})\](?:\{([0-9]{1,3})\})?|(.)")


@dataclass(frozen=True, eq=False)  # one instance per kind's shape: hashed by identity
class Shape:
    """One compact form: a sequence of character classes, each ``count`` times."""

    units: tuple[tuple[str, int], ...]
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> Shape:
        """``[0-9]{5}2[AB][0-9]{8}``: classes with a count, or literal characters."""
        units: list[tuple[str, int]] = []
        for m in _UNIT.finditer(text):
            if m.group(3) is not None:
                units.append((m.group(3), 1))
            else:
                units.append((_expand(m.group(1)), int(m.group(2) or 1)))
        return cls(tuple(units), re.compile(text))

    @property
    def length(self) -> int:
        return sum(n for _, n in self.units)

    def matches(self, compact: str) -> bool:
        return self.regex.fullmatch(compact) is not None

    def draw(self, rng: np.random.Generator, n: int) -> list[str]:
        """``n`` random candidates of this shape, each position uniform over its class."""
        columns: list[np.ndarray] = []
        for chars, count in self.units:
            pool = np.array(list(chars))
            columns.extend(pool[rng.integers(0, len(pool), n)] for _ in range(count))
        return ["".join(row) for row in zip(*columns)] if columns else [""] * n


def _expand(klass: str) -> str:
    """The characters of a class body (``0-9``, ``A-FU-Y``, ``XYZ``, ``-+``)."""
    out: list[str] = []
    i = 0
    while i < len(klass):
        if i + 2 < len(klass) and klass[i + 1] == "-":
            lo, hi = klass[i], klass[i + 2]
            out.extend(chr(c) for c in range(ord(lo), ord(hi) + 1))
            i += 3
        else:
            out.append(klass[i])
            i += 1
    return "".join(dict.fromkeys(out))


@dataclass(frozen=True)
class Window:
    """A candidate inside a value: its text as written and its compact forms."""

    text: str
    compact: str  # every separator removed
    signed: str  # spaces, dots and slashes removed; dashes and plus signs kept
    #: the leading groups of a longer number (a card number and its expiry date, one space
    #: apart): only kinds that allow it read such a window
    partial: bool = False


@dataclass
class _Unit:
    start: int
    end: int
    digits: int
    number: bool  # groups of digits alone
    sep: str = ""  # the separator that joins its groups
    cuts: list[int] | None = None  # ends of its leading groups (a number's)


def _units(text: str) -> list[_Unit]:
    """A run's units: a group holding a letter, or a *number*, digit groups joined by one
    and the same separator (``2 95 10 99 126 111 93``, ``536-90-4399``). A number is read
    whole: the nine digits inside a fifteen-digit one are no nine-digit identifier."""
    units: list[_Unit] = []
    for m in re.finditer(r"[0-9A-Z]++", text):
        piece = m.group(0)
        digits = sum(ch.isdigit() for ch in piece)
        number = digits == len(piece)
        last = units[-1] if units else None
        sep = text[m.start() - 1] if m.start() else ""
        if last is not None and number and last.number and last.end == m.start() - 1 and \
                (not last.sep or last.sep == sep):
            assert last.cuts is not None
            last.cuts.append(last.end)
            last.end, last.digits, last.sep = m.end(), last.digits + digits, sep
        else:
            units.append(_Unit(m.start(), m.end(), digits, number, cuts=[] if number else None))
    return units


def windows(value: str, max_compact: int = MAX_COMPACT,
            min_digits: int = MIN_DIGITS) -> Iterator[Window]:
    """Every window of whole units (:func:`_units`) in every run of ``value`` (upper-cased)
    with at least ``min_digits`` digits and at most ``max_compact`` characters once
    compacted, and the leading groups of each number (``partial``): linear in the value's
    length (a window spans at most ``max_compact`` characters of groups)."""
    upper = value.upper()
    for run in _RUN.finditer(upper):
        text = run.group(0)
        units = _units(text)
        for i, first in enumerate(units):
            for cut in first.cuts or ():
                piece = text[first.start:cut]
                compact = _strip(piece, SEPARATORS)
                if len(compact) > max_compact:
                    break
                if len(compact) >= min_digits:
                    yield Window(piece, compact, _strip(piece, " ./"), partial=True)
            size = n_digits = 0
            for j in range(i, len(units)):
                size += units[j].end - units[j].start  # an upper bound of its compact size
                n_digits += units[j].digits
                if size > max_compact + 16 * (j - i + 1):
                    break
                if n_digits < min_digits:
                    continue
                piece = text[first.start:units[j].end]
                compact = _strip(piece, SEPARATORS)
                if len(compact) > max_compact:
                    break
                yield Window(piece, compact, _strip(piece, " ./"))


def _strip(text: str, chars: str) -> str:
    return text.translate(_TABLES[chars]) if chars in _TABLES else text


_TABLES = {chars: str.maketrans("", "", chars) for chars in (SEPARATORS, " ./")}
