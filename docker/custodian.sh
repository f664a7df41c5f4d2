#!/bin/sh
# The custodian's one-shot service: the example's original and the gate config in the
# custodian's buckets, a signing key for the signer (kept in its own volume), the public key
# where publishers read it, then the deploy that pins the config, starts the release
# watcher and has the worker fork each flow run from its standby (docker/worker.sh). The
# judged pipeline (demo.sh) gets none of this: only write access to its prefix.
set -eu
keys="${KEYS_DIR:-/keys}"
riskgate example /tmp/custodian
[ -f "$keys/riskgate-signing.key" ] || riskgate keygen "$keys"
python - <<'PY'
import os, yaml, s3fs  # s3fs reads AWS_ENDPOINT_URL and the credentials from the environment
fs = s3fs.S3FileSystem()
keys = os.environ.get("KEYS_DIR", "/keys")
for bucket in ("riskgate-config", "riskgate-data", "riskgate-out", "riskgate-releases"):
    if not fs.exists(bucket):
        fs.mkdir(bucket)  # the demo creates its buckets; the gate never does
fs.put("/tmp/custodian/original.csv", "riskgate-data/census/original.csv")
fs.put("/tmp/custodian/region-hierarchy.csv", "riskgate-config/region-hierarchy.csv")
cfg = yaml.safe_load(open("examples/gate.yaml"))
cfg.update(original="s3://riskgate-data/census/original.csv",
           released="s3://riskgate-releases/census/census-demo-2026/released.csv",
           output_url="s3://riskgate-out/runs", policy="policy.yaml",
           trigger={"released_prefixes": ["s3://riskgate-releases/census/"]})
cfg["generalization"]["region"] = {"hierarchy": "region-hierarchy.csv"}  # next to the config
with fs.open("riskgate-config/gate.yaml", "w") as fh:
    fh.write(yaml.safe_dump(cfg))
fs.put("examples/policy.yaml", "riskgate-config/policy.yaml")
fs.put(f"{keys}/riskgate-signing.pub", "riskgate-config/riskgate-signing.pub")
PY
riskgate deploy --prefect-file deployments/prefect.yaml --standby \
    --trigger-config s3://riskgate-config/gate.yaml --watch-every "${WATCH_EVERY:-10}"
