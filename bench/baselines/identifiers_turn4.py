"""riskgate's identifier scan as turn 4 shipped it (riskcore/gate/identifiers.py at commit
3373a48), kept unchanged as the baseline bench/scan.py measures today's scan beside: e-mails,
US and UK identifiers, cards, IBANs, phones by a hand-written expression, US names. Not used
by riskgate itself.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from riskcore.data import distinct

#: the default share of a column's cells above which a kind fails the check
DEFAULT_THRESHOLD = 0.001
#: a column of codes: its candidates pass a checksum at no more than this many times chance
CODES_AT_MOST = 3.0
#: single first names count only where this share of a column's distinct values are names
NAME_COLUMN_SHARE = 0.5
#: and where at least this many distinct first names are: common words are names too ("OK",
#: "May", "Will"), and a column of one or two such labels is not a column of people's names
NAME_COLUMN_MIN = 5


# ---------------------------------------------------------------- validators
def luhn(digits: str) -> bool:
    """The Luhn checksum (ISO/IEC 7812) of a digit string."""
    total, double = 0, False
    for ch in reversed(digits):
        d = ord(ch) - 48
        if double:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
        double = not double
    return total % 10 == 0


#: card issuers' number prefixes and lengths (Visa, Mastercard, American Express, Discover,
#: JCB, Diners Club, Maestro, UnionPay)
_CARD_PREFIX = re.compile(r"4|5[1-5]|2(?:2[2-9]|[3-6]|7[01]|720)|3[47]|6(?:011|5|4[4-9])|35|"
                          r"3(?:0[0-5]|[689])|5018|5020|5038|6304|6759|676[1-3]|62")


def card(candidate: str) -> bool:
    """An issuer's prefix and length, and the Luhn check; a grouped number followed by more
    digits (an expiry date) is tried at 16 and 15 digits too."""
    digits = re.sub(r"[ -]", "", candidate)
    lengths = [len(digits)] + ([16, 15] if len(digits) != len(candidate) else [])
    return any(13 <= n <= len(digits) and n <= 19 and bool(_CARD_PREFIX.match(digits[:n]))
               and luhn(digits[:n]) for n in lengths)


#: IBAN lengths by country (ISO 13616 registry)
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20}


def iban(candidate: str) -> bool:
    """ISO 13616: the country's length and the mod-97 check (the remainder is 1); a longer
    candidate (the words after it) is read at the country's length."""
    text = candidate.replace(" ", "").upper()
    length = IBAN_LENGTHS.get(text[:2])
    if length is None or len(text) < length or not text[2:4].isdigit():
        return False
    text = text[:length]
    moved = text[4:] + text[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


def us_ssn(candidate: str) -> bool:
    """A US Social Security number's area, group and serial rules (SSA): area not 000, 666
    or 900-999, group not 00, serial not 0000."""
    digits = re.sub(r"[ -]", "", candidate)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return (len(digits) == 9 and area not in ("000", "666") and area[0] != "9"
            and group != "00" and serial != "0000")


def uk_nino(candidate: str) -> bool:
    """A UK National Insurance number's prefix rules (HMRC): neither letter D, F, I, Q, U, V,
    the second not O, and not the prefixes BG, GB, KN, NK, NT, TN, ZZ."""
    text = candidate.replace(" ", "").upper()
    first, second = text[0], text[1]
    return (first not in "DFIQUV" and second not in "DFIQUVO"
            and text[:2] not in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"))


def phone(candidate: str) -> bool:
    """8 to 15 digits (E.164), written as a phone number is: a leading + or a parenthesized
    area code, or groups apart; a North American number's area and exchange begin with 2-9."""
    digits = re.sub(r"\D", "", candidate)
    if not 8 <= len(digits) <= 15:
        return False
    if candidate.startswith("+"):
        return digits[0] != "0"
    if len(digits) == 10 and not candidate.startswith("0"):  # North America
        return digits[0] in "23456789" and digits[3] in "23456789"
    return candidate.startswith("0") and 9 <= len(digits) <= 11  # a national trunk prefix


def email(candidate: str) -> bool:
    local, _, domain = candidate.rpartition("@")
    return (bool(local) and not local.startswith(".") and not local.endswith(".")
            and ".." not in local and "." in domain and domain.rsplit(".", 1)[-1].isalpha())


def ip_address(candidate: str) -> bool:
    """An IPv4 dotted quad (no part with a leading zero) or an IPv6 address, as the standard
    library parses it; not the unspecified address."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return not address.is_unspecified


#: URL paths that point at a person: a home folder, a profile, a user page, an e-mail or user
#: in the query
_PERSONAL_PATH = re.compile(
    r"/~[^/\s]|/(?:users?|u|people|person|profiles?|members?|in|pub|author|employees?|"
    r"staff|customers?|patients?|accounts?)/[^/\s?#]|[?&](?:user(?:name)?|uid|email|e-mail|"
    r"login|member|patient|customer)=", re.IGNORECASE)
_SOCIAL = re.compile(r"https?://(?:www\.)?(?:facebook|twitter|x|instagram|linkedin|github|"
                     r"tiktok|youtube|reddit|medium)\.com/(?!(?:help|about|search|home|login|"
                     r"share|intent|privacy|terms)\b)[A-Za-z0-9_.-]+/?(?:$|[?#])",
                     re.IGNORECASE)


def personal_url(candidate: str) -> bool:
    return bool(_PERSONAL_PATH.search(candidate) or _SOCIAL.match(candidate))


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, surnames), upper case, from ``data_files/person_names.txt``."""
    path = Path(__file__).resolve().parents[1] / "data_files" / "person_names.txt"
    first: set[str] = set()
    last: set[str] = set()
    target = first
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        if line == "[first]":
            target = first
        elif line == "[last]":
            target = last
        else:
            target.add(line)
    return frozenset(first), frozenset(last)


def full_name(candidate: str) -> bool:
    """A first name, then a surname (or a middle name and a surname)."""
    first, last = name_lists()
    words = candidate.upper().split()
    return len(words) >= 2 and words[0] in first and words[-1] in last


_CAPITALIZED = re.compile(r"(?<![\w'-])[A-Z][A-Za-z'-]{1,20}+(?![\w'-])")


def name_pairs(value: str) -> Any:
    """Two or three capitalized words in a row (one space apart), each window once: the
    candidates of a person's name inside any text, in one pass."""
    words = [(m.start(), m.end()) for m in _CAPITALIZED.finditer(value)]
    for i, (start, end) in enumerate(words):
        stop = end
        for j in (i + 1, i + 2):
            if j >= len(words) or words[j][0] != stop + 1 or value[stop] != " ":
                break
            stop = words[j][1]
            yield value[start:stop]


def first_name(candidate: str) -> bool:
    return candidate.strip().upper() in name_lists()[0]


# ---------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Kind:
    """One kind of direct identifier: how it is found and validated.

    Attributes:
        name: its key in configs and outputs ("email", "card"...).
        title: what a person reads.
        re2: the RE2 expression Arrow runs over distinct values (a superset of candidates).
        pattern: the Python expression that finds candidate substrings in one value (linear:
            possessive repeats, bounded lengths).
        validate: is a candidate the real thing (checksum, rules, lists).
        strict: a single validated value fails the check (cards, IBANs, national ids).
        chance: the share of well-formed random candidates that pass ``validate`` (a column
            whose candidates pass at no more than :data:`CODES_AT_MOST` times this holds
            codes); None when there is no checksum.
        finder: the candidates in one value, when not ``pattern``'s matches.
    """

    name: str
    title: str
    re2: str
    pattern: re.Pattern[str]
    validate: Callable[[str], bool]
    strict: bool = False
    chance: float | None = None
    finder: Callable[[str], Any] | None = None
    #: an RE2 expression a whole value matches only when the value is one valid identifier
    #: and nothing else (the common case of a column of them): such values skip Python
    whole: str | None = None

    def candidates(self, value: str) -> Any:
        if self.finder is not None:
            return self.finder(value)
        return (m.group(0) for m in self.pattern.finditer(value))


_B = r"(?<![A-Za-z0-9])"  # a candidate starts where a word does not go on
_E = r"(?![A-Za-z0-9])"
EMAIL = Kind(
    "email", "e-mail addresses",
    r"[A-Za-z0-9._%+-]@[A-Za-z0-9-]+\.[A-Za-z]",
    re.compile(_B + r"[A-Za-z0-9._%+-]{1,64}+@[A-Za-z0-9-]{1,63}+(?:\.[A-Za-z0-9-]{1,63}+)"
               r"{1,8}+" + _E), email,
    # the same rules as `email`: no dot at the local part's ends nor two in a row, at most
    # 64 characters before the @, labels of at most 63, an alphabetic top-level domain
    whole=r"^(?:[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*)@[A-Za-z0-9-]{1,63}"
          r"(?:\.[A-Za-z0-9-]{1,63}){0,7}\.[A-Za-z]{1,63}$")
PHONE = Kind(
    "phone", "phone numbers",
    r"\+[1-9][0-9 ().-]{6,}[0-9]|\([0-9]{2,5}\) ?[0-9]|[0-9]{2,5}[ .-][0-9]{3,4}[ .-][0-9]{3,4}",
    re.compile(r"(?<![\w+])(?:\+[1-9]|\(0?[0-9]{2,4}\)|0?[0-9]{2,5}(?=[ .-]))"
               r"(?:[ ().-]{0,2}+[0-9]){5,14}+" + _E), phone)
US_SSN = Kind(
    "us_ssn", "US Social Security numbers",
    r"(?:^|[^A-Za-z0-9])[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}(?:$|[^A-Za-z0-9])",
    re.compile(_B + r"[0-9]{3}([- ])[0-9]{2}\1[0-9]{4}" + _E), us_ssn, strict=True)
UK_NINO = Kind(
    "uk_nino", "UK National Insurance numbers",
    r"(?:^|[^A-Za-z0-9])[A-Za-z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-Da-d](?:$|[^A-Za-z0-9])",
    re.compile(_B + r"[A-Za-z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-Da-d]" + _E), uk_nino,
    strict=True)
#: national identifiers: one entry each (add a country's here)
NATIONAL_IDS: tuple[Kind, ...] = (US_SSN, UK_NINO)
CARD = Kind(
    "card", "payment card numbers",
    r"(?:^|[^A-Za-z0-9])[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{1,7}",
    re.compile(_B + r"[0-9](?:[ -]?[0-9]){12,18}+" + _E), card, strict=True, chance=0.1)
IBAN = Kind(
    "iban", "IBANs",
    r"(?:^|[^A-Za-z0-9])[A-Za-z]{2}[0-9]{2} ?[A-Za-z0-9]{4}",
    re.compile(_B + r"[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{1,4}+){3,8}+" + _E), iban,
    strict=True, chance=0.011)
IP = Kind(
    "ip", "IP addresses",
    r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:",
    re.compile(r"(?<![\w.:])(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f:]{2,39}+)"
               r"(?![\w.:])"), ip_address)
URL = Kind(
    "url", "URLs with a personal path",
    r"[Hh][Tt][Tt][Pp][Ss]?://[^ /]+/",
    re.compile(r"https?://[^\s\"'<>]{1,2048}+", re.IGNORECASE), personal_url)
NAME = Kind(
    "name", "person names",
    r"[A-Z][a-z]+ [A-Z][a-z]+|[A-Z]{2,} [A-Z]{2,}",
    _CAPITALIZED, full_name, finder=name_pairs)
#: every kind scanned, in report order
KINDS: tuple[Kind, ...] = (EMAIL, PHONE, *NATIONAL_IDS, CARD, IBAN, IP, URL, NAME)
BY_KIND = {k.name: k for k in KINDS}
#: every Python expression the scan runs on a value (each checked for linear time)
SCAN_PATTERNS = tuple(k.pattern for k in KINDS)
#: a first name alone in a cell (counted in columns of names only)
FIRST_NAME_RE2 = r"^ *[A-Za-z][A-Za-z'-]+ *$"


# ---------------------------------------------------------------- the scan
@dataclass(frozen=True)
class Finding:
    """A kind found in a column: cells holding a validated one, and the candidates."""

    table: str
    column: str
    kind: str
    cells: int
    share: float
    candidates: int
    allowed: bool = False
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64),
                             repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "column": self.column, "kind": self.kind,
                "title": BY_KIND[self.kind].title if self.kind in BY_KIND else self.kind,
                "cells": self.cells, "share": round(self.share, 6),
                "candidates": self.candidates, "allowed": self.allowed}


def _as_text(uniques: pd.Index) -> Any:
    """A column's distinct values as an Arrow array of text: strings as they are, whole
    numbers (a card number in an integer column) as their digits; None for a column of other
    numbers."""
    import pyarrow as pa

    values = np.asarray(uniques, dtype=object)
    if pd.api.types.is_float_dtype(uniques.dtype):
        if not (len(values) and all(float(v).is_integer() for v in values)):
            return None
        return pa.array([str(int(v)) for v in values], type=pa.large_string())
    try:  # text already: Arrow takes the strings without a pass of Python
        return pa.array(values, type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if isinstance(v, str) else str(v) for v in values],
                        type=pa.large_string())


def _validated(kind: Kind, value: str) -> tuple[bool, bool]:
    """(a candidate is in the value, a validated one is). A value that is an IP address and
    nothing else is no phone number (a dotted quad's groups look like one)."""
    if kind is PHONE and "." in value and ip_address(value.strip()):
        return False, False
    candidate = False
    for found in kind.candidates(value):
        candidate = True
        if kind.validate(found.strip(" .-")):
            return True, True
    return candidate, False


def scan_column(table: str, column: str, series: pd.Series) -> list[Finding]:
    """Every kind found in one column (see the module doc): counts over cells, each distinct
    value looked at once."""
    import pyarrow.compute as pc

    if pd.api.types.is_bool_dtype(series.dtype):
        return []
    codes, uniques = distinct(series)
    if not len(uniques):
        return []
    arrow = _as_text(uniques)
    if arrow is None:
        return []
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    present = int(counts.sum())
    found: list[Finding] = []
    for kind in KINDS:
        hit = pc.match_substring_regex(arrow, kind.re2).fill_null(False).to_numpy(
            zero_copy_only=False)
        valid_values: list[int] = []
        candidate_cells = 0
        if kind.whole is not None:  # whole valid values: no Python per value
            sure = hit & pc.match_substring_regex(arrow, kind.whole).fill_null(
                False).to_numpy(zero_copy_only=False)
            if kind is EMAIL:  # and at most 64 characters before the @
                at = pc.find_substring(arrow, "@").to_numpy(zero_copy_only=False)
                sure &= (at >= 1) & (at <= 64)
            valid_values = np.flatnonzero(sure).tolist()
            candidate_cells = int(counts[sure].sum())
            hit = hit & ~sure
        where = np.flatnonzero(hit)
        for i, text in zip(where, _strings(arrow, where)):
            candidate, valid = _validated(kind, text)
            if candidate:
                candidate_cells += int(counts[i])
            if valid:
                valid_values.append(int(i))
        if kind is NAME:  # a first name alone, where most distinct values are names
            alone = pc.match_substring_regex(arrow, FIRST_NAME_RE2).fill_null(False).to_numpy(
                zero_copy_only=False)
            where = np.flatnonzero(alone)
            singles = [int(i) for i, text in zip(where, _strings(arrow, where))
                       if first_name(text)]
            if len(singles) >= NAME_COLUMN_MIN and \
                    len(singles) + len(valid_values) >= NAME_COLUMN_SHARE * len(arrow):
                valid_values = sorted(set(valid_values) | set(singles))
                candidate_cells += int(counts[singles].sum())
        if not valid_values:
            continue
        cells = int(counts[valid_values].sum())
        if kind.chance is not None and candidate_cells and \
                cells / candidate_cells <= CODES_AT_MOST * kind.chance:
            continue  # codes that pass the checksum by chance, not identifiers
        rows = np.flatnonzero(np.isin(codes, valid_values))
        found.append(Finding(table, column, kind.name, cells, cells / max(present, 1),
                             candidate_cells, rows=rows))
    return found


def _strings(arrow: Any, where: np.ndarray) -> list[str]:
    """The distinct values at ``where`` as Python strings (only candidates are converted)."""
    import pyarrow as pa

    if not where.size:
        return []
    return [str(v) for v in arrow.take(pa.array(where, type=pa.int64())).to_pylist()]


@dataclass(frozen=True)
class IdentifierScan:
    """The scan of a run's published tables: what was scanned and what was found."""

    scanned: Mapping[str, tuple[str, ...]]
    findings: tuple[Finding, ...]
    threshold: float = DEFAULT_THRESHOLD

    def failing(self, finding: Finding) -> bool:
        """The finding fails the check: not allowed, and over the threshold (strict kinds:
        any)."""
        if finding.allowed or finding.cells == 0:
            return False
        kind = BY_KIND.get(finding.kind)
        return bool(kind is not None and kind.strict) or finding.share > self.threshold

    def rows(self, table: str = "released") -> np.ndarray:
        """The rows of ``table`` that hold a failing identifier."""
        parts = [f.rows for f in self.findings if f.table == table and self.failing(f)]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold,
                "scanned": {t: list(c) for t, c in self.scanned.items()},
                "kinds": [k.name for k in KINDS],
                "found": [{**f.to_dict(), "fails": self.failing(f)} for f in self.findings]}


def scan_tables(frames: Mapping[str, pd.DataFrame], skip: Sequence[str] = (),
                allow: Mapping[str, Sequence[str]] | None = None,
                threshold: float = DEFAULT_THRESHOLD,
                tables: Sequence[str] = ("released", "control")) -> IdentifierScan:
    """Scan every column of the published tables (not ``skip``: declared direct identifiers,
    refused as such)."""
    accepted = {c: set(k) for c, k in (allow or {}).items()}
    findings: list[Finding] = []
    scanned: dict[str, tuple[str, ...]] = {}
    for table in tables:
        df = frames.get(table)
        if df is None:
            continue
        cols = [str(c) for c in df.columns if str(c) not in skip]
        scanned[table] = tuple(cols)
        for col in cols:
            for f in scan_column(table, col, df[col]):
                allowed = f.kind in accepted.get(col, set())
                findings.append(Finding(f.table, f.column, f.kind, f.cells, f.share,
                                        f.candidates, allowed, f.rows))
    return IdentifierScan(scanned, tuple(findings), threshold)


def describe(findings: Sequence[Finding]) -> str:
    """One column's failing kinds in words, never a value."""
    return "; ".join(f"{BY_KIND[f.kind].title} in {f.cells:,} cell(s) ({f.share:.2%})"
                     for f in findings)
