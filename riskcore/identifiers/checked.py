"""Identifiers with checks: national identifiers, payment cards and IBANs.

Each kind is a shape (:mod:`riskcore.identifiers.shapes`) and a validator. The national
identifiers are python-stdnum's (validators for some 200 formats, maintained since 2010):
every *personal* number it validates, national identity numbers, personal tax and social
security numbers, each under stdnum's own module name (``nl.bsn``, ``br.cpf``); company and
VAT numbers are not personal and are not scanned. The UK National Insurance number, which
stdnum lacks, follows HMRC's prefix rules (``gb.nino``). Cards are an issuer's prefix and
length with the Luhn digit (stdnum's ``luhn``), IBANs stdnum's ``iban`` (country length,
BBAN format, mod 97).

What the scan reads of each kind:

* ``chance``: the share of random candidates of each of its shapes that validates (drawn
  once per process, seeded: the same number every run);
* ``written``: how the kind writes a number (stdnum's ``format``: ``536-90-4399``): a value
  written that way is evidence on its own (:mod:`riskcore.identifiers.chance`).
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .shapes import Shape

#: random candidates drawn per shape to measure a kind's chance rate
CHANCE_DRAWS = 4000


@dataclass(frozen=True, eq=False)  # one instance per kind: hashed by identity
class CheckedKind:
    """A kind with a checksum or rules: what it looks like and how it is validated.

    Attributes:
        name: its key in configs and outputs (stdnum's module name, ``card``, ``iban``).
        title: what a person reads.
        shapes: its compact forms, one per length.
        check: is a compact candidate valid.
        display: how the kind writes a compact value (None: as it is).
        signed: its compact form keeps dashes and plus signs (a Finnish HETU's century
            sign, a Swedish personnummer's age sign).
    """

    name: str
    title: str
    shapes: tuple[Shape, ...]
    check: Callable[[str], bool] = field(compare=False, repr=False)
    display: Callable[[str], str] | None = field(default=None, compare=False, repr=False)
    signed: bool = False
    strict: bool = True
    #: reads the leading groups of a longer number (a card number with its expiry date)
    partial: bool = False
    #: a kind without a checksum (its rules are a format: a US SSN's areas): honest codes
    #: with a little structure pass it (nine-digit order numbers that never start with 9),
    #: so bare candidates count only in a column whose name says the kind (this
    #: expression); values written the kind's way count anywhere
    context: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    #: the chance rate when drawing cannot measure it (an IBAN: one in 97 of its country's
    #: format passes mod 97, and random letters rarely make a country's format)
    fixed_chance: float | None = None

    def valid(self, compact: str) -> bool:
        try:
            return bool(self.check(compact))
        except Exception:  # a validator's own error on odd input: not valid
            return False

    def fits(self, compact: str) -> Shape | None:
        """The shape ``compact`` has, if it is one of the kind's."""
        for shape in self.shapes:
            if shape.length == len(compact) and shape.matches(compact):
                return shape
        return None

    def written(self, compact: str) -> tuple[int, ...] | None:
        """The groups of the kind's own written form of ``compact``, their lengths (None:
        it has none apart from the compact form, or cannot write this one): ``536-90-4399``
        and ``536.90.4399`` are both written as an SSN is. stdnum's formats group by
        length alone, so the grouping is computed once per length."""
        if self.display is None:
            return None
        return _written_grouping(self, len(compact), compact)

    def named_in(self, column: str) -> bool:
        """Bare candidates are evidence in this column (a kind with a checksum: anywhere)."""
        return self.context is None or bool(self.context.search(column))


_GROUPINGS: dict[tuple[int, int], tuple[int, ...] | None] = {}


def _written_grouping(kind: CheckedKind, length: int, compact: str) -> tuple[int, ...] | None:
    key = (id(kind), length)
    if key not in _GROUPINGS:
        try:
            text = str(kind.display(compact)).upper() if kind.display else compact
        except Exception:
            text = compact
        _GROUPINGS[key] = grouping(text) if text != compact else None
    return _GROUPINGS[key]


def grouping(text: str) -> tuple[int, ...]:
    """The lengths of a written value's groups of letters and digits."""
    return tuple(len(g) for g in re.findall(r"[0-9A-Za-z]+", text))


def _stdnum(module: str) -> Any:
    return importlib.import_module(f"stdnum.{module}")


def _stdnum_kind(name: str, shapes: str, signed: bool = False) -> CheckedKind:
    mod = _stdnum(name)
    title = (mod.__doc__ or name).strip().splitlines()[0].rstrip(".")
    fmt = getattr(mod, "format", None)
    context = NO_CHECKSUM.get(name)
    return CheckedKind(name=name, title=title,
                       shapes=tuple(Shape.parse(s) for s in shapes.split("|")),
                       check=mod.is_valid, display=fmt, signed=signed,
                       context=re.compile(context, re.IGNORECASE) if context else None)


#: python-stdnum's personal identifiers: module -> compact shapes (one per length, "|"
#: between them). Each shape is the compact form stdnum's own ``compact`` gives. Numbers
#: stdnum checks for length alone (an Argentine DNI, a Finnish veronumero, a Peruvian CUI
#: without its check digit) are left out: any code of their length passes, so a value of
#: theirs is no evidence of a person.
NATIONAL_SHAPES: dict[str, str] = {
    "at.vnr": "[0-9]{10}",
    "au.tfn": "[0-9]{8}|[0-9]{9}",
    "be.bis": "[0-9]{11}",
    "be.nn": "[0-9]{11}",
    "bg.egn": "[0-9]{10}",
    "bg.pnf": "[0-9]{10}",
    "br.cpf": "[0-9]{11}",
    "ca.bc_phn": "9[0-9]{9}",
    "ca.sin": "[0-9]{9}",
    "ch.ssn": "756[0-9]{10}",
    "cl.rut": "[0-9]{7}[0-9K]|[0-9]{8}[0-9K]",
    "cn.ric": "[0-9]{17}[0-9X]",
    "cr.cpf": "[0-9]{10}",
    "cr.cr": "[0-9]{11}|[0-9]{12}",
    "cu.ni": "[0-9]{11}",
    "cz.rc": "[0-9]{9}|[0-9]{10}",  # stdnum's sk.rc is the same number and validator
    "de.idnr": "[0-9]{11}",
    "dk.cpr": "[0-9]{10}",
    "do.cedula": "[0-9]{11}",
    "ec.ci": "[0-9]{10}",
    "ee.ik": "[0-9]{11}",
    "es.dni": "[0-9]{8}[A-Z]",
    "es.nie": "[XYZ][0-9]{7}[A-Z]",
    "fi.hetu": "[0-9]{6}[-+A-FU-Y][0-9]{3}[0-9A-Y]",
    "fr.nif": "[0-3][0-9]{12}",
    "fr.nir": "[0-9]{15}|[0-9]{5}2[AB][0-9]{8}",
    "gb.nhs": "[0-9]{10}",
    "gb.upn": "[A-Z][0-9]{11}[0-9A-Z]",
    "gr.amka": "[0-9]{11}",
    "hr.oib": "[0-9]{11}",
    "id.nik": "[0-9]{16}",
    "ie.pps": "[0-9]{7}[A-W]|[0-9]{7}[A-W][A-Z]",
    "il.idnr": "[0-9]{9}",
    "in_.aadhaar": "[2-9][0-9]{11}",
    "in_.epic": "[A-Z]{3}[0-9]{7}",
    "in_.pan": "[A-Z]{5}[0-9]{4}[A-Z]",
    "in_.vid": "[0-9]{16}",
    "is_.kennitala": "[0-9]{10}",
    "it.codicefiscale": "[A-Z]{6}[0-9]{2}[A-Z][0-9]{2}[A-Z][0-9]{3}[A-Z]",
    "jp.in_": "[0-9]{12}",
    "kr.rrn": "[0-9]{13}",
    "lt.asmens": "[0-9]{11}",
    "mu.nid": "[A-Z][0-9]{12}[0-9A-Z]",
    "mx.curp": "[A-Z]{4}[0-9]{6}[HM][A-Z]{5}[0-9A-Z][0-9]",
    "my.nric": "[0-9]{12}",
    "nl.bsn": "[0-9]{9}",
    "nl.onderwijsnummer": "[0-9]{9}",
    "no.fodselsnummer": "[0-9]{11}",
    "nz.ird": "[0-9]{8}|[0-9]{9}",
    "pe.cui": "[0-9]{8}[0-9A-K]",
    "pk.cnic": "[0-9]{13}",
    "pl.pesel": "[0-9]{11}",
    "pt.cc": "[0-9]{9}[0-9A-Z]{2}[0-9]",
    "ro.cnp": "[0-9]{13}",
    "se.personnummer": "[0-9]{6}[-+][0-9]{4}|[0-9]{8}[-+][0-9]{4}|[0-9]{10}|[0-9]{12}",
    "si.emso": "[0-9]{13}",
    "th.pin": "[0-9]{13}",
    "tr.tckimlik": "[0-9]{11}",
    "ua.rntrc": "[0-9]{10}",
    "us.itin": "9[0-9]{8}",
    "us.ssn": "[0-9]{9}",
    "za.idnr": "[0-9]{13}",
}
#: stdnum's personal numbers without a checksum (a format, dates, areas), with the words of
#: a column named for them: their bare candidates count only there
NO_CHECKSUM: dict[str, str] = {
    "cr.cpf": r"c[eé]dula|cpf", "cr.cr": r"c[eé]dula|dimex|residencia",
    "cu.ni": r"carn[eé]|identidad|\bni\b", "dk.cpr": r"cpr|personnummer",
    "id.nik": r"\bnik\b|ktp", "in_.pan": r"\bpan\b|pan.?(?:no|num|card)",
    "my.nric": r"nric|mykad|\bic\b", "pk.cnic": r"cnic|nic.?(?:no|num)",
    "us.itin": r"itin|taxpayer", "us.ssn": r"ssn|social.?sec|soc.?sec",
}
#: kinds whose compact form keeps a sign
_SIGNED = frozenset({"fi.hetu", "se.personnummer"})


_NINO_PREFIX = re.compile(r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]")
_NINO_REFUSED = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def uk_nino(compact: str) -> bool:
    """A UK National Insurance number: HMRC's prefix rules (neither letter D, F, I, Q, U,
    V; the second not O; not BG, GB, KN, NK, NT, TN, ZZ), six digits, a suffix A to D."""
    return (len(compact) == 9 and bool(_NINO_PREFIX.fullmatch(compact[:2]))
            and compact[:2] not in _NINO_REFUSED and compact[2:8].isdigit()
            and compact[8] in "ABCD")


def _nino_display(compact: str) -> str:
    return f"{compact[:2]} {compact[2:4]} {compact[4:6]} {compact[6:8]} {compact[8:]}"


#: card issuers' number prefixes (Visa, Mastercard, American Express, Discover, JCB, Diners
#: Club, Maestro, UnionPay)
_CARD_PREFIX = re.compile(r"4|5[1-5]|2(?:2[2-9]|[3-6]|7[01]|720)|3[47]|6(?:011|5|4[4-9])|35|"
                          r"3(?:0[0-5]|[689])|5018|5020|5038|6304|6759|676[1-3]|62")


def card(compact: str) -> bool:
    """An issuer's prefix, 13 to 19 digits, and the Luhn digit (stdnum's ``luhn``)."""
    from stdnum import luhn

    return (compact.isdigit() and 13 <= len(compact) <= 19
            and bool(_CARD_PREFIX.match(compact)) and luhn.is_valid(compact))


def _card_display(compact: str) -> str:
    if len(compact) == 15:  # American Express: 4-6-5
        return f"{compact[:4]} {compact[4:10]} {compact[10:]}"
    return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))


def _iban(compact: str) -> bool:
    from stdnum import iban

    return bool(iban.is_valid(compact))


def _iban_display(compact: str) -> str:
    from stdnum import iban

    return str(iban.format(compact))


@lru_cache(maxsize=1)
def checked_kinds() -> tuple[CheckedKind, ...]:
    """Every checked kind, national identifiers first (alphabetically), then cards, IBANs."""
    national = [_stdnum_kind(name, shapes, signed=name in _SIGNED)
                for name, shapes in sorted(NATIONAL_SHAPES.items())]
    nino = CheckedKind("gb.nino", "National Insurance number (United Kingdom, HMRC)",
                       (Shape.parse("[A-Z]{2}[0-9]{6}[A-D]"),), uk_nino, _nino_display,
                       context=re.compile(r"nino|national.?insurance|\bni.?(?:no|num)",
                                          re.IGNORECASE))
    national.insert(next(i for i, k in enumerate(national) if k.name > "gb.nino"), nino)
    cards = CheckedKind("card", "payment card numbers",
                        tuple(Shape.parse(f"[0-9]{{{n}}}") for n in range(13, 20)), card,
                        _card_display, partial=True)
    ibans = CheckedKind("iban", "IBANs", tuple(
        Shape.parse(f"[A-Z]{{2}}[0-9]{{2}}[0-9A-Z]{{{n}}}") for n in range(11, 31)), _iban,
        _iban_display, fixed_chance=1 / 97)
    return (*national, cards, ibans)


def _rng(*parts: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(parts).encode()))


@lru_cache(maxsize=4096)
def chance(kind: CheckedKind, shape: Shape) -> float:
    """The share of random candidates of ``shape`` that ``kind`` validates, with one
    success and one failure added (never 0 nor 1 from a finite draw)."""
    if kind.fixed_chance is not None:
        return kind.fixed_chance
    drawn = shape.draw(_rng("chance", kind.name, shape.regex.pattern), CHANCE_DRAWS)
    passed = sum(kind.valid(c) for c in drawn)
    return (passed + 1) / (CHANCE_DRAWS + 2)
