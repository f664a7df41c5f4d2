#!/bin/sh
# The worker's service: a standby beside the process worker, as its user and with its
# environment, so that each flow run forks from it (the custodian deploys the pool with
# `riskgate deploy --standby`) instead of importing Prefect, pandas, scikit-learn and numba
# again: 4-5 s of a core per triggered gate. A run no standby answers (not ready yet, gone,
# another environment) is Prefect's engine's own, and the worker's log says why; a socket
# folder that cannot be made only leaves the worker without a standby.
set -u
folder="${RISKGATE_STANDBY_DIR:-/run/riskgate-worker}"
if mkdir -p "$folder" && chmod 700 "$folder"; then
    export RISKGATE_STANDBY="$folder/standby.sock"
    riskgate standby &
else
    echo "no standby: cannot make $folder (mode 700); each flow run imports everything" >&2
fi
exec prefect worker start --pool riskgate-process
