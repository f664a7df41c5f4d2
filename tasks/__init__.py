"""Prefect tasks of the release gate: a few lines each over ``riskcore.gate``.

A bad input (any :class:`~riskcore.errors.RiskgateError`) ends its task in a Failed state that
carries the error, without a traceback in the log; a transient storage error is retried inside
the task (twice, a few seconds apart); only an unforeseen exception logs a traceback.
"""
