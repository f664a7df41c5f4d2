"""The fourth hardening round: codes that must not merge through floats, a claimed epsilon that
must not overflow, and the other items of the round that need no server (the signer and the
judged party's tables have their own files)."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from riskcore.errors import ConfigError
from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate

N_CODES = 300


def _k_through_the_gate(tmp_path: Path, table: pa.Table | str, fmt: str) -> int:
    """k of ``code`` as the gate measures it (the original: the release plus one row, so that
    the two files differ)."""
    if fmt == "csv":
        assert isinstance(table, str)
        (tmp_path / "released.csv").write_text(table)
        (tmp_path / "original.csv").write_text(table + "1,a\n")
    else:
        assert isinstance(table, pa.Table)
        pq.write_table(table, tmp_path / "released.parquet")
        pq.write_table(pa.concat_tables([table, table.slice(0, 1)]),
                       tmp_path / "original.parquet")
    cfg = {"release_id": "codes", "original": f"original.{fmt}", "released": f"released.{fmt}",
           "output_url": "runs", "roles": {"quasi_identifiers": ["code"], "sensitive": ["s"]},
           "measures": {"k_anonymity": {}},
           "policy": {"version": 1, "checks": ["k_anonymity.k >= 2"]}}
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump(cfg))
    outcome = run_gate(load_gate(tmp_path / "gate.yaml"), "run", steps=LocalSteps())
    measures = json.loads((Path(outcome.decision_url or "").parent / "measures.json")
                          .read_text())
    return int(measures["measures"][0]["figures"]["k"])


def _csv(codes: list[str]) -> str:
    return "code,s\n" + "".join(f"{c},a\n" for c in codes)


@pytest.mark.parametrize("case", ["beyond 64 bits", "below the int64 limit (text)",
                                  "below the int64 limit (Parquet int64)",
                                  "Parquet decimal128 beyond 2**60", "16-digit codes"])
def test_distinct_codes_never_merge_through_floats(tmp_path, case):
    """Each row its own code: k is 1 however the codes are written (through float64 they
    merged: k 2,049, 880, 47)."""
    if case == "beyond 64 bits":
        k = _k_through_the_gate(tmp_path, _csv([str(10**30 + i) for i in range(N_CODES)]), "csv")
    elif case == "below the int64 limit (text)":
        k = _k_through_the_gate(tmp_path, _csv([str(2**63 - 1 - i) for i in range(N_CODES)]),
                                "csv")
    elif case == "below the int64 limit (Parquet int64)":
        table = pa.table({"code": pa.array(np.array([2**63 - 1 - i for i in range(N_CODES)],
                                                    dtype=np.int64)), "s": ["a"] * N_CODES})
        k = _k_through_the_gate(tmp_path, table, "parquet")
    elif case == "Parquet decimal128 beyond 2**60":
        table = pa.table({"code": pa.array([decimal.Decimal(2**61 + i) for i in range(N_CODES)],
                                           type=pa.decimal128(38, 0)), "s": ["a"] * N_CODES})
        k = _k_through_the_gate(tmp_path, table, "parquet")
    else:
        k = _k_through_the_gate(tmp_path, _csv([str(4111111111111000 + i)
                                                for i in range(N_CODES)]), "csv")
    assert k == 1


def test_a_code_written_with_a_sign_is_not_the_code_without(tmp_path):
    """'+1000' and '1000' are two codes (phone and account prefixes): five of each is k 5,
    not one class of ten."""
    assert _k_through_the_gate(tmp_path, _csv(["+1000", "1000"] * 5), "csv") == 5


def test_quantities_keep_their_precision_and_stay_numbers():
    """Honest numbers are not codes: full-precision floats, signs, exponents."""
    import pandas as pd

    from riskcore.data import looks_numeric

    assert looks_numeric(pd.Series(["0.30000000000000004", "-12.5", "1e3", "123456789012345"],
                                   dtype=object))
    assert not looks_numeric(pd.Series(["1234567890123456", "12"], dtype=object))


def test_a_claimed_epsilon_beyond_any_observable_ratio_is_refused_at_load(tmp_path):
    cfg = {"release_id": "eps", "original": "o.csv", "released": "r.csv", "control": "c.csv",
           "output_url": "runs", "roles": {"quasi_identifiers": ["age"]},
           "measures": {"membership": {"claimed_epsilon": 1e308}},
           "policy": {"version": 1, "checks": ["membership.auc <= 0.6"]}}
    with pytest.raises(ConfigError, match="claimed_epsilon.*less than or equal to 100"):
        load_gate(cfg)
