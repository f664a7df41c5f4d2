"""``python -m riskgate.flows.cli``: the riskgate command line."""

from . import run

run()
