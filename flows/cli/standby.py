"""``riskgate standby``: keep a process with a gate's imports done, forking a gate process
for each ``riskgate gate`` that has ``$RISKGATE_STANDBY`` set
(:mod:`riskgate.flows.standby`)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import command_started, console, reset_consoles


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "standby", parents=[common],
        help="keep a gate's imports done and run each `riskgate gate` of this environment "
             "(the socket named by $RISKGATE_STANDBY) in a fork of it, until stopped")
    s.set_defaults(handler=run)


#: what a gate process imports once its flow runs (measured: the modules a forked gate process
#: of the demo imported that the standby had not, 403 of them): Prefect's engines, anyio's
#: back end, Arrow's CSV reader; python-stdnum's and phonenumbers' are the identifier scan's
LATER = ("prefect.engine", "prefect.flow_engine", "prefect.task_engine",
         "prefect.telemetry.run_telemetry", "prefect.utilities.visualization",
         "prefect.concurrency.v1.context", "prefect._internal.control_listener",
         "anyio._backends._asyncio", "pyarrow.csv", "pyarrow.pandas_compat",
         "pandas.core.arrays.arrow.extension_types", "riskcore.partitions", "http.cookies",
         "encodings.idna", "encodings.utf_8_sig", "pydantic.color",
         "fsspec.implementations.chained", "opentelemetry.metrics", "opentelemetry._logs",
         "fastapi.encoders", "pyarrow.vendored.version")


def warm() -> None:
    """What a gate run imports: the gate command, its flow, what they import once the flow
    runs (:data:`LATER`), the identifier scan's validators and every region's telephone
    metadata, the package versions a decision records, the API's TLS trust and Prefect's
    deferred models."""
    import importlib

    import phonenumbers

    from riskcore.gate.outputs import versions
    from riskcore.identifiers.checked import checked_kinds

    from .. import local_api, release_gate, verdicts  # noqa: F401
    from . import gate  # noqa: F401

    for name in LATER:
        try:
            importlib.import_module(name)
        except ImportError:  # another version's layout: the gate imports what it needs
            pass
    checked_kinds()
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        phonenumbers.PhoneMetadata.metadata_for_region(region)
    versions()
    local_api.api_tls()
    build_deferred_models()


def build_deferred_models() -> None:
    """Build the validators of Prefect's models that it defers to their first use (pydantic's
    ``defer_build``: an import-time saving): here once, before the standby forks, rather than in
    each gate process (at least twelve of them on a gate's main thread, 0.026 s; all 261 here,
    0.18 s, once). A model whose references cannot be resolved is left as it is."""
    import pydantic

    todo = list(pydantic.BaseModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.startswith("prefect.") and \
                not getattr(model, "__pydantic_complete__", True):
            try:
                model.model_rebuild()
            except Exception:  # (a generic base, a forward reference nothing defines)
                pass


def run(args: argparse.Namespace) -> int:
    """Serve until stopped (0); in a gate process it forked, make this process the command's
    (its consoles, its start) and return 0: the console script then runs the command
    (:func:`riskgate.flows.cli.run`)."""
    from ..standby import serve

    command = serve(lambda line: console.print(line, markup=False, highlight=False), warm)
    if command is not None:
        reset_consoles()
        command_started(command.started)
    return 0
