#!/bin/sh
# The judged pipeline, then the publishing step. The pipeline holds no Prefect API URL nor auth
# string: it writes its release and a manifest beside it under the prefix it may write, and
# the custodian's watcher gates it under the pinned rules. The publishing step reads the
# decision from the output store and publishes only what `riskgate verify` accepts. Exits 0
# when the verdict is the expected one (the example's release needs review: NEEDS_REVIEW) and
# verify agrees (it refuses anything but APPROVED).
set -eu
unset PREFECT_API_URL PREFECT_API_AUTH_STRING
riskgate example /tmp/demo
python - <<'PY'
import json, s3fs
fs = s3fs.S3FileSystem()
prefix = "riskgate-releases/census/census-demo-2026"
fs.put("/tmp/demo/released.csv", f"{prefix}/released.csv")
fs.pipe(f"{prefix}/release.json", json.dumps(
    {"release_id": "census-demo-2026", "released": "released.csv"}).encode())
PY
expected="${EXPECTED_VERDICT:-NEEDS_REVIEW}"
config=s3://riskgate-config/gate.yaml
deadline=$(( $(date +%s) + ${DEMO_TIMEOUT:-600} ))
while :; do
  found=$(riskgate history census-demo-2026 --config "$config" --json | python -c '
import json, sys
runs = json.load(sys.stdin)
print(runs[0]["verdict"], runs[0]["decision"]) if runs else print("")')
  [ -n "$found" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { echo "no decision within the timeout"; exit 3; }
  sleep 2
done
verdict=${found%% *}
decision=${found#* }
echo "verdict: $verdict"
set +e
riskgate verify s3://riskgate-releases/census/census-demo-2026/released.csv \
    --decision "$decision" --public-key s3://riskgate-config/riskgate-signing.pub \
    --config "$config"
verified=$?
set -e
if [ "$verdict" != "$expected" ]; then echo "expected $expected"; exit 1; fi
if [ "$verdict" = APPROVED ] && [ "$verified" -ne 0 ]; then exit 1; fi
if [ "$verdict" != APPROVED ] && [ "$verified" -ne 1 ]; then exit 1; fi
