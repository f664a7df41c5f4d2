"""Phone numbers, national and international, by libphonenumber's metadata (phonenumbers).

A number is valid for a region when phonenumbers parses it there and finds it a valid
number of the region's country calling code (``0711 9798106`` in Germany, ``02 72 63 04 64``
in France, ``(202) 555-0143`` in the United States); one written with a ``+`` is parsed
without a region. The regions scanned are the config's ``identifiers.regions``
(:data:`DEFAULT_REGIONS`: the European Union, the United Kingdom, the United States, Canada,
Brazil, India, Australia and a few more).

Most digit strings of a phone number's length are valid somewhere (a random nine-digit code
is a valid Spanish or French number often), so phones go through the same test as every
identifier with checks (:mod:`riskcore.identifiers.chance`), per region: the share of a
column's candidates valid there against the share of random digit strings of the same length
and first digit that are. A number written as the region writes it (its groups, ``+`` and
the country code) counts on its own when that column's values so written are mostly valid.

phonenumbers parses in Python (about 30 microseconds a number and region): the test reads
a seeded, evenly spaced sample of a column's candidates (:data:`PHONE_SAMPLE`), and the
cells are counted over every candidate only in a column where phones were found.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .chance import Evidence, Tally

#: the regions whose national forms are scanned by default: the EU's 27, the United
#: Kingdom, the United States, Canada, Brazil, India, Australia, Switzerland, Norway,
#: Iceland, New Zealand, Mexico and South Africa
DEFAULT_REGIONS: tuple[str, ...] = (
    "AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE",
    "IT", "LT", "LU", "LV", "MT", "NL", "PL", "PT", "RO", "SE", "SI", "SK",
    "GB", "US", "CA", "BR", "IN", "AU", "CH", "NO", "IS", "NZ", "MX", "ZA")
#: candidate values read per column for the test against chance
PHONE_SAMPLE = 300
#: random digit strings drawn per region, length and trunk prefix for the chance rate
CHANCE_DRAWS = 150
#: columns with at most this many candidate values have every one counted
EXHAUSTIVE = 20_000
#: bare digits tell phones from codes only where most random digit strings are no valid
#: number (the US, France with its trunk 0); where they are (Germany, Luxembourg, Denmark),
#: only numbers written as the region writes them count
INFORMATIVE_BELOW = 0.5
#: a column named for phone numbers: bare digits count there (elsewhere, a column of dates
#: or order numbers is valid somewhere often enough to look like phones)
NAMED_FOR_PHONES = re.compile(r"phone|tel|mobile|cell|fax|gsm|handy|portable|m[oó]vil|"
                              r"celular|contact.?n", re.IGNORECASE)
#: the key of numbers written with a + and their country code
INTERNATIONAL = "+"

#: a run of digit groups as phone numbers are written: a leading +, parentheses, one or two
#: separators between groups (linear: each part is possessive and separators are no digits)
_RUN = re.compile(r"\+?+\(?+[0-9]++\)?+(?:[ .\-/]{1,2}+\(?+[0-9]++\)?+)*+")
_GROUP = re.compile(r"\+?+\(?+[0-9]++\)?+")
#: written forms a phone may take, for Arrow over every distinct value (a superset)
WRITTEN_RE2 = (r"\+[1-9][0-9 ().-]{6,}[0-9]|\([0-9]{2,5}\) ?[0-9]|"
               r"[0-9]{2,5}[ .-][0-9]{2,4}[ .-][0-9]{2,4}")
#: the fewest and most digits of a phone number (E.164 allows 15)
MIN_DIGITS, MAX_DIGITS = 7, 15


@dataclass(frozen=True)
class PhoneWindow:
    text: str
    digits: str
    international: bool


def phone_windows(value: str) -> Iterator[PhoneWindow]:
    """A run of digit groups with 7 to 15 digits is one candidate; in a longer run of at
    most 30 digits (two numbers one space apart, a number and its extension), every window
    of whole groups with 7 to 15 digits is. A longer run is a list of numbers, not a phone
    number (and parsing its every window would cost phonenumbers' 30 microseconds many
    times over). A number inside a longer number is no phone number."""
    for run in _RUN.finditer(value):
        text = run.group(0)
        total = sum(ch.isdigit() for ch in text)
        if total < MIN_DIGITS:
            continue
        if total <= MAX_DIGITS:
            yield PhoneWindow(text, re.sub(r"\D", "", text), text.startswith("+"))
            continue
        if total > 2 * MAX_DIGITS:  # a table of numbers, not two phone numbers side by side
            continue
        groups = [(m.start(), m.end()) for m in _GROUP.finditer(text)]
        counts = [sum(ch.isdigit() for ch in text[s:e]) for s, e in groups]
        for i in range(len(groups)):
            n = 0
            for j in range(i, len(groups)):
                n += counts[j]
                if n > MAX_DIGITS:
                    break
                if n >= MIN_DIGITS:
                    piece = text[groups[i][0]:groups[j][1]]
                    yield PhoneWindow(piece, re.sub(r"\D", "", piece), piece.startswith("+"))


@dataclass(frozen=True)
class _Plan:
    """A region's numbering plan, as far as the scan reads it before parsing."""

    code: int  # country calling code
    prefix: str  # national (trunk) prefix
    lengths: frozenset[int]  # digit counts of its national forms, with the prefix or not
    general: re.Pattern[str]  # every valid national number of the region matches it

    def plausible(self, digits: str) -> bool:
        """Can ``digits`` be a valid national number here (the metadata's general pattern,
        after the trunk prefix): a necessary condition, checked before the costly parse."""
        if len(digits) not in self.lengths:
            return False
        if self.general.fullmatch(digits):
            return True
        return bool(self.prefix) and digits.startswith(self.prefix) and \
            self.general.fullmatch(digits[len(self.prefix):]) is not None


@lru_cache(maxsize=64)
def _region(region: str) -> _Plan:
    import phonenumbers

    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if meta is None or meta.general_desc is None or meta.country_code is None:
        raise ValueError(f"unknown region {region!r}")
    lengths = set(meta.general_desc.possible_length or ())
    prefix = meta.national_prefix or ""
    lengths |= {n + len(prefix) for n in lengths} if prefix else set()
    pattern = re.compile(meta.general_desc.national_number_pattern or ".*")
    return _Plan(int(meta.country_code), prefix, frozenset(lengths), pattern)


def valid_region(region: str) -> bool:
    try:
        _region(region)
    except ValueError:
        return False
    return True


def _valid(text: str, region: str | None) -> Any:
    """The parsed number when valid (for ``region``'s calling code), else None."""
    import phonenumbers

    try:
        number = phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    if region is not None and number.country_code != _region(region).code:
        return None
    return number


def _grouping(text: str) -> str:
    return " ".join(re.findall(r"[0-9]+", text))


def _written(window: PhoneWindow, number: Any) -> bool:
    """Written as its region writes it: the national or international format's digit groups
    (and a separator somewhere: bare digits are not a written form)."""
    import phonenumbers

    if window.international:
        return True
    if window.text == window.digits:
        return False
    fmt = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return _grouping(fmt) == _grouping(window.text)


def chance(region: str | None, digits: str) -> float:
    """The share of random digit strings like ``digits`` (its length; its trunk prefix or
    not, or for a number written with a +, its first digit) that are valid numbers of
    ``region`` (None: international), one success and one failure added."""
    if region is None:
        return _chance(None, len(digits), digits[0])
    prefix = _region(region).prefix
    lead = prefix if prefix and digits.startswith(prefix) else ""
    return _chance(region, len(digits), lead)


@lru_cache(maxsize=4096)
def _chance(region: str | None, length: int, lead: str) -> float:
    rng = np.random.default_rng(zlib.crc32(f"phone/{region}/{length}/{lead}".encode()))
    plan = _region(region) if region is not None else None
    passed = tried = 0
    for _ in range(CHANCE_DRAWS):
        if region is None or lead:  # its first digit (international) or its trunk prefix kept
            digits = lead + "".join(map(str, rng.integers(0, 10, length - len(lead))))
        else:  # one without: not starting with the prefix
            digits = "".join(map(str, rng.integers(0, 10, length)))
            while plan is not None and plan.prefix and digits.startswith(plan.prefix):
                digits = "".join(map(str, rng.integers(0, 10, length)))
        if plan is not None and not plan.plausible(digits):
            continue  # not a candidate there (the scan reads only plausible ones)
        tried += 1
        passed += _valid(("+" if region is None else "") + digits, region) is not None
    return (passed + 1) / (tried + 2)


def read_value(value: str, regions: Sequence[str], tallies: dict[str, Tally] | None
               ) -> set[str]:
    """The regions (and :data:`INTERNATIONAL`) for which ``value`` holds a valid number;
    each candidate window tallied in ``tallies`` when given (``written`` counts the values
    written as the region writes them; the values written in groups at all are counted by
    :func:`phone_evidence`, whatever the region)."""
    found: set[str] = set()
    # key -> (valid, written as the region writes it, chance)
    seen: dict[str, tuple[bool, bool, float]] = {}
    for window in phone_windows(value):
        keys: list[tuple[str, str | None]] = []
        if window.international:
            if len(window.digits) >= MIN_DIGITS + 1:
                keys.append((INTERNATIONAL, None))
        else:
            keys.extend((r, r) for r in regions if _region(r).plausible(window.digits))
        for key, region in keys:
            text = window.text if region is not None else "+" + window.digits
            number = _valid(text, region)
            valid, written, p0 = seen.get(key, (False, False, 0.0))
            if tallies is not None:  # the chance that one of the value's windows is valid
                p0 = 1.0 - (1.0 - p0) * (1.0 - chance(region, window.digits))
            seen[key] = (valid or number is not None,
                         written or (number is not None and _written(window, number)), p0)
            if number is not None:
                found.add(key)
    if tallies is not None:
        for key, (valid, written, p0) in seen.items():
            tallies.setdefault(key, Tally()).add(valid, False, written, p0)
    return found


def phone_evidence(values: Sequence[str], regions: Sequence[str], sampled: bool,
                   column: str) -> dict[str, Evidence]:
    """Per region (and :data:`INTERNATIONAL`): what ``values`` of ``column`` show (see the
    module doc). Numbers written as a region writes them are weighed against every value
    written in groups (or with a +) at all: a region's plausible numbers may be all but its
    valid ones (Iceland's ``38x xxx xxx``), so its own candidates are no yardstick."""
    tallies: dict[str, Tally] = {}
    grouped = plus = 0
    for value in values:
        read_value(value, regions, tallies)
        shapes = [(w.international, w.text != w.digits) for w in phone_windows(value)]
        plus += any(i for i, _ in shapes)
        grouped += any(g and not i for i, g in shapes)
    for key, t in tallies.items():
        t.written = plus if key == INTERNATIONAL else grouped
    named = bool(NAMED_FOR_PHONES.search(column))
    return {key: t.evidence(sampled, named, INFORMATIVE_BELOW) for key, t in tallies.items()}


def found_regions(evidence: dict[str, Evidence]) -> list[str]:
    """The regions (and :data:`INTERNATIONAL`) found, most written first; a region found
    on numbers another writes better (an Italian reading of German numbers) left out."""
    found = [k for k, e in evidence.items() if e.found]
    best = max((evidence[k].written_valid for k in found), default=0)
    keep = [k for k in found if k == INTERNATIONAL or evidence[k].written_valid >= best / 2]
    return sorted(keep, key=lambda k: (-evidence[k].written_valid, k))
