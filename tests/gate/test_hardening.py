"""The third hardening round: identities that must survive encoding, paths and URLs that must
stay inside their prefixes, CSV line breaks read one way, credentials in query strings, and
one clear line for each bad setting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from riskcore.errors import ConfigError, InputError
from riskcore.storage import check_url, parse_storage_options, under_prefix
from tests.conftest import ROOT


# ---------------------------------------------------------------- identities
def _k(frames: dict[str, pd.DataFrame], qis: tuple[str, ...], **roles) -> int:
    from riskcore.data import encode_tables
    from riskcore.equivalence import frequencies
    from riskcore.roles import Roles

    table = encode_tables(frames, Roles(quasi_identifiers=qis, **roles))["released"]
    return int(frequencies(table).fk.min())


def test_codes_with_leading_zeros_are_text_and_distinct(tmp_path):
    """'01000' and '1000' are two postal codes: a column with a leading zero is text, so
    neither the type nor the classes merge them (inferred numeric, they merged and k rose)."""
    from riskcore.data import looks_numeric
    from riskcore.gate.cleanliness import declared_types
    from riskcore.roles import ColumnType, Roles

    released = pd.DataFrame({"zip": ["01000", "1000", "02134", "2134"], "sex": ["F"] * 4})
    original = pd.DataFrame({"zip": ["1000", "1000", "2134", "2134"], "sex": ["F"] * 4})
    assert not looks_numeric(released["zip"]) and looks_numeric(original["zip"])
    types = declared_types({"original": original, "released": released},
                           Roles(quasi_identifiers=("zip", "sex")))
    assert types["zip"] is ColumnType.CATEGORICAL  # the original alone reads as numbers
    assert _k({"released": released}, ("zip", "sex")) == 1


@pytest.mark.parametrize("kind", ["int64", "uint64", "text"])
def test_integers_beyond_2_53_keep_their_identity(kind):
    """float64 reads 2**53 + 1 as 2**53; an identifier-like quasi-identifier near 2**63 (a
    Parquet uint64 beyond it too) stays k = 1."""
    base = 2**63 + 1 if kind == "uint64" else 2**53
    values = [base + i for i in range(6)]
    if kind == "text":
        column = pd.Series([str(v) for v in values], dtype=object)
    else:
        column = pd.Series(np.array(values, dtype=kind))
    from riskcore.roles import ColumnType

    frame = pd.DataFrame({"code": column})
    assert _k({"released": frame}, ("code",), types={"code": ColumnType.INTEGER}) == 1


def test_a_uint64_parquet_release_keeps_k_1_through_the_gate(tmp_path):
    from riskcore.gate.config import load_gate
    from riskcore.gate.run import LocalSteps, run_gate

    ids = np.array([2**63 + i for i in range(50)], dtype=np.uint64)
    table = pa.table({"code": pa.array(ids, type=pa.uint64()),
                      "sex": pa.array(["F", "M"] * 25)})
    pq.write_table(table, tmp_path / "original.parquet")
    # the same rows, other bytes (a byte-identical release is refused before any measure)
    pq.write_table(table, tmp_path / "released.parquet", compression="gzip")
    cfg = {"release_id": "big-ints", "original": str(tmp_path / "original.parquet"),
           "released": str(tmp_path / "released.parquet"), "output_url": str(tmp_path / "out"),
           "roles": {"quasi_identifiers": ["code", "sex"]},
           "measures": {"k_anonymity": {}}, "policy": {"version": 1,
                                                       "checks": ["k_anonymity.k >= 2"]}}
    outcome = run_gate(load_gate(cfg), "run-big", steps=LocalSteps())
    assert outcome.verdict == "REJECTED"
    check = next(c for c in outcome.checks if c["figure"] == "k_anonymity.k")
    assert check["value"] == 1


def _brute_wildcard(codes: np.ndarray) -> np.ndarray:
    """sdcMicro's rule with alpha = 1, by brute force: f of a row counts every row that equals
    it wherever both are observed."""
    n = len(codes)
    out = np.zeros(n)
    for i, j in product(range(n), range(n)):
        both = (codes[i] >= 0) & (codes[j] >= 0)
        if np.array_equal(codes[i][both], codes[j][both]):
            out[i] += 1
    return out


@pytest.mark.parametrize("m", [8, 63, 64, 70])
def test_wildcard_counts_are_right_at_any_number_of_quasi_identifiers(m):
    """The missing patterns were an int64 bit mask: from 64 columns on it overflowed (k 101
    instead of 1). Against brute force, at 8 to 70 columns."""
    from riskcore.data import encode_tables
    from riskcore.equivalence import frequencies
    from riskcore.roles import Roles

    rng = np.random.default_rng(m)
    n = 40
    frame = pd.DataFrame({f"q{j}": rng.choice(["a", "b", None], n, p=[0.45, 0.45, 0.1])
                          for j in range(m)})
    frame.iloc[:5, :] = None  # rows missing everywhere match every row
    qis = tuple(frame.columns)
    table = encode_tables({"released": frame}, Roles(quasi_identifiers=qis))["released"]
    f = frequencies(table, missing="wildcard", alpha=1.0)
    assert np.array_equal(np.asarray(f.fk, dtype=float), _brute_wildcard(table.codes(qis)))


# ---------------------------------------------------------------- prefixes and URLs
@pytest.mark.parametrize("url, inside", [
    ("s3://releases/census/v2/released.csv", True),
    ("S3://releases/census/v2/released.csv", True),
    ("s3://releases/census/%2e%2e/secret.csv", False),
    ("s3://releases/census/..%2fother/x.csv", False),
    ("s3://releases/census/%252e%252e/x.csv", False),
    ("s3://releases/census/v2/../../other/x.csv", False),
    ("s3://releases/census-x/released.csv", False),
    ("s3://releases/census/v2\\..\\..\\x.csv", False),
])
def test_encoded_traversal_is_outside_every_prefix(url, inside):
    assert under_prefix(url, "s3://releases/census/") is inside


@pytest.mark.parametrize("url, inside", [
    ("https://data.example/releases/a.csv", True),
    ("https://data.example/releases/%2E%2E/a.csv", False),
    ("https://data.example/releases/a.csv?redirect=../../b", False),
    ("https://data.example/releases/a.csv#../b", False),
])
def test_http_urls_stay_inside_their_prefix(url, inside):
    assert under_prefix(url, "https://data.example/releases/") is inside


def test_a_symlink_under_a_prefix_pointing_outside_is_outside(tmp_path):
    prefix = tmp_path / "releases"
    prefix.mkdir()
    secret = tmp_path / "original.csv"
    secret.write_text("a\n1\n")
    (prefix / "ok.csv").write_text("a\n1\n")
    (prefix / "link.csv").symlink_to(secret)
    (prefix / "dir").symlink_to(tmp_path)
    assert under_prefix(str(prefix / "ok.csv"), f"{prefix}/")
    assert not under_prefix(str(prefix / "link.csv"), f"{prefix}/")
    assert not under_prefix(str(prefix / "dir" / "original.csv"), f"{prefix}/")
    assert not under_prefix(f"file://{prefix}/link.csv", f"{prefix}/")


def test_a_payload_with_a_traversal_is_refused_naming_the_key():
    from riskcore.gate.config import TriggerRules
    from riskcore.gate.trigger import parse_payload

    rules = TriggerRules(released_prefixes=["s3://releases/census/"])
    with pytest.raises(ConfigError, match="payload.released lies outside every"):
        parse_payload({"release_id": "r", "released": "s3://releases/census/%2e%2e/o.csv"},
                      "e1", rules, "gate.yaml")


@pytest.mark.parametrize("url", [
    "https://store.example/r.csv?X-Amz-Signature=abc123&X-Amz-Date=20260101",
    "https://store.example/r.csv?password=hunter2",
    "https://acct.blob.core.windows.net/c/r.csv?sv=2024&sig=abc",
    "s3://bucket/r.csv?X-Amz-Credential=AKIA",
])
def test_credentials_in_a_query_string_are_refused(url):
    with pytest.raises(ConfigError, match="carries credentials in the URL"):
        check_url(url, "released")
    check_url("https://store.example/r.csv?version=3", "released")  # no secret: fine


# ---------------------------------------------------------------- CSV line breaks
def _read(tmp_path: Path, raw: bytes) -> pd.DataFrame:
    from riskcore.gate.tables import read_table

    path = tmp_path / "t.csv"
    path.write_bytes(raw)
    return read_table(str(path), name="released")[0]


def test_a_bare_carriage_return_inside_a_line_is_an_error_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"line 3 holds a carriage return \(\\r\) that ends "
                                         r"no line"):
        _read(tmp_path, b"a,b\n1,x\n2,y\rz\n3,w\n")


def test_carriage_returns_alone_are_the_records_separators(tmp_path):
    df = _read(tmp_path, b"a,b\r1,x\r2,y\r3,z\r")
    assert df["a"].tolist() == ["1", "2", "3"] and df["b"].tolist() == ["x", "y", "z"]


def test_quoted_fields_over_lines_are_read(tmp_path):
    df = _read(tmp_path, b'id,note,n\n1,"first line\nsecond, line",3\n2,"a\r\nb",4\n3,c,5\n')
    assert df["note"].tolist() == ["first line\nsecond, line", "a\r\nb", "c"]
    assert df["n"].tolist() == ["3", "4", "5"]


def test_a_stray_quote_that_swallows_records_is_still_refused(tmp_path):
    raw = b"a,b,c\n1,\"x,2\n2,y,3\n3,z\",4\n4,w,5\n"
    with pytest.raises(InputError, match=r"row 0 \(line 2 of the file\) holds a line break "
                                         "inside a quoted field whose lines look like records"):
        _read(tmp_path, raw)


def test_nuls_in_a_utf8_file_are_not_utf16(tmp_path):
    rows = b"".join(b"%d,\x00\x00%s\n" % (i, b"x" * (i % 7)) for i in range(200))
    df = _read(tmp_path, b"a,b\n" + rows)
    assert len(df) == 200
    with pytest.raises(InputError, match="looks like UTF-16"):
        _read(tmp_path, "a,b\n1,x\n".encode("utf-16-le") * 50)


# ---------------------------------------------------------------- one clear line each
def test_deeply_nested_storage_options_are_one_line():
    for raw in ("[" * 10_000 + "]" * 10_000, '{"a":' * 30 + "1" + "}" * 30):
        with pytest.raises(ConfigError, match="nests deeper than 8 levels"):
            parse_storage_options(raw, "$RISKGATE_STORAGE_OPTIONS")
    with pytest.raises(ConfigError, match="is 200,000 characters long"):
        parse_storage_options("[" * 100_000 + "]" * 100_000, "$RISKGATE_STORAGE_OPTIONS")


def test_an_event_larger_than_prefect_keeps_is_refused_with_the_limit(tmp_path):
    """Prefect's server accepts an event above its size limit and drops it: no run starts.
    emit-anonymized refuses it, naming the limit, before anything is sent."""
    released = tmp_path / "r.csv"
    released.write_text("a\n1\n")
    env = {**os.environ, "PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES": "600",
           "PREFECT_API_URL": "http://127.0.0.1:9/api"}  # never reached
    done = subprocess.run([sys.executable, "-m", "riskgate.flows.cli", "emit-anonymized",
                           "--release", "r" * 100, "--released", str(released)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 3, text
    assert "above the 600 bytes Prefect keeps (PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES)" in text
    assert "Traceback" not in text


def test_history_marks_unsigned_planted_and_escaped_decisions(tmp_path, capsys):
    """A decision planted in another run's folder cannot take that run's id, an unsigned one
    says so, and text from decisions reaches the terminal without its control characters."""
    from riskgate.flows.cli import main

    out = tmp_path / "out"
    cfg = tmp_path / "gate.yaml"
    cfg.write_text(json.dumps({
        "release_id": "hist", "original": "o.csv", "released": "r.csv", "output_url": "out",
        "roles": {"quasi_identifiers": ["a"]}, "policy": {"version": 1, "checks": []}}))
    for run, doc in {
            "run-a": {"flow_run_id": "run-a", "verdict": "REJECTED\x1b[2J",
                      "finished_at": "2026-01-02T00:00:00+00:00", "signed": False},
            "run-b": {"flow_run_id": "run-a", "verdict": "APPROVED",
                      "finished_at": "2026-01-03T00:00:00+00:00", "signed": True}}.items():
        (out / "hist" / run).mkdir(parents=True)
        (out / "hist" / run / "decision.json").write_text(json.dumps(doc))
    assert main(["history", "hist", "--config", str(cfg), "--json"]) == 0
    runs = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(runs) == {"run-a", "run-b"}
    assert runs["run-a"]["signature"] == "unsigned"
    assert runs["run-b"]["signature"].startswith("not verified: the decision names run run-a")
    assert "\x1b" not in json.dumps(runs) and "\\x1b[2J" in runs["run-a"]["verdict"]
    assert main(["history", "hist", "--config", str(cfg)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "run-b" in printed
