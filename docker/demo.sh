#!/bin/sh
# The demo service: writes the example tables and a config to MinIO, then plays the pipeline:
# emit riskgate.anonymization.completed and wait for the verdict event. Exits 0 only when the
# verdict is the expected one (the example's release needs review: NEEDS_REVIEW).
set -eu
riskgate example /tmp/demo
python - <<'PY'
import yaml, s3fs  # s3fs reads AWS_ENDPOINT_URL and the credentials from the environment
fs = s3fs.S3FileSystem()
for bucket in ("riskgate-config", "riskgate-data", "riskgate-out"):
    if not fs.exists(bucket):
        fs.mkdir(bucket)  # the demo creates its buckets; the gate never does
fs.put("/tmp/demo/original.csv", "riskgate-data/census/original.csv")
fs.put("/tmp/demo/released.csv", "riskgate-data/census/released.csv")
fs.put("/tmp/demo/region-hierarchy.csv", "riskgate-config/region-hierarchy.csv")
cfg = yaml.safe_load(open("examples/gate.yaml"))
cfg.update(original="s3://riskgate-data/census/original.csv",
           released="s3://riskgate-data/census/released.csv",
           output_url="s3://riskgate-out/runs", policy="policy.yaml")
cfg["generalization"]["region"] = {"hierarchy": "region-hierarchy.csv"}  # next to the config
with fs.open("riskgate-config/gate.yaml", "w") as fh:
    fh.write(yaml.safe_dump(cfg))
fs.put("examples/policy.yaml", "riskgate-config/policy.yaml")
PY
# the config is the custodian's, pinned by the deploy service (--trigger-config): the pipeline
# names only its release
riskgate emit-anonymized --release census-demo-2026 \
    --released s3://riskgate-data/census/released.csv \
    --wait --timeout 600 --expect "${EXPECTED_VERDICT:-NEEDS_REVIEW}"
