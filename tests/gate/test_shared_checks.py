"""A text column that several tables share is checked once, on the union of their distinct
values: each table still gets its own outcome, counts and example rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from riskcore.data import ColumnType, Roles
from riskcore.gate import gx_helper
from riskcore.gate.cleanliness import validate_tables

ROLES = Roles(("region",), sensitive=("diagnosis",), household="household",
              types={"household": ColumnType.INTEGER})


def _tables() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    n = 300
    original = pd.DataFrame({
        "region": rng.choice(["north", "south"], n),
        "household": [str(i // 2) for i in range(n)],
        "diagnosis": rng.choice(["a", "b"], n)})
    released = original.sample(frac=1.0, random_state=3).reset_index(drop=True)
    original.loc[[10, 11], "household"] = "5x"         # only in the original
    released.loc[[4, 40, 41], "household"] = "77\x01"   # only in the release
    original.loc[20, "region"] = "we\x02st"             # the same bad value in both
    released.loc[[2, 8], "region"] = "we\x02st"
    return {"original": original, "released": released}


def _outcome(report: dict, table: str, column: str, check: str) -> dict:
    [found] = [c for c in report["checks"] if (c["table"], c["column"], c["check"]) ==
               (table, column, check)]
    return found


def test_each_table_keeps_its_own_outcome_counts_and_rows() -> None:
    gx_helper.stop()  # in this process: the same code the helper runs
    report = validate_tables(_tables(), ROLES).to_dict()
    numbers, control = "values are numbers", "no control or non-printable characters"
    ids = _outcome(report, "original", "household", numbers)
    assert (ids["success"], ids["unexpected_count"], ids["example_rows"]) == (False, 2, [10, 11])
    assert _outcome(report, "released", "household", numbers)["success"] is False  # "77\x01"
    assert _outcome(report, "released", "household", numbers)["example_rows"] == [4, 40, 41]
    assert _outcome(report, "released", "household", control)["unexpected_count"] == 3
    # the release's bad id is in the union, but the original does not hold it
    assert _outcome(report, "original", "household", control)["success"] is True
    assert _outcome(report, "original", "household", control)["unexpected_count"] == 0
    # the same bad value in both tables: each its own rows
    assert _outcome(report, "original", "region", control)["example_rows"] == [20]
    assert _outcome(report, "released", "region", control)["example_rows"] == [2, 8]
    assert _outcome(report, "original", "diagnosis", control)["success"] is True


def test_a_check_without_a_result_fails_closed(monkeypatch) -> None:
    """Fault injection: Great Expectations' answer lacks a check's result."""
    from riskcore.gate import cleanliness

    real = cleanliness._run_suites

    def lossy(jobs):  # type: ignore[no-untyped-def]
        suites, waited = real(jobs)
        return [rows[:-1] for rows in suites], waited

    gx_helper.stop()
    monkeypatch.setattr(cleanliness, "_run_suites", lossy)
    report = validate_tables(_tables(), ROLES)
    lost = [c for c in report.checks if "returned no result" in c.detail]
    assert lost and not any(c.success for c in lost) and not report.success


def test_a_large_text_column_screened_by_arrow_gives_the_same_report(monkeypatch) -> None:
    """A large text column whose checks are regular expressions sends Great
    Expectations only the values that Arrow's RE2 finds failing (and its first value); the
    report (outcomes, counts, example rows) is the one GX gives on every value."""
    from riskcore.gate import cleanliness

    gx_helper.stop()
    tables = _tables()
    whole = validate_tables(tables, ROLES).to_dict()
    seen: list[int] = []
    real = cleanliness._run_suites

    def counting(jobs):
        seen.extend(len(frame) for name, frame, _ in jobs if name.startswith("values-"))
        return real(jobs)

    monkeypatch.setattr(cleanliness, "SCREEN_ABOVE", 0)
    monkeypatch.setattr(cleanliness, "_run_suites", counting)
    screened = validate_tables(tables, ROLES).to_dict()
    assert screened["checks"] == whole["checks"]
    assert max(seen) < 10  # the ~150 household ids and regions: their suspects and first value


def _many_columns() -> tuple[dict[str, pd.DataFrame], Roles]:
    """Two tables, seven text columns (held as text, and as Python objects mixing numbers and
    text), each failing some value checks in some rows, and one whose values are all missing."""
    rng = np.random.default_rng(11)
    n = 400
    bad = ["x\x07y", "z\ufffd", "12a", "\u200bq", "ok\n", "3.5.1", "\x00", "n\x85"]
    original = pd.DataFrame({
        "q1": rng.choice(["a", "b", "c d"], n), "q2": rng.integers(0, 99, n).astype(str),
        "q3": rng.choice(["e", "f"], n), "s": rng.choice(["g", "h"], n),
        "hh": [f"id{i}" for i in rng.permutation(n)], "extra": rng.choice(["i", "j"], n),
        "empty": pd.Series([None] * n, dtype=object)})
    released = original.copy()
    released["w"] = pd.Series(list(rng.integers(0, 9, n)), dtype=object)  # numbers as objects
    for table, frame in (("original", original), ("released", released)):
        for col in ("q1", "q2", "q3", "s", "hh", "extra", *(("w",) if table == "released"
                                                           else ())):
            rows = rng.choice(n, int(rng.integers(1, 4)), replace=False)
            for row in rows:
                frame.loc[row, col] = bad[int(rng.integers(len(bad)))]
    original = original.astype({c: "category" for c in ("q1", "q3", "s")})
    roles = Roles(("q1", "q2", "q3", "empty"), sensitive=("s",), household="hh",
                  types={"q2": ColumnType.INTEGER})
    return {"original": original, "released": released}, roles


def test_a_regular_expression_asked_of_many_columns_is_one_expectation(monkeypatch) -> None:
    """The columns' values that one regular expression checks are stacked into one frame
    column and checked by one expectation (GX's cost is per expectation); each column still
    gets the outcome, counts and example rows that checking it on its own gives."""
    from riskcore.gate import cleanliness

    gx_helper.stop()
    tables, roles = _many_columns()
    asked: list[int] = []
    real = cleanliness._run_suites

    def counting(jobs):
        asked.append(sum(len(specs) for name, _, specs in jobs if name.startswith("values-")))
        return real(jobs)

    monkeypatch.setattr(cleanliness, "_run_suites", counting)
    stacked = validate_tables(tables, roles).to_dict()
    monkeypatch.setattr(cleanliness, "STACKED", frozenset())
    alone = validate_tables(tables, roles).to_dict()
    assert stacked == alone
    failed = [(c["table"], c["column"], c["check"]) for c in alone["checks"]
              if not c["success"] and c["source"] == "great_expectations"]
    assert len(failed) >= 12 and {t for t, _, _ in failed} == {"original", "released"}
    assert asked == [asked[0], asked[1]] and asked[0] * 2 <= asked[1], asked
