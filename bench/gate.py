"""The whole gate (load, checks, measures, decision, outputs) wall time per step.

On the anonymeter adults data (39k rows: original = train, released = CTGAN synthetic) and on a
1M-row table (equivalence-class measures), from local files and from an S3 endpoint served over
HTTP on 127.0.0.1 (moto's server mode). Prefect's own overhead (ephemeral API) is included.
Targets (issue 3): adults under 60 s with every available family; the 1M-row gate under 60 s.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path

from bench.common import OUT, SHARED, print_table, replicate

ADULT_QI = ["age", "sex", "race", "marital", "country", "education"]
POLICY = {"version": 1, "checks": ["k_anonymity.k >= 1", "reid.pRb <= 1"]}


def config(original: str, released: str, output: str, qis, sens, options=None) -> dict:
    return {"release_id": "bench", "original": original, "released": released,
            "output_url": output, "roles": {"quasi_identifiers": qis, "sensitive": sens},
            "measures": {"k_anonymity": {}, "reid": {}, "l_diversity": {}, "t_closeness": {}},
            "policy": POLICY, "storage": {"options": options or {}}, "read": {"na_values": [""]}}


def s3_server():
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    import boto3
    import pandas as pd
    from prefect.testing.utilities import prefect_test_harness

    from riskgate.flows.release_gate import release_gate

    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="riskgate-bench-"))
    adults = SHARED / "datasets/anonymeter"
    big = replicate(pd.read_csv(adults / "adults_train_reconstructed.csv"), 1_000_000,
                    ADULT_QI, 0.05, seed=1)
    big_path = tmp / "big.csv"
    big.to_csv(big_path, index=False)
    cases = {
        "adults 39k": (adults / "adults_train_reconstructed.csv", adults / "adults_syn_ctgan.csv"),
        "1M rows": (big_path, big_path),
    }
    server, endpoint = s3_server()
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    options = {"endpoint_url": endpoint, "skip_instance_cache": True}
    rows, record = [], {}
    with prefect_test_harness(server_startup_timeout=120):
        for label, (orig, rel) in cases.items():
            for where in ("local", "s3"):
                if where == "s3":
                    s3.upload_file(str(orig), "bench", f"{label}/original.csv")
                    s3.upload_file(str(rel), "bench", f"{label}/released.csv")
                    cfg = config(f"s3://bench/{label}/original.csv",
                                 f"s3://bench/{label}/released.csv", "s3://bench/out",
                                 ADULT_QI, ["income"], options)
                else:
                    cfg = config(str(orig), str(rel), str(tmp / "out"), ADULT_QI, ["income"])
                t0 = time.perf_counter()
                outcome = release_gate(config=cfg, config_name=f"bench-{where}")
                wall = time.perf_counter() - t0
                if where == "s3":
                    body = s3.get_object(Bucket="bench", Key=outcome["decision_url"].split(
                        "s3://bench/")[1])["Body"].read()
                    decision = json.loads(body)
                else:
                    decision = json.loads(Path(outcome["decision_url"]).read_text())
                t = decision["timings"]
                rows.append([label, where, outcome["verdict"]] + [
                    f"{t.get(k, 0):.2f}" for k in ("load", "validate", "encode", "measures",
                                                   "decide")] + [f"{wall:.1f}"])
                record[f"{label}/{where}"] = {"wall_s": wall, "timings": t}
    server.stop()
    text = print_table("release gate wall time (seconds; total includes Prefect and writes)",
                       ["data", "storage", "verdict", "load", "validate", "encode", "measures",
                        "decide", "total"], rows)
    (OUT / "gate.txt").write_text(text + "\n")
    (OUT / "gate.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
