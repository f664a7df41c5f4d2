"""The names the gate's flow, its limits and its deployments share (a leaf: it imports nothing
of riskgate, so that the flow, which sets these states, and the deployments, which build
automations on them, each read it without importing the other)."""

from __future__ import annotations

#: the process work pool the gate's deployments run on
WORK_POOL = "riskgate-process"
#: the start of the state message the lost-run automation gives a run it declares lost; the
#: ``lost-run-verdict`` deployment's trigger matches it
LOST_MESSAGE = "ERROR: the gate run stopped sending heartbeats"
#: a gate run's final state is named after its verdict (Prefect's state events are named
#: after the state: ``prefect.flow-run.Approved``...)
VERDICT_STATE_NAMES = {"APPROVED": "Approved", "NEEDS_REVIEW": "NeedsReview",
                       "REJECTED": "Rejected", "ERROR": "Error"}
#: the Prefect Variables that hold the config URLs of the triggered gates (events and release
#: manifests) and of the nightly re-check (riskgate deploy --trigger-config / --nightly-config)
TRIGGER_CONFIG_VARIABLE = "riskgate_trigger_config"
NIGHTLY_CONFIG_VARIABLE = "riskgate_nightly_config"
#: a deployment's tag that records the SHA-256 of the config pinned when it was deployed; a
#: run whose config no longer has it ends ERROR (the Variable was re-pinned, or the file
#: edited, without a redeploy)
CONFIG_TAG_PREFIX = "riskgate-config:sha256:"
