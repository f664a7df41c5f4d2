"""Identifiers in any country's form and in the spellings real data uses, and the honest
columns that must stay unflagged: the scan (riskcore.identifiers) on columns of 3,000 values.

Valid numbers are drawn at random and kept when python-stdnum validates them (the library
the scan uses); the written forms are stdnum's own ``format``. The honest columns are random
codes of the identifiers' lengths (which pass a BSN's or a SIN's checksum one time in ten),
dates, amounts, and US city names that are first names too."""

from __future__ import annotations

import random
import sys
import unicodedata
from collections.abc import Callable
from functools import lru_cache

import pandas as pd
import pytest
import stdnum.br.cpf
import stdnum.ca.sin
import stdnum.es.dni
import stdnum.in_.aadhaar
import stdnum.nl.bsn
import stdnum.se.personnummer
import stdnum.us.ssn
from stdnum import luhn

from riskcore.identifiers import scan_column
from riskcore.identifiers.checked import chance, checked_kinds
from riskcore.identifiers.names import name_lists, place_names
from riskcore.identifiers.text import FORMAT, HIDING

N = 3000
#: every test's draws; reseeded before each test (:func:`_seeded`), so that a test's values
#: are the same whichever tests ran before it in its process
R = random.Random(54)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    R.seed(54)


def digits(k: int) -> str:
    return "".join(R.choice("0123456789") for _ in range(k))


def valid(draw: Callable[[], str], ok: Callable[[str], bool], n: int = N) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        c = draw()
        if ok(c):
            out.add(c)
    return sorted(out)


def personnummer() -> str:
    body = f"{R.randint(30, 99):02d}{R.randint(1, 12):02d}{R.randint(1, 28):02d}-{digits(3)}"
    return next(body + c for c in "0123456789" if stdnum.se.personnummer.is_valid(body + c))


def nir() -> str:
    """A French NIR: sex, year, month, department, commune, order, key (97 - n mod 97)."""
    body = (R.choice("12") + digits(2) + f"{R.randint(1, 12):02d}" + f"{R.randint(1, 95):02d}"
            + digits(6))
    key = 97 - int(body) % 97
    return (f"{body[0]} {body[1:3]} {body[3:5]} {body[5:7]} {body[7:10]} {body[10:13]} "
            f"{key:02d}")


def card(sep: str) -> str:
    body = "4" + digits(14)
    number = next(body + c for c in "0123456789" if luhn.is_valid(body + c))
    return sep.join(number[i:i + 4] for i in range(0, 16, 4))


def phone_of(region: str) -> Callable[[str], bool]:
    """phonenumbers' validity in ``region`` (the library the scan uses): a real column's
    numbers are all in service, where random subscriber digits miss one time in forty (a
    French "04 05 ..." is in no plan), near the threshold the scan asks of numbers written
    as the region writes them."""
    import phonenumbers

    return lambda v: phonenumbers.is_valid_number(phonenumbers.parse(v, region))


def us_phone() -> str:
    """A US number with an area code in service and an exchange of 2-9 (never 555)."""
    area = R.choice(["212", "415", "312", "617", "202", "305", "713", "206", "404", "503"])
    exchange = str(R.randint(2, 9)) + digits(2)
    return area + (exchange if exchange != "555" else "556") + digits(4)


FOREIGN = {  # issue 54's nine columns: name -> (values, the kind and region found)
    "bsn": (lambda: valid(lambda: digits(9), stdnum.nl.bsn.is_valid), ("nl.bsn", None)),
    "cpf": (lambda: [stdnum.br.cpf.format(v) for v in valid(lambda: digits(11),
                                                           stdnum.br.cpf.is_valid)],
            ("br.cpf", None)),
    "personnummer": (lambda: [personnummer() for _ in range(N)], ("se.personnummer", None)),
    "aadhaar": (lambda: [stdnum.in_.aadhaar.format(v) for v in valid(
        lambda: R.choice("23456789") + digits(11), stdnum.in_.aadhaar.is_valid)],
        ("in_.aadhaar", None)),
    "dni": (lambda: valid(lambda: digits(8) + R.choice("TRWAGMYFPDXBNJZSQVHLCKE"),
                          stdnum.es.dni.is_valid), ("es.dni", None)),
    "nir": (lambda: [nir() for _ in range(N)], ("fr.nir", None)),
    "sin": (lambda: [stdnum.ca.sin.format(v) for v in valid(lambda: digits(9),
                                                           stdnum.ca.sin.is_valid)],
            ("ca.sin", None)),
    "telefon": (lambda: valid(lambda: "0" + R.choice(["30", "40", "89", "711", "221", "69"])
                              + " " + digits(R.randint(6, 8)), phone_of("DE")), ("phone", "DE")),
    "telephone": (lambda: valid(lambda: "0" + R.choice("12345") + " "
                                + " ".join(digits(2) for _ in range(4)), phone_of("FR")),
                  ("phone", "FR")),
}


def found(column: str, values: list[str]) -> dict[str, object]:
    return {f.kind: f for f in scan_column("released", column, pd.Series(values, dtype=object))}


@pytest.mark.parametrize("column", list(FOREIGN))
def test_each_countrys_identifiers_are_found_by_the_librarys_name(column):
    make, (kind, region) = FOREIGN[column]
    values = make()
    hits = found(column, values)
    assert kind in hits, (column, sorted(hits))
    finding = hits[kind]
    assert finding.cells >= 0.95 * len(values)  # type: ignore[attr-defined]
    if region is not None:
        assert finding.detail["regions"] == [region]  # type: ignore[attr-defined]
    # the scan names one kind for a column of one kind (a Luhn-checked SIN is not also an
    # Israeli identity number once it is written as a SIN)
    assert set(hits) == {kind}, sorted(hits)


HONEST = {
    "codes": lambda: [digits(9) for _ in range(N)],  # zero-padded random codes
    "order_no": lambda: [str(R.randint(10**8, 10**9 - 1)) for _ in range(N)],
    "account": lambda: [digits(11) for _ in range(N)],
    "ref12": lambda: [digits(12) for _ in range(N)],
    "sku16": lambda: [digits(16) for _ in range(N)],
    "ref_dashed": lambda: [f"{digits(3)}-{digits(2)}-{digits(4)}" for _ in range(N)],
    "grouped9": lambda: [f"{digits(3)}-{digits(3)}-{digits(3)}" for _ in range(N)],
    "postcode": lambda: [digits(5) for _ in range(N)],
    "visit_date": lambda: [f"20{R.randint(10, 24)}-{R.randint(1, 12):02d}-"
                           f"{R.randint(1, 28):02d}" for _ in range(N)],
    "amount": lambda: [f"{R.randint(1000, 10**7)}.{R.randint(0, 99):02d}" for _ in range(N)],
    "city": lambda: [R.choice(["Jackson", "Austin", "Madison", "Charlotte", "Houston",
                               "Phoenix", "Dallas", "Denver", "Lincoln", "Franklin", "Clinton",
                               "Florence", "Marion", "Chester", "Salem", "Springfield"])
                     for _ in range(N)],
    "colour": lambda: [R.choice(["Brown", "Green", "White", "Black", "Gray", "Red", "Blue",
                                 "Pink", "Rose"]) for _ in range(N)],
}


@pytest.mark.parametrize("column", list(HONEST))
def test_codes_dates_amounts_and_places_are_not_identifiers(column):
    assert found(column, HONEST[column]()) == {}


def test_random_nine_digit_codes_pass_the_bsn_and_sin_checks_by_chance_only():
    """One in ten random codes passes each checksum: not enough to be identifiers."""
    values = [digits(9) for _ in range(N)]
    share = sum(stdnum.nl.bsn.is_valid(v) for v in values) / N
    assert 0.06 < share < 0.13  # the premise: about one in eleven
    assert found("id_number", values) == {}


SPELLINGS = {  # column -> (values, kind)
    "ssn": (lambda: valid(lambda: digits(9), stdnum.us.ssn.is_valid), "us.ssn"),
    "notes_ssn": (lambda: [f"{v[:3]}.{v[3:5]}.{v[5:]}" for v in valid(
        lambda: digits(9), stdnum.us.ssn.is_valid)], "us.ssn"),
    "payment": (lambda: [card(".") for _ in range(N)], "card"),
    "mail": (lambda: [f"jösé{i}@exämple.de" for i in range(N)], "email"),
    "mail_cjk": (lambda: [f"user{i}@例え.jp" for i in range(N)], "email"),
    "mail_fullwidth": (lambda: [f"user{i}＠example.com" for i in range(N)], "email"),
    "mail_zero_width": (lambda: [f"us\u200ber{i}@exam\u200cple.com" for i in range(N)], "email"),
    "who": (lambda: [f"{R.choice(_first()).lower()} {R.choice(_last()).lower()}"
                     for _ in range(N)], "name"),
    "who_upper": (lambda: [f"{R.choice(_first())} {R.choice(_last())}" for _ in range(N)],
                  "name"),
    "who_comma": (lambda: [f"{R.choice(_last()).title()}, {R.choice(_first()).title()}"
                           for _ in range(N)], "name"),
    "family": (lambda: [R.choice(_last()).title() for _ in range(N)], "name"),
    "mobile": (lambda: [us_phone() for _ in range(N)], "phone"),
    "profile": (lambda: [f"facebook.com/user.{i}" for i in range(N)], "url"),
    "profile_li": (lambda: [f"www.linkedin.com/in/member{i}" for i in range(N)], "url"),
}


@lru_cache(maxsize=1)
def _first() -> list[str]:
    return sorted(name_lists()[0] - place_names())[:1500]


@lru_cache(maxsize=1)
def _last() -> list[str]:
    return sorted(name_lists()[1] - place_names())[:3000]


@pytest.mark.parametrize("column", list(SPELLINGS))
def test_the_spellings_real_data_uses_are_found(column):
    make, kind = SPELLINGS[column]
    values = make()
    hits = found(column, values)
    assert kind in hits, (column, sorted(hits))
    assert hits[kind].cells >= 0.95 * len(values)  # type: ignore[attr-defined]


def test_a_first_name_that_is_a_place_counts_in_a_column_named_for_names():
    values = [R.choice(["Austin", "Madison", "Charlotte", "Florence", "Victoria", "Alice",
                        "Chester", "Marion"]) for _ in range(N)]
    assert found("city", values) == {}
    assert "name" in found("first_name", values)


def test_one_identifier_written_in_full_in_a_column_of_notes_is_found():
    notes = [f"visit {i}: no change" for i in range(N)]
    notes[1234] = "insured under SSN 536-90-4399, see file"
    hits = found("notes", notes)
    assert set(hits) == {"us.ssn"} and hits["us.ssn"].cells == 1  # type: ignore[attr-defined]
    assert list(hits["us.ssn"].rows) == [1234]  # type: ignore[attr-defined]


def test_bare_numbers_of_a_kind_without_a_checksum_need_a_column_named_for_it():
    """A US SSN's rules are a format (nine in ten random codes pass): a column of nine-digit
    order numbers that never start with 9 passes them all, and is no column of SSNs."""
    values = [str(R.randint(10**8, 9 * 10**8 - 1)) for _ in range(N)]
    assert found("order_number", values) == {}
    assert "us.ssn" in found("ssn", valid(lambda: digits(9), stdnum.us.ssn.is_valid))


@pytest.mark.parametrize("kind, expected", [
    ("nl.bsn", 1 / 11), ("ca.sin", 0.8 / 10), ("card", None), ("us.ssn", 0.889),
])
def test_chance_is_the_share_of_random_candidates_that_pass(kind, expected):
    """Drawn once per process (4,000 candidates, seeded): within four standard errors of
    the checksum's own rate (the BSN's eleven-test; the SIN's Luhn digit, on the eight first
    digits a SIN may start with; the SSA's rules: 0.9 x 0.998 x 0.99 ...)."""
    found_kind = next(k for k in checked_kinds() if k.name == kind)
    rates = [chance(found_kind, s) for s in found_kind.shapes]
    if expected is None:  # cards: an issuer's prefix times Luhn, below 0.1 at every length
        assert all(0.01 < r < 0.1 for r in rates), rates
        return
    se = (expected * (1 - expected) / 4000) ** 0.5
    assert abs(rates[0] - expected) < 4 * se + 1 / 4000, rates


def test_the_format_characters_are_unicodes_category_cf():
    import re

    table = re.compile(f"[{FORMAT}]")
    cf = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    assert {c for c in cf if not table.match(chr(c))} == set()
    assert all(table.match(chr(c)) for c in cf)
    assert re.fullmatch(f"[{HIDING}]+", "\u200b\u202e\ufeff") and not re.match(
        f"[{HIDING}]", "\u200d")  # a zero-width joiner is honest text (emoji, Indic scripts)


def test_the_place_list_says_where_it_comes_from():
    import gzip
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "riskcore/data_files/place_names.txt.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        head = fh.read(2000)
    assert "GeoNames" in head and "CC BY 4.0" in head
    assert {"AUSTIN", "MADISON", "JACKSON", "PARIS", "TEXAS"} <= place_names()


def test_a_column_of_digits_is_scanned_for_what_digits_can_hold():
    """A column of digits alone skips the kinds that need other characters (an @, a dot, a
    slash, letters), not those digits can hold: cards in an integer column are found, and one
    e-mail address among digits still makes the column one to read for every kind."""
    cards = [int(s + luhn.calc_check_digit(s))
             for s in (str(4 * 10**14 + R.randrange(10**14)) for _ in range(N))]
    typed = scan_column("released", "payment", pd.Series(cards, dtype="int64"))
    assert [f.kind for f in typed] == ["card"] and typed[0].cells == N
    ids = [str(R.randrange(10**6)) for _ in range(N)]
    assert found("household_id", ids) == {}
    ids[77] = "jane.roe@example.org"
    hits = found("household_id", ids)
    assert set(hits) == {"email"} and list(hits["email"].rows) == [77]  # type: ignore[attr-defined]


def test_looking_names_up_in_python_or_in_arrow_gives_one_answer(monkeypatch):
    """A column's few distinct values are looked up in the name lists in Python (Arrow hashes
    a whole list on every call); many in Arrow: the same names either way."""
    from riskcore.identifiers import names as N

    first, last = (sorted(x)[:400] for x in name_lists())
    rng = random.Random(7)
    values = ([f"{rng.choice(first).title()} {rng.choice(last).title()}" for _ in range(60)]
              + [f"{rng.choice(last).title()}, {rng.choice(first).title()}" for _ in range(20)]
              + [rng.choice(first).title() for _ in range(40)]
              + [f"met {rng.choice(first).title()} {rng.choice(last).title()} at noon"
                 for _ in range(10)] + sorted(place_names())[:30] + ["12 Main St", None])
    found = {}
    for ratio in (0, 10**9):  # Arrow always, Python always
        monkeypatch.setattr(N, "PYTHON_LOOKUP_RATIO", ratio)
        found[ratio] = scan_column("released", "contact", pd.Series(values, dtype=object))
    arrow, python = found[0], found[10**9]
    names = [f for f in arrow if f.kind == "name"]
    assert names and names[0].cells >= 80
    assert [f.to_dict() for f in python] == [f.to_dict() for f in arrow]


@pytest.mark.parametrize("re2, literal", [
    ("email", "@"), ("names in text", " ")])
def test_a_text_every_match_holds_is_looked_for_first_and_changes_no_answer(re2, literal):
    """An expression whose every match holds a text is not run (not compiled) on a column
    without that text; where the text is, its answer is the expression's own."""
    import pyarrow as pa

    from riskcore.identifiers.names import TEXT_RE2
    from riskcore.identifiers.patterns import EMAIL
    from riskcore.identifiers.text import matches

    expression = EMAIL.re2 if re2 == "email" else TEXT_RE2
    assert (EMAIL.literal if re2 == "email" else literal) == literal
    with_it = pa.array(["ann@example.org", "a@b.c", "x@y", "Ann Lee", "ann lee", "@", " ",
                        "Zoë Ärn", None, "b.c@d.ef", "Bob Ray met Cy Doe"],
                       type=pa.large_string())
    without = pa.array(["north", "Ann", "LEE", None, "a.b"], type=pa.large_string())
    for values in (with_it, without):
        assert matches(values, expression, literal).tolist() == \
            matches(values, expression).tolist()
    assert any(matches(with_it, expression, literal))
