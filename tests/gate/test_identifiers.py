"""The scan for direct identifiers nobody declared: each kind planted in a column and in free
text (count and share asserted) through a whole gate run, the validators against known valid
and invalid numbers, the negatives that must pass (product codes, random codes, postal codes,
dates, measures, the example's own columns), and the allow list."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from stdnum import luhn as stdnum_luhn

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.identifiers import kind_titles, scan_column
from riskcore.identifiers.checked import checked_kinds
from riskcore.identifiers.patterns import ip_address
from riskcore.identifiers.phones import DEFAULT_REGIONS, read_value
from tests.conftest import example_text_tables


def luhn(digits: str) -> bool:
    return bool(stdnum_luhn.is_valid(digits))


def _valid(kind: str, written: str) -> bool:
    """A kind's validator on a written number (its separators dropped, as the scan does)."""
    found = next(k for k in checked_kinds() if k.name == kind)
    return found.valid(re.sub(r"[ .-]", "", written).upper())

N = 2000


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, pd.DataFrame]:
    return example_text_tables(tmp_path_factory.mktemp("ids-base"), N, 8)


def _luhn_number(rng: np.random.Generator, prefix: str = "4") -> str:
    body = prefix + "".join(str(d) for d in rng.integers(0, 10, 15 - len(prefix)))
    for check in "0123456789":
        if luhn(body + check):
            return body + check
    raise AssertionError


def _gate(tmp_path: Path, base: dict[str, pd.DataFrame], column: str, values: list[str],
          **extra: Any) -> tuple[Any, dict[str, Any]]:
    """The example with one more column (in the original and the release alike), named
    nowhere in the roles, under a lax policy."""
    original, released = base["original"].copy(), base["released"].copy()
    original[column] = values
    released[column] = values
    original.to_csv(tmp_path / "original.csv", index=False)
    released.to_csv(tmp_path / "released.csv", index=False)
    cfg = {"release_id": "ids", "original": str(tmp_path / "original.csv"),
           "released": str(tmp_path / "released.csv"), "output_url": str(tmp_path / "out"),
           "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                     "sensitive": ["diagnosis"], "direct_identifiers": ["person_id"],
                     "types": {"age": "categorical"}},
           "measures": {"k_anonymity": {}},
           "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}, **extra}
    outcome = run_gate(load_gate(cfg), "run", steps=LocalSteps())
    folder = Path(outcome.folder or "")
    return outcome, json.loads((folder / "validation.json").read_text())


def _planted(rng: np.random.Generator, share: float, make: Any, filler: Any) -> list[str]:
    return [make(i) if rng.random() < share else filler(i) for i in range(N)]


CASES = {
    "contact": (lambda rng: _planted(rng, 0.3, lambda i: f"user{i}@example.org",
                                     lambda i: ""), ["email"]),
    "first_name": (lambda rng: [str(rng.choice(["Mary", "James", "Linda", "Robert", "Susan",
                                               "Michael", "Karen", "David"]))
                                for _ in range(N)], ["name"]),
    "notes": (lambda rng: _planted(rng, 0.05, lambda i: (
        f"called back on +44 20 7946 {i % 10000:04d}" if i % 2 else
        f"ssn on file 536-{10 + i % 80:02d}-{1000 + i:04d}"),
        lambda i: "no change since last visit"), ["phone", "us.ssn"]),
    "card": (lambda rng: _planted(rng, 0.2, lambda i: _luhn_number(rng), lambda i: ""),
             ["card"]),
}


@pytest.mark.parametrize("column", list(CASES))
def test_each_kind_planted_is_rejected_with_its_count(column, base, tmp_path):
    rng = np.random.default_rng(len(column))
    make, kinds = CASES[column]
    values = make(rng)
    outcome, validation = _gate(tmp_path, base, column, values)
    assert outcome.verdict == "REJECTED", outcome.reasons
    found = {f["kind"]: f for f in validation["identifiers"]["found"]
             if f["column"] == column}
    assert set(found) == set(kinds), found
    scanned = scan_column("released", column, pd.Series(values, dtype=object))
    for kind in kinds:
        expected = next(f.cells for f in scanned if f.kind == kind)
        assert found[kind]["cells"] == expected and found[kind]["fails"] is True
        assert found[kind]["share"] == pytest.approx(
            expected / sum(1 for v in values if v), abs=1e-6)
    line = next(r for r in outcome.reasons if f"released.{column}:" in r)
    assert "no undeclared direct identifiers" in line and kind_titles()[kinds[0]][0] in line
    assert f"allow: {{{column}: [{', '.join(kinds)}]}}" in line
    for value in values[:50]:  # never a value in the reasons
        if value:
            assert value not in " ".join(outcome.reasons)
    per_record = pd.read_parquet(Path(outcome.folder or "") / "per_record.parquet")
    flagged = set(per_record.loc[per_record["identifier"] == 1, "row"])
    assert flagged == {int(i) for f in scanned for i in f.rows}
    if column == "first_name":  # a lone name is a name only in a column of names
        assert not scan_column("r", "c", pd.Series([values[0]], dtype=object))


def test_the_allow_list_accepts_a_kind_in_a_column(base, tmp_path):
    values = CASES["notes"][0](np.random.default_rng(5))
    outcome, validation = _gate(tmp_path, base, "notes", values,
                                identifiers={"allow": {"notes": ["phone", "us_ssn"]}})
    assert outcome.verdict == "APPROVED", outcome.reasons
    assert all(f["allowed"] and not f["fails"] for f in validation["identifiers"]["found"])
    decision = json.loads(Path(outcome.decision_url or "").read_text())
    # an earlier version's name (us_ssn) is read as stdnum's (us.ssn), and recorded so
    assert decision["config"]["identifiers"]["allow"] == {"notes": ["phone", "us.ssn"]}


NEGATIVES = {
    "product_code": lambda rng: [f"SKU-{rng.integers(10000, 99999)}-{rng.choice(['A', 'B'])}"
                                 for _ in range(N)],
    "random_code": lambda rng: ["".join(str(d) for d in rng.integers(0, 10, 16))
                                for _ in range(N)],
    "postcode": lambda rng: [f"{rng.integers(0, 99999):05d}" for _ in range(N)],
    "visit_date": lambda rng: [f"2024-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
                               for _ in range(N)],
    "measure": lambda rng: [f"{rng.normal(100, 15):.3f}" for _ in range(N)],
    "phrase": lambda rng: [str(rng.choice(["stable", "improving", "see notes", "New York",
                                           "Mayo Clinic"])) for _ in range(N)],
}


@pytest.mark.parametrize("column", list(NEGATIVES))
def test_codes_dates_measures_and_words_are_not_identifiers(column, base, tmp_path):
    values = NEGATIVES[column](np.random.default_rng(7))
    outcome, validation = _gate(tmp_path, base, column, values)
    assert outcome.verdict == "APPROVED", outcome.reasons
    assert [f for f in validation["identifiers"]["found"] if f["fails"]] == []


def test_the_examples_columns_are_not_identifiers(base):
    for table in ("original", "released"):
        for col in base[table].columns:
            if col == "person_id":
                continue
            assert scan_column(table, col, base[table][col]) == [], col


@pytest.mark.parametrize("number, valid", [
    ("4111111111111111", True), ("4111 1111 1111 1111", True), ("5500-0000-0000-0004", True),
    ("378282246310005", True), ("4111111111111112", False), ("1234567812345670", False),
])
def test_cards_by_issuer_and_luhn(number, valid):
    assert _valid("card", number) is valid


@pytest.mark.parametrize("number, valid", [
    ("GB82 WEST 1234 5698 7654 32", True), ("DE89370400440532013000", True),
    ("FR1420041010050500013M02606", True), ("GB82 WEST 1234 5698 7654 33", False),
    ("DE8937040044053201300", False), ("XX82WEST12345698765432", False),
])
def test_ibans_by_country_length_and_mod_97(number, valid):
    assert _valid("iban", number) is valid


@pytest.mark.parametrize("number, valid", [
    ("536-12-4567", True), ("000-12-4567", False), ("666-12-4567", False),
    ("912-12-4567", False), ("536-00-4567", False), ("536-12-0000", False),
])
def test_us_ssns_by_the_area_rules(number, valid):
    assert _valid("us.ssn", number) is valid


@pytest.mark.parametrize("number, valid", [
    ("AB123456C", True), ("QQ123456C", False), ("GB123456A", False), ("AO123456B", False),
])
def test_uk_national_insurance_numbers(number, valid):
    assert _valid("gb.nino", number) is valid


@pytest.mark.parametrize("text, regions", [
    ("+44 20 7946 0958", {"+"}), ("0711 9798106", {"DE"}), ("02 72 63 04 64", {"FR"}),
    ("(212) 555-0147", {"US"}), ("+0 123", set()),
])
def test_phone_numbers_are_valid_where_phonenumbers_says(text, regions):
    """A number is valid in its region (and often elsewhere too: the column decides)."""
    assert regions <= read_value(text, DEFAULT_REGIONS, None)
    if not regions:
        assert read_value(text, DEFAULT_REGIONS, None) == set()


@pytest.mark.parametrize("text, valid", [
    ("192.168.1.10", True), ("2001:db8::1", True), ("256.1.1.1", False),
    ("01.2.3.4", False), ("0.0.0.0", False),
])
def test_ip_addresses(text, valid):
    assert ip_address(text) is valid


def test_the_name_list_says_where_it_comes_from():
    text = (Path(__file__).resolve().parents[2] / "riskcore/data_files/person_names.txt"
            ).read_text()
    assert "U.S. Census Bureau, 1990 Census" in text and "Public domain" in text
    from riskcore.identifiers.names import name_lists

    first, last = name_lists()
    assert {"MARY", "JAMES"} <= first and {"SMITH", "JOHNSON"} <= last
    assert len(first) > 1000 and len(last) > 5000


def test_a_column_of_ip_addresses_is_ip_addresses_not_phone_numbers():
    rng = np.random.default_rng(3)
    values = [".".join(str(int(x)) for x in rng.integers(1, 256, 4)) for _ in range(2000)]
    found = scan_column("released", "host", pd.Series(values, dtype=object))
    assert [(f.kind, f.cells) for f in found] == [("ip", 2000)]
