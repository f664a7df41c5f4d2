"""Bad input, as a hostile or careless user gives it: every case through the command line
(``riskgate gate``, ``measure``, ``attack``, ``alc``, ``check-config``), generated at test time,
each asserting the exit code, the verdict, which files the run wrote, and a message that names
the file, column or key and says what to do. Nothing broken is ever APPROVED."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT

ROWS = 400
ERROR_FILES = {"decision.json", "report.html"}
REJECTED_FILES = {"decision.json", "report.html", "validation.json"}
CHECKED_FILES = {"decision.json", "report.html", "validation.json"}  # failed after the checks
MEASURED_FILES = {"decision.json", "report.html", "validation.json", "measures.json",
                  "per_record.parquet"}


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    from riskcore.examples import write_example

    return write_example(tmp_path_factory.mktemp("bad-base"), n=ROWS, seed=13)


class Workspace:
    """One case's folder: the example tables, a gate config and a policy, all editable."""

    def __init__(self, root: Path, tables: dict[str, Path]) -> None:
        self.root = root
        self.original = root / "original.csv"
        self.released = root / "released.csv"
        shutil.copy(tables["original"], self.original)
        shutil.copy(tables["released"], self.released)
        self.out = root / "out"
        self.policy: dict[str, Any] = {"version": 1, "checks": ["k_anonymity.k >= 1",
                                                                "reid.pRb <= 1"]}
        self.config: dict[str, Any] = {
            "release_id": "bad", "original": "original.csv", "released": "released.csv",
            "output_url": "out", "policy": "policy.yaml",
            "roles": {"quasi_identifiers": ["region", "age", "sex"],
                      "sensitive": ["diagnosis"], "weight": "weight",
                      "household": "household_id", "direct_identifiers": ["person_id"],
                      "types": {"age": "categorical"}},
            "measures": {"k_anonymity": {}, "reid": {}}, "seed": 1}

    @property
    def config_path(self) -> Path:
        return self.root / "gate.yaml"

    def frame(self, which: str = "released") -> pd.DataFrame:
        return pd.read_csv(getattr(self, which), dtype=str, keep_default_na=False)

    def save(self) -> None:
        """Write the config and policy (unless the case wrote its own config file)."""
        if not self.config_path.exists():
            self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        policy = self.root / "policy.yaml"
        if not policy.exists():
            policy.write_text(yaml.safe_dump(self.policy))

    def run_files(self) -> set[str] | None:
        decisions = list(self.out.rglob("decision.json"))
        if not decisions:
            return None
        return {p.name for p in decisions[0].parent.iterdir()}

    def decision(self) -> dict[str, Any] | None:
        decisions = list(self.out.rglob("decision.json"))
        return json.loads(decisions[0].read_text()) if decisions else None


@dataclass
class Case:
    """One bad input: how to make it, the command, and what must happen."""

    id: str
    make: Callable[[Workspace], None]
    exit: int
    message: str  # a regex the output (or the decision's reasons) must match
    verdict: str | None = None  # the decision.json verdict (None: nothing written)
    files: set[str] | None = None  # the run folder's files (None: no run folder)
    command: Callable[[Workspace], list[str]] = field(
        default=lambda ws: ["gate", "--config", str(ws.config_path)])


def _cfg(**changes: Any) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        ws.config.update(changes)
    return make


def _measures(**changes: Any) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        ws.config["measures"] = {**ws.config["measures"], **changes}
    return make


def _policy(*checks: Any, **keys: Any) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        ws.policy = {"version": 1, "checks": list(checks), **keys}
    return make


def _roles(**changes: Any) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        ws.config["roles"] = {**ws.config["roles"], **changes}
    return make


def _storage(options: dict[str, Any]) -> Callable[[Workspace], None]:
    return _cfg(storage={"options": options})


def _raw_config(text: str | bytes) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        data = text if isinstance(text, bytes) else text.encode()
        ws.config_path.write_bytes(data)
    return make


def _released(edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        edit(ws.frame()).to_csv(ws.released, index=False)
    return make


def _released_bytes(edit: Callable[[bytes], bytes]) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        ws.released.write_bytes(edit(ws.released.read_bytes()))
    return make


def _set(col: str, row: int, value: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[row, col] = value
        return df
    return edit


def _stray_quote(raw: bytes) -> bytes:
    """A quote opens the third field of line 11 and one closes the third field of line 15:
    the five lines parse as one row with the right number of fields (four rows vanish)."""
    lines = raw.split(b"\n")
    first = lines[10].split(b",")
    first[2] = b'"' + first[2]
    last = lines[14].split(b",")
    last[2] = last[2] + b'"'
    lines[10], lines[14] = b",".join(first), b",".join(last)
    return b"\n".join(lines)


def _corrupt_parquet(ws: Workspace) -> None:
    (ws.root / "r.parquet").write_bytes(b"PAR1garbage")
    ws.config["released"] = "r.parquet"


def _bomb(ws: Workspace) -> None:
    rows = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i, name in enumerate("bcdefghi"):
        prev = "a" if i == 0 else "bcdefghi"[i - 1]
        rows.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    text = yaml.safe_dump(ws.config, sort_keys=False).replace(
        "measures:\n", "measures:\n  suda: {keys: *i}\n", 1)
    ws.config_path.write_text("\n".join(rows) + "\n" + text)


def _parquet(edit: Callable[[pa.Table], pa.Table]) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        table = pa.Table.from_pandas(ws.frame("released"), preserve_index=False)
        path = ws.root / "released.parquet"
        pq.write_table(edit(table), path)
        ws.config["released"] = "released.parquet"
    return make


def _weights_float(values: list[float]) -> Callable[[pa.Table], pa.Table]:
    def edit(t: pa.Table) -> pa.Table:
        w = np.asarray(t.column("weight").to_pylist(), dtype=float)
        w[: len(values)] = values
        return t.set_column(t.schema.get_field_index("weight"), "weight", pa.array(w))
    return edit


def _struct_column(t: pa.Table) -> pa.Table:
    structs = pa.array([{"a": 1}] * t.num_rows)
    return t.set_column(t.schema.get_field_index("region"), "region", structs)


def _household_weights(ws: Workspace) -> None:
    df = ws.frame()
    first = df["household_id"].iloc[0]
    df.loc[df.index[df["household_id"] == first][:1], "weight"] = "999.5"
    df.loc[df.index[df["household_id"] == first][1:], "weight"] = "1.5"
    if (df["household_id"] == first).sum() < 2:
        df.loc[1, "household_id"] = first
        df.loc[1, "weight"] = "1.5"
    df.to_csv(ws.released, index=False)
    ws.policy = {"version": 1, "checks": ["sdc.hier_risk <= 0.5"]}
    ws.config["measures"] = {"sdc": {}}


def _single_valued_sensitive(ws: Workspace) -> None:
    df = ws.frame()
    df["diagnosis"] = "none"
    df.to_csv(ws.released, index=False)
    ws.config["measures"] = {"k_anonymity": {}, "reid": {}, "l_diversity": {}}


def _identical(ws: Workspace) -> None:
    shutil.copy(ws.original, ws.root / "copy_of_original.csv")
    ws.config["released"] = "copy_of_original.csv"


def _identification_lacking(ws: Workspace) -> None:
    ws.frame("original").head(20).to_csv(ws.root / "ident.csv", index=False)
    ws.config["identification"] = "ident.csv"


def _control_is_original(ws: Workspace) -> None:
    shutil.copy(ws.original, ws.root / "control.csv")
    ws.config["control"] = "control.csv"


def _gzip_no_extension(ws: Workspace) -> None:
    (ws.root / "released.data").write_bytes(gzip.compress(ws.released.read_bytes()))
    ws.config["released"] = "released.data"
    ws.config["read"] = {"format": "csv"}


def _gzip_bomb(ws: Workspace) -> None:
    big = ws.released.read_bytes() * 40
    (ws.root / "bomb.csv.gz").write_bytes(gzip.compress(big))
    ws.config["released"] = "bomb.csv.gz"
    ws.config["limits"] = {"max_table_mb": 0.5}


def _utf16(bom: bool) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        text = ws.released.read_text(encoding="utf-8")
        data = text.encode("utf-16") if bom else text.encode("utf-16-le")
        ws.released.write_bytes(data)
    return make


def _semicolons_declared_comma(ws: Workspace) -> None:
    ws.frame().to_csv(ws.released, index=False, sep=";")
    ws.config["read"] = {"sep": ","}


def _measure(*extra: str) -> Callable[[Workspace], list[str]]:
    return lambda ws: ["measure", str(ws.released), "--qi", "region,age,sex", "--weight",
                       "weight", *extra]


def _attack_missing_column(ws: Workspace) -> None:
    ws.frame().drop(columns=["sex"]).to_csv(ws.released, index=False)



# ---- the second hardening round
def _hierarchy(text: bytes | str) -> Callable[[Workspace], None]:
    """Region generalized by an ARX hierarchy file holding ``text``."""
    def make(ws: Workspace) -> None:
        data = text if isinstance(text, bytes) else text.encode()
        (ws.root / "regions.csv").write_bytes(data)
        ws.config["generalization"] = {"region": {"hierarchy": "regions.csv"}}
    return make


def _a_valid_hierarchy(ws: Workspace) -> str:
    regions = sorted(set(ws.frame("original")["region"]) - {""})
    return "".join(f"{r};{r}\n" for r in regions)


def _hierarchy_twice(ws: Workspace) -> None:
    text = _a_valid_hierarchy(ws)
    first = text.splitlines()[0].split(";")[0]
    _hierarchy(text + f"{first};Elsewhere\n")(ws)


def _hierarchy_ragged(ws: Workspace) -> None:
    rows = _a_valid_hierarchy(ws).splitlines()
    rows[0] += ";Country"  # the first row is the longest
    _hierarchy("\n".join(rows) + "\n")(ws)


def _control_sample(ws: Workspace, copies: float) -> pd.DataFrame:
    """An independent sample of the same population (the generator, another seed), with a
    share of the original's rows put in verbatim; no direct identifiers."""
    from riskcore.examples import write_example

    other = write_example(ws.root / "population", n=ROWS, seed=77)
    control = pd.read_csv(other["original"], dtype=str, keep_default_na=False)
    n = int(round(copies * len(control)))
    if n:
        control.iloc[:n] = ws.frame("original").iloc[:n][control.columns].to_numpy()
    return control.drop(columns=["person_id"])


def _control(copies: float) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        _control_sample(ws, copies).to_csv(ws.root / "control.csv", index=False)
        ws.config["control"] = "control.csv"
    return make


def _suppress(share: float) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        df = ws.frame()
        df.loc[: int(share * len(df)) - 1, "region"] = "*"
        df.to_csv(ws.released, index=False)
    return make


def _partitions(extra: Callable[[Path, pd.DataFrame], None]) -> Callable[[Workspace], None]:
    """The release as a folder of two Parquet parts, then ``extra`` adds to the folder."""
    def make(ws: Workspace) -> None:
        folder = ws.root / "released_parts"
        folder.mkdir()
        df = ws.frame()
        half = len(df) // 2
        for i, part in enumerate((df.iloc[:half], df.iloc[half:])):
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                           folder / f"part-{i}.parquet")
        extra(folder, df)
        _original_parquet(ws)
        ws.config["released"] = "released_parts"
    return make


def _original_parquet(ws: Workspace) -> None:
    """A partitioned release is gated with Parquet tables."""
    pq.write_table(pa.Table.from_pandas(ws.frame("original"), preserve_index=False),
                   ws.root / "original.parquet")
    ws.config["original"] = "original.parquet"


def _stray_csv(folder: Path, df: pd.DataFrame) -> None:
    df.head(50).to_csv(folder / "raw.csv", index=False)


def _zero_row_part(folder: Path, df: pd.DataFrame) -> None:
    pq.write_table(pa.Table.from_pandas(df.iloc[:0], preserve_index=False),
                   folder / "part-2.parquet")
    (folder / "_SUCCESS").write_bytes(b"")


def _empty_folder(ws: Workspace) -> None:
    (ws.root / "released_parts").mkdir()
    _original_parquet(ws)
    ws.config["released"] = "released_parts"


def _rename(old: str, new: str) -> Callable[[Workspace], None]:
    def make(ws: Workspace) -> None:
        for which in ("original", "released"):
            ws.frame(which).rename(columns={old: new}).to_csv(getattr(ws, which), index=False)
        ws.config["roles"] = {**ws.config["roles"], "quasi_identifiers": [
            new if c == old else c for c in ws.config["roles"]["quasi_identifiers"]]}
    return make


def _deep_config(ws: Workspace) -> None:
    ws.config_path.write_text(yaml.safe_dump(ws.config, sort_keys=False)
                              + "extra: " + "[" * 5000 + "]" * 5000 + "\n")


def _duplicate_key_config(ws: Workspace) -> None:
    ws.config_path.write_text(yaml.safe_dump(ws.config, sort_keys=False)
                              + "policy: lax.yaml\n")


def _duplicate_key_policy(ws: Workspace) -> None:
    (ws.root / "policy.yaml").write_text(
        "version: 1\nchecks:\n  - {figure: k_anonymity.k, min: 1, min: 0}\n")


CASES = [
    # ---- the config file itself: exit 3, nothing written, one line naming the file
    Case("config-is-a-directory", lambda ws: ws.config_path.mkdir(), 3,
         r"config file .*gate\.yaml.* is a directory; give the file itself"),
    Case("config-not-utf8", _raw_config(b"release_id: caf\xe9\n"), 3,
         r"gate\.yaml.* is not UTF-8 text .*save it as UTF-8"),
    Case("config-missing", lambda ws: None, 3, r"nope\.yaml.* does not exist",
         command=lambda ws: ["gate", "--config", str(ws.root / "nope.yaml")]),
    Case("config-invalid-yaml", _raw_config("release_id: [unclosed\n"), 3,
         r"gate\.yaml.* is not valid YAML at line \d+"),
    Case("config-not-a-mapping", _raw_config("- a\n- b\n"), 3,
         r"must hold a mapping at the top level"),
    Case("config-alias-bomb", _bomb, 3, r"expands to more than 100,000 values"),
    Case("config-too-large", _raw_config("# " + "x" * (1 << 20) + "\n"), 3,
         r"gate\.yaml' is 1\.0 MB, above the limit of 1\.0 MB; a gate config or policy is a "
         r"short document"),
    Case("config-unknown-key", _cfg(outputurl="x"), 3,
         r"outputurl: unknown key.*allows: .*output_url"),
    Case("config-unknown-family", _measures(kanon={}), 3,
         r"measures: .*unknown measure family 'kanon' \(allowed: .*k_anonymity"),
    Case("config-unknown-parameter", _measures(reid={"thresold": 0.1}), 3,
         r"measures\.reid\.thresold: unknown key.*measures\.reid allows: threshold"),
    Case("config-ks-not-numbers", _measures(k_anonymity={"ks": "abc"}), 3,
         r"measures\.k_anonymity\.ks: Input should be a valid list"),
    Case("config-ks-negative", _measures(k_anonymity={"ks": [-1]}), 3,
         r"measures\.k_anonymity\.ks\.0: Input should be greater than 0"),
    Case("config-threshold-above-one", _measures(reid={"threshold": 7}), 3,
         r"measures\.reid\.threshold: Input should be less than or equal to 1"),
    Case("config-suda-key-without-role", _measures(suda={"keys": ["region", "nope"]}), 3,
         r"measures\.suda names column\(s\) \['nope'\] that have no role"),
    Case("config-linkability-overlap",
         _measures(linkability={"aux_a": ["region", "sex"], "aux_b": ["sex"]}), 3,
         r"measures\.linkability: aux_a and aux_b overlap on \['sex'\]"),
    Case("config-linkability-missing-aux", _measures(linkability={}), 3,
         r"measures\.linkability\.aux_a: Field required"),
    Case("config-release-id", _cfg(release_id="../x"), 3, r"release_id: String should match"),
    Case("config-alpha", _cfg(alpha=2), 3, r"alpha: Input should be less than or equal to 1"),
    Case("config-seed-negative", _cfg(seed=-1), 3, r"seed: Input should be greater than"),
    Case("config-review-timeout", _cfg(review_timeout_s=0), 3, r"review_timeout_s"),
    Case("config-base-url", _cfg(report={"base_url": "ftp://x"}), 3,
         r"report\.base_url must start with http"),
    Case("config-limit-in-config", _cfg(limits={"gate_concurrency": 100}), 3,
         r"limits: .*gate_concurrency no longer belong.*riskgate limits --gate"),
    Case("config-role-twice", _roles(sensitive=["sex"]), 3,
         r"column 'sex' is given two roles"),
    Case("config-unknown-role", _roles(weights="w"), 3, r"roles\.weights: unknown key"),
    Case("config-no-qi", _roles(quasi_identifiers=[]), 3,
         r"name at least one quasi-identifier"),
    Case("config-same-file-twice", _cfg(released="original.csv"), 3,
         r"original and released name the same file"),
    # ---- the policy
    Case("policy-figure-typo", _policy("k_anonymity.kay >= 5"), 3,
         r"figure 'k_anonymity\.kay' does not exist; k_anonymity reports: .*\bk\b"),
    Case("policy-family-typo", _policy("reidd.pRb <= 0.2"), 3,
         r"names measure 'reidd', which does not exist"),
    Case("policy-min-above-max", _policy({"figure": "reid.pRb", "min": 5, "max": 3}), 3,
         r"min \(5\) is above max \(3\)"),
    Case("policy-nan", _policy({"figure": "reid.pRb", "min": float("nan")}), 3,
         r"'min' must be a finite number"),
    Case("policy-not-a-number", _policy({"figure": "reid.pRb", "max": "3e"}), 3,
         r"policy\.yaml.*check 1: 'max' must be a number, got '3e'"),
    Case("policy-unknown-key", _policy("reid.pRb <= 0.2", onn_insufficient="review"), 3,
         r"unknown policy key\(s\) \['onn_insufficient'\]"),
    Case("policy-empty", _policy(), 3, r"'checks' must be a non-empty list"),
    Case("policy-missing", _cfg(policy="nope.yaml"), 3, r"nope\.yaml.* does not exist"),
    Case("policy-population-without-size", _policy("population.dankar <= 10"), 3,
         r"population\.population_size: Field required.*configure measures\.population"),
    Case("policy-duplicate-ids", _policy("reid.pRb <= 0.2", "reid.pRb <= 0.3"), 3,
         r"check ids must be unique; repeated: \['reid\.pRb'\]"),
    # ---- credentials, wherever they hide: refused, never echoed
    Case("creds-storage-secret", _storage({"secret": "PLANTED-S3CRET"}), 3,
         r"storage option 'secret' holds a credential"),
    Case("creds-in-list-of-mappings", _storage({"profiles": [{"pwd": "PLANTED-S3CRET"}]}), 3,
         r"'profiles\[0\]\.pwd' holds a credential"),
    Case("creds-session-key", _storage({"client_kwargs": {"sessionKey": "PLANTED-S3CRET"}}), 3,
         r"'client_kwargs\.sessionKey' holds a credential"),
    Case("creds-endpoint-userinfo",
         _storage({"endpoint_url": "http://user:PLANTED-S3CRET@minio:9000"}), 3,
         r"'endpoint_url' holds a credential"),
    Case("creds-table-url", _cfg(released="s3://AKIAPLANTED:PLANTED-S3CRET@bucket/r.csv"), 3,
         r"'released' carries credentials"),
    # ---- output locations that lose or misplace everything
    Case("output-memory", _cfg(output_url="memory://riskgate"), 3,
         r"output_url 'memory://riskgate' is a volatile store"),
    # ---- the tables: unreadable or broken -> ERROR, written down
    Case("released-missing", _cfg(released="nope.csv"), 3,
         r"table 'released': file '.*nope\.csv' does not exist", "ERROR", ERROR_FILES),
    Case("released-directory", lambda ws: (ws.root / "dir.csv").mkdir() or ws.config.update(
        released="dir.csv"), 3, r"table 'released': '.*dir\.csv' is a directory", "ERROR",
        ERROR_FILES),
    Case("released-header-only", _released_bytes(lambda b: b.split(b"\n")[0] + b"\n"), 3,
         r"'.*released\.csv' has no data rows", "ERROR", ERROR_FILES),
    Case("released-empty-file", _released_bytes(lambda b: b""), 3,
         r"'.*released\.csv' has no header line", "ERROR", ERROR_FILES),
    Case("released-duplicate-columns",
         _released_bytes(lambda b: b.replace(b"region,", b"sex,", 1)), 3,
         r"duplicate column names \['sex'\]; rename them", "ERROR", ERROR_FILES),
    Case("released-stray-quote", _released_bytes(_stray_quote), 3,
         r"has 400 record lines but 39\d rows were read; row 9 \(line 11 of the file\) holds "
         r"a line break inside a quoted field", "ERROR", ERROR_FILES),
    Case("released-gzip-bomb", _gzip_bomb, 3, r"decompresses to more than 0\.5 MB",
         "ERROR", ERROR_FILES),
    Case("released-utf16-no-bom", _utf16(bom=False), 3,
         r"looks like UTF-16 text without a byte-order mark.*read\.encoding: utf-16", "ERROR",
         ERROR_FILES),
    Case("released-wrong-separator", _semicolons_declared_comma, 1,
         r"column exists", "REJECTED", REJECTED_FILES),
    Case("released-parquet-struct", _parquet(_struct_column), 3,
         r"column 'region' .*\(lists or structs\).*flatten it", "ERROR", ERROR_FILES),
    Case("released-parquet-corrupt", _corrupt_parquet, 3,
         r"'.*r\.parquet' is not a readable Parquet file", "ERROR", ERROR_FILES),
    Case("weight-overflow-sum", _parquet(_weights_float([1e308, 1e308])), 3,
         r"column 'weight': the sample weights sum to more than the largest number", "ERROR",
         CHECKED_FILES),
    Case("weight-negative", _released(_set("weight", 3, "-2")), 3,
         r"column 'weight': 1 sample weight\(s\) are zero or negative \(rows \[3\]\)", "ERROR",
         CHECKED_FILES),
    Case("weight-missing", _released(_set("weight", 4, "")), 3,
         r"column 'weight': 1 sample weight\(s\) are missing \(rows \[4\]\)", "ERROR",
         CHECKED_FILES),
    Case("identification-lacking", _identification_lacking, 3,
         r"table 'identification' lacks \d+ of the \d+ quasi-identifier combinations", "ERROR",
         {"decision.json", "report.html", "validation.json", "measures.json",
          "per_record.parquet"}),
    # ---- unclean or unintended data -> REJECTED before any measure
    Case("weight-1e400", _released(_set("weight", 5, "1e400")), 1,
         r"released\.weight: numbers are finite: 1 value\(s\), e\.g\. rows \[5\]", "REJECTED",
         REJECTED_FILES),
    Case("weight-inf-parquet", _parquet(_weights_float([float("inf")])), 1,
         r"released\.weight: numbers are finite", "REJECTED", REJECTED_FILES),
    Case("weight-text", _released(_set("weight", 3, "ninety")), 1,
         r"released\.weight: values are numbers: 1 value\(s\), e\.g\. rows \[3\]", "REJECTED",
         REJECTED_FILES),
    Case("undecodable-bytes", _released_bytes(lambda b: b.replace(b"North", b"N\xffrth", 1)),
         1, r"characters decodable in the declared encoding", "REJECTED", REJECTED_FILES),
    Case("control-char-unmeasured", _released(_set("occupation", 7, "clerk\x07")), 1,
         r"released\.occupation: no control or non-printable characters", "REJECTED",
         REJECTED_FILES),
    Case("nul-byte-in-qi", _released(_set("region", 2, "No\x00rth")), 1,
         r"released\.region: no control or non-printable characters", "REJECTED",
         REJECTED_FILES),
    Case("qi-missing-column", _released(lambda df: df.drop(columns=["sex"])), 1,
         r"released\.sex: column exists: failed.*add the column", "REJECTED", REJECTED_FILES),
    Case("direct-identifier-released", _released(lambda df: df.assign(person_id="P1")), 1,
         r"direct identifiers are absent.*remove \['person_id'\]", "REJECTED",
         REJECTED_FILES),
    Case("released-identical-to-original", _identical, 1,
         r"byte-identical to the original .*nothing was anonymized", "REJECTED",
         {"decision.json", "report.html"}),
    Case("control-is-original", _control_is_original, 1,
         r"control rows do not overlap the original", "REJECTED", REJECTED_FILES),
    # ---- readable after all: decoded, then judged (never APPROVED by accident)
    Case("gzip-without-extension", _gzip_no_extension, 0, r"APPROVED", "APPROVED",
         MEASURED_FILES),
    Case("utf16-with-bom", _utf16(bom=True), 0, r"APPROVED", "APPROVED", MEASURED_FILES),
    Case("household-weights-differ", _household_weights, 2,
         r"figure 'hier_risk' of 'sdc' is not available: .*column 'household_id'.*different "
         r"sample weights \(rows \[", "NEEDS_REVIEW", MEASURED_FILES),
    Case("total-disclosure-without-check", _single_valued_sensitive, 2,
         r"every class has a single value of 'diagnosis'.*the policy has no check on "
         r"'l_diversity'", "NEEDS_REVIEW", MEASURED_FILES),
    # ---- the library commands: the same checks, exit 3, one line
    Case("measure-weight-1e400", _released(_set("weight", 5, "1e400")), 3,
         r"not clean.*released\.weight: numbers are finite", command=_measure()),
    Case("measure-config-missing", lambda ws: None, 3, r"nope\.yaml.* does not exist",
         command=_measure("--config", "nope.yaml")),
    Case("measure-config-malformed", _raw_config("roles: [\n"), 3, r"not valid YAML",
         command=lambda ws: _measure("--config", str(ws.config_path))(ws)),
    Case("measure-bad-storage-json", lambda ws: None, 3,
         r"--storage-options / \$RISKGATE_STORAGE_OPTIONS is not valid JSON",
         command=_measure("--storage-options", "{nope")),
    Case("alc-nul-byte", _released(_set("region", 2, "No\x00rth")), 3,
         r"not clean.*released\.region: no control",
         command=lambda ws: ["alc", str(ws.original), str(ws.released), "--secret",
                             "diagnosis", "--known", "region,sex"]),
    Case("attack-column-missing-in-released", _attack_missing_column, 3,
         r"not clean.*released\.sex: column exists: failed \(add the column to table "
         r"'released'",
         command=lambda ws: ["attack", "inference", str(ws.original), str(ws.released),
                             "--config", str(ws.config_path), "--secret", "diagnosis"]),
    # ---- a proper holdout passes, a leaky one does not
    Case("control-independent-sample-passes", _control(0.0), 0, r"verdict: APPROVED",
         "APPROVED", MEASURED_FILES),
    Case("control-with-5pct-original-rows", _control(0.05), 1,
         r"control rows do not overlap the original.*an excess of \+\d", "REJECTED",
         REJECTED_FILES),
    # ---- suppression tokens that are data
    Case("suppressed-token-is-a-real-label", _cfg(suppressed=["*", "North"]), 3,
         r"suppressed: the token 'North' is a value of column 'region' in the original",
         "ERROR", CHECKED_FILES),
    Case("suppressed-over-half-a-column", _suppress(0.6), 3,
         r"suppressed: the token\(s\) \['\*'\] cover 60\.0% of the released cells of "
         r"column 'region'", "ERROR", CHECKED_FILES),
    # ---- hierarchy files: one line naming the file, the line and the fix
    Case("hierarchy-value-twice", _hierarchy_twice, 3,
         r"hierarchy of column 'region' \('.*regions\.csv'\): line \d+ repeats the value of "
         r"line 1 .*keep one line per value", "ERROR", CHECKED_FILES),
    Case("hierarchy-ragged", _hierarchy_ragged, 3,
         r"regions\.csv'\): line 2 has 2 field\(s\), line 1 has 3", "ERROR", CHECKED_FILES),
    Case("hierarchy-empty", _hierarchy(""), 3, r"regions\.csv'\) is empty", "ERROR",
         CHECKED_FILES),
    Case("hierarchy-latin1", _hierarchy("Nörth;N\n".encode("latin-1")), 3,
         r"regions\.csv'\) is not UTF-8 text .*save it as UTF-8", "ERROR", CHECKED_FILES),
    Case("hierarchy-malformed", _hierarchy('North;"N\nSouth;S\n'), 3,
         r"regions\.csv'\): line \d+ cannot be read", "ERROR", CHECKED_FILES),
    # ---- YAML
    Case("config-duplicate-key", _duplicate_key_config, 3,
         r"gate\.yaml' has the key 'policy' twice \(lines \d+ and \d+\)"),
    Case("policy-duplicate-key", _duplicate_key_policy, 3,
         r"policy\.yaml' has the key 'min' twice"),
    Case("config-deep-nesting", _deep_config, 3,
         r"gate\.yaml' nests deeper than 50 levels"),
    # ---- plausibility
    Case("population-size-1e300", _measures(population={"population_size": 1e300}), 3,
         r"population_size 1e\+300 is more people than live on Earth"),
    # ---- partitioned release folders
    Case("partitioned-stray-csv", _partitions(_stray_csv), 3,
         r"raw\.csv' in the folder '.*released_parts' is not a Parquet part of the table",
         "ERROR", ERROR_FILES),
    Case("partitioned-empty-folder", _empty_folder, 3,
         r"the folder '.*released_parts' holds no \.parquet file", "ERROR", ERROR_FILES),
    Case("partitioned-zero-row-part", _partitions(_zero_row_part), 0, r"verdict: APPROVED",
         "APPROVED", MEASURED_FILES - {"per_record.parquet"} | {"per_record"}),
    # ---- text from the data in names: shown neutralized, and never slow
    # a name holding control characters can end a line wherever it is written (a config's
    # comment, a log): refused at load, named escaped, never echoed raw
    Case("column-name-escapes", _rename("sex", "se\x1b[31mx\u202e"), 3,
         r"column 5 is named 'se\\u001b\[31mx\\u202e', which holds a line break, control "
         r"or invisible character; rename the column", "ERROR", ERROR_FILES),
    Case("column-name-5000-chars", _rename("sex", "s" * 5000), 0, r"verdict: APPROVED",
         "APPROVED", MEASURED_FILES),
    Case("usage-unknown-flag", lambda ws: None, 64, r"usage error: unrecognized arguments",
         command=lambda ws: ["gate", "--config", "x.yaml", "--nope"]),
    Case("usage-missing-command", lambda ws: None, 64, r"usage error",
         command=lambda ws: []),
    Case("check-config-typo", _measures(reid={"thresold": 0.1}), 3,
         r"measures\.reid\.thresold: unknown key",
         command=lambda ws: ["check-config", str(ws.config_path)]),
]


def test_there_are_enough_cases():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tables, tmp_path, capsys, prefect_server, monkeypatch):
    from riskgate.flows.cli import main

    monkeypatch.chdir(tmp_path)
    ws = Workspace(tmp_path, tables)
    case.make(ws)
    ws.save()
    try:
        code = main(case.command(ws))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    output = captured.out + captured.err
    decision = ws.decision()
    text = output + ("\n".join(decision["reasons"]) if decision else "")
    assert code == case.exit, output
    assert re.search(case.message, " ".join(text.split()), re.S), text
    assert "Traceback" not in output
    assert "PLANTED-S3CRET" not in text
    if case.verdict is None:
        assert decision is None
    else:
        assert decision is not None and decision["verdict"] == case.verdict
        assert ws.run_files() == case.files
    if decision is not None and case.verdict != "APPROVED":
        assert decision["approved"] is False
    for report in ws.out.rglob("report.html"):  # text from the data is shown neutralized
        html = report.read_text(encoding="utf-8")
        assert not any(c in html for c in ("\x1b", "\u202e", "\x07", "\x00")), case.id


def test_the_alc_survives_a_secret_with_a_one_member_class(tmp_path):
    """The ALC paper's credit data crashed scikit-learn's early-stopping split."""
    from riskcore.measures.alc import ALCConfig, from_frames, run_alc

    rng = np.random.default_rng(3)
    n = 3000
    ori = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.integers(0, 4, n),
                        "s": rng.choice(["x", "y", "z"], n)})
    ori.loc[7, "s"] = "only-one"
    res = run_alc(from_frames(ori, ori.sample(frac=1.0, random_state=1)), "s", ["a", "b"],
                  ALCConfig(seed=1, models=("hist_gradient_boosting",), max_attacks=300))
    assert res.baseline is not None and res.baseline.model == "hist_gradient_boosting"
    assert res.n_attacks > 0


def test_examples_still_run_clean(tmp_path):
    """The bundled config is a valid config (the suite's negative cases edit a copy of it)."""
    from riskcore.gate.config import load_gate

    gate = load_gate(ROOT / "examples/gate.yaml")
    assert gate.config.release_id == "census-demo-2026"
