"""The release gate as plain functions: one sequence, two executors.

load -> validate (the release's diff and its encoding beside) -> measures -> policy ->
(review) -> outputs. :func:`run_gate` holds the sequence and the fail-closed rules; a
:class:`Steps` executor runs each step, in this process (:class:`LocalSteps`, for tests and
the library) or as Prefect tasks (the flow in ``riskgate.flows``). Outputs go under
``<output_url>/<release_id>/<run_id>/``; ``decision.json`` is written last, so a reader that
sees it sees a complete run, and a finished run folder is never written again. Everything
written passes :func:`riskcore.redact.redact`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

import numpy as np
import pandas as pd

from .. import progress
from ..anatomy import ReleaseDiff, release_sample
from ..anatomy import read_release as read_here
from ..data import factorized_once
from ..errors import ConfigError, InputError, RiskgateError
from ..measures import BY_NAME, MeasureInputs, StartUp, start_up
from ..measures.family import Params
from ..memory import keep_freed_memory, release_memory, spare_the_collector
from ..processes import Terminated
from ..redact import redact, redact_text
from ..report.riskiest import example_records
from ..results import MeasureResult, Record
from ..storage import check_output_location
from ..threads import Beside, family_threads, running, this_thread, thread_budget
from . import gx_helper
from .cleanliness import (
    CleanlinessReport,
    validate_tables,
    warm_up,
)
from .config import Gate, TablesConfig
from .encoding import encode_measured
from .inputs import load_input, refuse_unintended, verify_checksums
from .lineage import load_lineage
from .outputs import (
    decision_record,
    json_bytes,
    measures_document,
    now_iso,
    parquet_bytes,
    per_record_frame,
    records_parquet,
    report_html,
    report_link,
    run_folder,
    write_run,
)
from .policy import Decision, Verdict, decide, fixed_decision
from .prepare import Prepared, prepare_tables
from .tables import TableInfo

log = logging.getLogger("riskgate.gate")
#: tables larger than this in memory are worth a full garbage collection once encoded
COLLECT_ABOVE_BYTES = 256 * 2**20

Frames = dict[str, pd.DataFrame]


# ---------------------------------------------------------------- the steps, as functions
def validate(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame]) -> CleanlinessReport:
    """The cleanliness checks (Great Expectations) over every table of the run."""
    with progress.working("validate"):
        return validate_tables(frames, cfg.role_spec, cfg.identifiers)


#: families run in the helper process once it was asked to set them up, when it is free
#: (:mod:`.gx_helper`)
IN_HELPER = ("alc",)
#: ... for tables of at most this many rows (the original's and the release's together): a
#: million-row ALC was no faster there (its 85 MB of encoded tables pickled, two cores busy
#: either way; measured again with the ALC set up in the helper as a survey-size release has
#: it, beside the diff: the measures 2.15 -> 1.98 s, but that set-up, scikit-learn's import,
#: slowed the diff: data work 4.98 -> 5.65 s, wall 8.35 -> 9.0 s, bench/gate.py's
#: every-family gate, median of four alternated runs)
HELPER_ROWS = 250_000
#: ... and, for a single gate, at least this many (on the 6,000-row demo the helper's set-up,
#: scikit-learn's import, made its ALC wait longer than the interpreter's lock would have: its
#: data work 1.9 -> 2.3 s; on a 19,000-row survey release its measures 2.8 -> 2.0 s, its wall
#: 8.0 -> 7.7 s); every later gate of a process that judges several configs
#: (:func:`.gx_helper.serve_families`)
HELPER_FROM_ROWS = 20_000
#: the families run in this process (not on a Dask cluster): the release's reading then has the
#: helper set up :data:`IN_HELPER`'s (:func:`_read_release`)
_MEASURES_HERE: ContextVar[bool] = ContextVar("riskgate_measures_here", default=False)


def measure(name: str, inputs: MeasureInputs, params: Params) -> MeasureResult:
    """Run one family (see :func:`riskcore.measures.run_measure`), its thread holding to the
    thread budget in force (OpenMP's limit is per thread: :func:`riskcore.threads.this_thread`):
    in the helper process where :data:`IN_HELPER` says so, else (or if the helper fails it:
    here it gives what it gives, its error included) in this thread."""
    from ..measures import run_measure

    t0 = time.perf_counter()
    try:
        with progress.working("measures"), this_thread() as threads, running():
            helper = _helper_for(name, inputs)
            if helper is not None:
                try:
                    return helper.measure(name, inputs, params, threads)  # type: ignore[no-any-return]
                except gx_helper.HelperGone as exc:
                    log.warning("measure %s runs in this process: the helper process is gone "
                                "(%s)", name, exc)
                except gx_helper.HelperFailed:
                    log.debug("measure %s failed in the helper; run here", name)
            return run_measure(name, inputs, params)
    finally:
        progress.finished(f"measure {name}", time.perf_counter() - t0)


def _helper_for(name: str, inputs: MeasureInputs) -> gx_helper.Helper | None:
    """The helper process, if family ``name`` runs there now (:data:`IN_HELPER`)."""
    if name not in IN_HELPER:
        return None
    rows = inputs.released.n + (inputs.original.n if inputs.original is not None else 0)
    helper = gx_helper.current()
    if rows > HELPER_ROWS or helper is None or not helper.has_families([name]):
        return None
    return helper if helper.ready() else None


def measure_error(exc: BaseException) -> str:
    """What a failed measure says in the decision: the message, no traceback."""
    if isinstance(exc, RiskgateError):
        return redact_text(str(exc))
    return redact_text(f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- the sequence
class Steps(Protocol):
    """How each step runs: in this process, or as orchestrated tasks. Steps whose ``encode``
    gives a table of distinct rows (a partitioned table) also have ``write_per_record``
    (:class:`riskcore.gate.partitioned_steps.PartitionedSteps`)."""

    def load(self, gate: Gate, options: Mapping[str, Any]
             ) -> tuple[Frames, list[TableInfo]]: ...

    def validate(self, gate: Gate, frames: Frames) -> CleanlinessReport: ...

    def encode(self, gate: Gate, frames: Frames) -> MeasureInputs: ...

    # optional: ``start_encode(gate, frames)`` starts :meth:`encode` beside :meth:`validate`
    # and returns the call that waits for it, told whether the checks passed (True: its
    # result or error is the run's; False: it is dropped), or None when it cannot. PrefectSteps
    # has it; without it, the encoding runs after the checks pass

    def measures(self, gate: Gate, inputs: MeasureInputs
                 ) -> tuple[dict[str, MeasureResult], dict[str, str]]: ...

    # optional: ``measures_here``, False when :meth:`measures` runs the families in other
    # processes (then the families' start-up is not begun in this one); True without it

    def review(self, gate: Gate, decision: Decision, prepare: Callable[[], str | None]
               ) -> tuple[Decision, dict[str, Any] | None]: ...

    def write(self, folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              options: Mapping[str, Any]) -> dict[str, str]: ...


class LocalSteps:
    """Every step in this process, one after the other (no Prefect)."""

    def load(self, gate: Gate, options: Mapping[str, Any]
             ) -> tuple[Frames, list[TableInfo]]:
        frames, infos = {}, []
        for name in gate.config.tables():
            df, info = load_input(gate.config, name, options)
            frames[name] = df
            infos.append(info)
        return frames, infos

    def validate(self, gate: Gate, frames: Frames) -> CleanlinessReport:
        return validate(gate.config, frames)

    def encode(self, gate: Gate, frames: Frames) -> MeasureInputs:
        return encode_measured(gate, frames)

    def measures(self, gate: Gate, inputs: MeasureInputs
                 ) -> tuple[dict[str, MeasureResult], dict[str, str]]:
        results, errors = {}, {}
        for name, params in gate.measures.items():
            try:
                results[name] = measure(name, inputs, params)
            except Exception as exc:  # a measure that raises makes the verdict ERROR
                errors[name] = measure_error(exc)
        return results, errors

    def review(self, gate: Gate, decision: Decision, prepare: Callable[[], str | None]
               ) -> tuple[Decision, dict[str, Any] | None]:
        return decision, None  # nobody to ask: NEEDS_REVIEW stands

    def write(self, folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              options: Mapping[str, Any]) -> dict[str, str]:
        return write_run(folder, files, decision, options)


@dataclass(frozen=True)
class RunOutcome(Record):
    """What a gate run ended with (also what the flow returns and the CLI prints)."""

    release_id: str
    run_id: str
    verdict: str
    exit_code: int
    folder: str | None
    decision_url: str | None
    report_url: str | None
    report_link: str | None
    reasons: tuple[str, ...]
    checks: tuple[dict[str, Any], ...] = ()
    written: bool = True
    slots: tuple[tuple[float, float], ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict)
    json_exclude = ("record",)


@dataclass
class _Run:
    gate: Gate
    run_id: str
    options: Mapping[str, Any]
    steps: Steps
    context: Mapping[str, Any]
    started: str = field(default_factory=now_iso)
    timings: dict[str, float] = field(default_factory=dict)
    infos: list[TableInfo] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    measures: list[dict[str, Any]] = field(default_factory=list)
    per_record: pd.DataFrame | None = None
    examples: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: per-record flags from the checks (row numbers only), beside the measures' values
    record_flags: dict[str, np.ndarray] = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    #: what signs the decision: a key (Signer) or the signer service (RemoteSigner)
    signer: Any = None
    spans: progress.WorkSpans = field(default_factory=progress.WorkSpans)
    #: the families' start-up, begun beside the load (:func:`riskcore.measures.start_up`)
    starting: StartUp | None = None
    #: the release read against its original (:func:`read_release`)
    release: ReleaseDiff | None = None
    #: outputs still being encoded in a thread (:meth:`encode_beside`)
    pending: dict[str, Beside[bytes]] = field(default_factory=dict)
    #: the release's earlier runs, read in a thread from the run's start (:meth:`history`)
    earlier: Beside[list[dict[str, Any]]] | None = None

    @property
    def folder(self) -> str:
        return run_folder(self.gate, self.run_id)

    def encode_beside(self, name: str, encode: Callable[[], bytes]) -> None:
        """Output ``name``, encoded in a thread while the run goes on: pyarrow writes a
        Parquet file without the interpreter's lock, so a million rows' per-record file (0.25-0.3
        s) is written while the report renders (:func:`finish`)."""
        self.pending[name] = Beside(encode, name=f"riskgate-{name}")

    def outputs(self) -> dict[str, bytes]:
        """Every output file so far, those encoded beside waited for (their error raised)."""
        for name in list(self.pending):
            self.files[name] = self.pending.pop(name).wait()
        return dict(self.files)

    def drop_outputs(self) -> None:
        """A run that ended in an error keeps its checks' record alone (an output still being
        encoded is waited for and dropped: no thread outlives the run)."""
        for name in list(self.pending):
            _discard(self.pending.pop(name).wait, name)
        self.files = {k: v for k, v in self.files.items() if k == "validation.json"}
        self.measures, self.per_record, self.examples = [], None, None

    def timed(self, name: str, fn: Callable[[], Any], started: float | None = None) -> Any:
        """Run a step; its timing is the span of its own work (:class:`progress.WorkSpans`),
        and what the step took beyond that (Prefect's task runs around the work) adds up
        under ``task_runs``.

        With ``started``, ``fn`` waits for a step begun then, beside the previous one (the
        encoding beside the checks): its timing is still its whole work, and the part done
        before this wait is recorded as ``<name>_beside`` (the data's wall time is the steps'
        sum minus that)."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            took = time.perf_counter() - t0
            span = self.spans.pop_span(name)
            work = None if span is None else span[1] - span[0]
            beside = 0.0
            if started is not None:
                if span is not None and work is not None:
                    beside = min(work, max(0.0, t0 - max(span[0], started)))
                self.timings[f"{name}_beside"] = round(beside, 4)
            if work is not None and 0.0 <= work - beside <= took:
                self.timings["task_runs"] = self.timings.get("task_runs", 0.0) + (
                    took - (work - beside))
            elif work is None or started is None:
                work = took
            self.timings[name] = self.timings.get(name, 0.0) + work
            progress.finished(name, took)

    def record(self, decision: Decision) -> dict[str, Any]:
        cfg = self.gate.config
        return decision_record(
            cfg.release_id, self.run_id, decision, started_at=self.started, inputs=self.infos,
            config=cfg.public_dict(), seed=cfg.seed, timings=self.timings,
            roles=cfg.role_spec,
            measures_run={k: v.model_dump(mode="json") for k, v in self.gate.measures.items()},
            provenance=self.provenance(), signed=self.signer is not None,
            signing_key=self.signer.fingerprint if self.signer is not None else None,
            context=self.context, extra=self.extra)

    def provenance(self) -> dict[str, Any]:
        """Config, policy and every table: where it came from, its URL and its SHA-256."""
        out = {k: dict(v) for k, v in self.gate.provenance.items()}
        for info in self.infos:
            out.setdefault(info.name, {"source": "config", "url": info.url})["sha256"] = \
                info.sha256
        return out

    def report(self, record: Mapping[str, Any]) -> bytes:
        return report_html(record, self.measures, self.validation, self.per_record,
                           self.gate.config.report.detail, self.examples, self.history())

    def read_earlier(self) -> None:
        """Begin reading this release's earlier runs when utility is measured: in a thread
        from the run's start, beside its work, rather than on its path once the figures are
        known (the listing and the newest runs' documents: 0.1 s for 85 local runs, 2.7 s for
        365 on a local S3 server)."""
        if "utility" not in self.gate.measures:
            return
        from .history import earlier_figures

        cfg = self.gate.config
        self.earlier = Beside(partial(earlier_figures, cfg.release_id, cfg.output_url,
                                      dict(self.options), exclude=self.run_id),
                              name="riskgate-history")

    def history(self) -> list[dict[str, Any]]:
        """This release's earlier runs (for the R-U map) when utility was measured; a store
        that cannot be read gives none (the map says how many it shows)."""
        if self.earlier is None or not any(m.get("measure") == "utility"
                                           for m in self.measures):
            return []  # (a run ended before its figures does not wait for the reading)
        try:
            return self.earlier.wait()
        except Exception:  # the map is an aid: never fail a run on it
            log.debug("earlier runs not read", exc_info=True)
            return []


def run_gate(gate: Gate, run_id: str, options: Mapping[str, Any] | None = None,
             steps: Steps | None = None, context: Mapping[str, Any] | None = None,
             checksums: Mapping[str, str] | None = None,
             timings: Mapping[str, float] | None = None,
             signer: Any = None) -> RunOutcome:
    """One gate run, failing closed: any error, unclean or unintended input or unmeasurable
    figure ends not approved, with the reason written in ``decision.json``.

    Args:
        gate: the loaded gate (:func:`riskcore.gate.config.load_gate`).
        run_id: the run's id (the Prefect flow run id, or a unique local id).
        options: fsspec storage options for tables and outputs.
        steps: the executor (default: this process).
        context: extra keys for ``decision.json`` (e.g. the trigger event).
        checksums: table name -> the SHA-256 the caller expects (a trigger event's); a file
            that differs is an error (it changed since it was announced).
        timings: seconds spent before the run (e.g. ``slot_wait``), recorded with the rest.
        signer: what signs the decision: an Ed25519 key (:class:`riskcore.signing.Signer`)
            or the signer service (:class:`riskcore.signer.RemoteSigner`); None leaves it
            unsigned (``signed: false``). A signer that refuses makes the verdict ERROR.
    """
    keep_freed_memory()  # within a step, freed arrays serve the next ones (:mod:`..memory`)
    spare_the_collector()  # what is loaded is never garbage (:mod:`..memory`)
    run = _Run(gate, run_id, dict(options or {}), steps or LocalSteps(), dict(context or {}),
               checksums=dict(checksums or {}), timings=dict(timings or {}), signer=signer)
    try:
        with progress.recording(run.spans):
            decision = _sequence(run)
    except RiskgateError as exc:
        decision = fixed_decision(Verdict.ERROR, [f"{type(exc).__name__}: "
                                                  f"{redact_text(str(exc))}"])
        run.drop_outputs()
    except Exception as exc:  # fail closed on anything unforeseen, with its name
        log.debug("gate failed", exc_info=True)
        decision = _unexpected(exc)
        run.drop_outputs()
    if run.starting is not None:  # the measures ran or never will: no family left to set up
        run.starting.cancel()
    outcome = finish(run, decision)
    if run.starting is not None:  # the verdict is written; no import left running at exit
        run.starting.join(timeout=START_UP_JOIN_S)
    return outcome


#: the longest a finished run waits for the import its families' start-up was in when the run
#: ended (the rest is cancelled; scikit-learn's, the longest, takes 1.2 s of one thread)
START_UP_JOIN_S = 30.0


def _sequence(run: _Run) -> Decision:
    gate, steps = run.gate, run.steps
    warm_up()  # Great Expectations' import, in the background while the tables load
    # the families' imports and numba's set-up too, here rather than as soon as the command has
    # read its config: there they ran beside Prefect's start-up and slowed it as much (a
    # 27,000-row survey release, whose own thread mostly waits for the helper here: wall 8.67
    # -> 9.92 s; at 1M rows, where they slow the load and checks instead, 8.52 -> 8.49 s)
    if getattr(steps, "measures_here", True):
        run.starting = start_up(gate.measures)
    run.timed("check_outputs", lambda: check_output_location(gate.config.output_url,
                                                             run.options))
    run.read_earlier()
    frames, infos = run.timed("load", lambda: steps.load(gate, run.options))
    _reserve_for_diff(frames)
    release_memory()  # what reading the files allocated and freed
    run.infos = infos
    verify_checksums(infos, run.checksums)
    refusal = refuse_unintended(infos)
    if refusal:
        return fixed_decision(Verdict.REJECTED, [refusal])
    # each column's distinct values found once for the preparation, the checks and the
    # encoding (:func:`riskcore.data.factorized_once`; the threads beside share it): at 1M
    # rows the preparation 0.21-0.24 -> 0.16-0.19 s, for 20-30 MB more peak RSS
    with factorized_once():
        prepared: Prepared | None = None
        if all(isinstance(df, pd.DataFrame) for df in frames.values()):  # not partitions
            frames, prepared = run.timed("prepare", lambda: prepare_tables(gate.config, frames,
                                                                           infos))
        # the encoding starts beside the checks when the steps can run both at once (its result
        # is used only if the checks pass; 0.25-0.35 s of a 1M-row gate's data work), and so does
        # the release's reading against its original (the diff: 2-3 s at 1M rows, on a sample)
        since = time.perf_counter()
        start_encode = getattr(steps, "start_encode", None)
        encoding: Callable[[bool], MeasureInputs] | None = (
            start_encode(gate, frames) if start_encode is not None else None)
        _MEASURES_HERE.set(getattr(steps, "measures_here", True))  # for the diff's thread
        diffing = Beside(partial(read_release, gate, frames), name="riskgate-diff")
        report = _validate(run, frames, prepared, encoding, diffing, since)
        if not report.success:
            # unclean data is never measured, whatever its encoding gave
            _discard(None if encoding is None else partial(encoding, False), "encoding")
            if run.record_flags:
                run.per_record = per_record_frame({}, len(run.record_flags["identifier"]),
                                                  run.record_flags)
                run.files["per_record.parquet"] = parquet_bytes(run.per_record)
            return fixed_decision(Verdict.REJECTED, ["data not clean: " + line
                                                     for line in report.summary_lines()])
        if getattr(steps, "measures_here", True):
            _start_helper_families(gate, frames)
        if encoding is not None:
            inputs = run.timed("encode", partial(encoding, True), started=since)
        else:
            inputs = run.timed("encode", lambda: steps.encode(gate, frames))
    # a Prefect flow keeps the load tasks' results (the frames) in reference cycles that
    # only a full collection frees: worth its quarter second when the tables are large
    large = sum(int(df.memory_usage(index=False).sum()) for df in frames.values()
                if isinstance(df, pd.DataFrame)) >= COLLECT_ABOVE_BYTES
    custodian_lineage = None
    if "composition" in gate.measures:  # the earlier releases, read beside this one's frames
        signer_pem = getattr(run.signer, "public_pem", None)
        lineage = run.timed("lineage", lambda: load_lineage(gate, frames, run.options,
                                                            run.run_id, signer_pem))
        inputs = replace(inputs, lineage=lineage)
        if lineage is not None and frames.get("custodian_control") is not None:
            custodian_lineage = replace(lineage, control=frames["custodian_control"])
    frames.clear()  # the encoded arrays are all the measures need
    release_memory(collect=large)
    # the families that run at once share the process's thread budget
    parallel = min(len(gate.measures), int(getattr(steps, "parallel_measures", 1)))
    with thread_budget(family_threads(parallel),
                       models=any(BY_NAME[n].fits_models for n in gate.measures)):
        results, errors = run.timed("measures", lambda: measure_release(run, inputs))
    release_memory()
    decision = run.timed("decide", lambda: decide_results(gate, results, errors))
    if inputs.custodian_control is not None:
        results, errors, decision = run.timed("measures_custodian_control", lambda: (
            judge_both_controls(run, inputs, custodian_lineage, results, errors, decision)))
    _measured_outputs(run, inputs, results, errors)
    return _review(run, decision)


def _helper_families(gate: Gate, frames: Mapping[str, Any]) -> list[str]:
    """The gate's families the helper process should set up (:data:`IN_HELPER`): for tables
    of :data:`HELPER_FROM_ROWS` to :data:`HELPER_ROWS` rows, or of fewer when more gates
    follow in the process."""
    names = [n for n in gate.measures if n in IN_HELPER]
    sizes = [len(df) for t, df in frames.items()
             if t in ("original", "released") and isinstance(df, pd.DataFrame)]
    if not names or len(sizes) < 2 or sum(sizes) > HELPER_ROWS:
        return []
    return names if gx_helper.families_served() or sum(sizes) >= HELPER_FROM_ROWS else []


def _start_helper_families(gate: Gate, frames: Mapping[str, Any]) -> None:
    """Have the helper process set up the gate's families of :data:`IN_HELPER` now, if it was
    not asked while it read the release (:func:`_read_release`); it answers at once."""
    helper = gx_helper.current()
    names = _helper_families(gate, frames)
    if helper is None or not names or helper.has_families(names):
        return

    def start() -> None:
        try:
            helper.start_families(names)
        except (gx_helper.HelperGone, gx_helper.HelperFailed):
            log.debug("the helper could not set up %s", names, exc_info=True)

    Beside(start, name="riskgate-helper-families")


def _validate(run: _Run, frames: dict[str, Any], prepared: Prepared | None,
              encoding: Callable[[bool], MeasureInputs] | None,
              diffing: Beside[ReleaseDiff | None], since: float) -> CleanlinessReport:
    """The cleanliness checks (and, when they pass, the release read against its original,
    begun beside them at ``since``): validation.json, and the released rows flagged for an
    undeclared identifier."""
    gate = run.gate
    try:
        report = run.timed("validate", lambda: run.steps.validate(gate, frames))
    except Exception as exc:
        if not isinstance(exc, Terminated):  # asked to stop: leave now, not after encoding
            _discard(None if encoding is None else partial(encoding, False), "encoding")
            _discard(diffing.wait, "diff")
        raise
    if prepared is not None:
        report = report.with_prepared(prepared.checks, prepared.to_dict())
    # GX's one-off start-up, when the checks had to wait for it, is its own figure
    waited = min(float(getattr(report, "gx_start_wait", 0.0)), run.timings["validate"])
    if waited > 0:
        run.timings["validate"] -= waited
        run.timings["gx_start"] = waited
    run.validation = report.to_dict()
    if not report.success:  # unclean data is never read against its original either
        _discard(diffing.wait, "diff")
    else:  # the release read against its original (riskgate diff)
        release = run.timed("diff", diffing.wait, started=since)
        if release is not None:
            run.release = release
            run.validation["release"] = release.to_dict()
    run.files["validation.json"] = json_bytes(redact(run.validation))
    flagged = (report.identifiers.rows("released") if report.identifiers is not None
               else np.empty(0, dtype=np.int64))
    if flagged.size:  # per record, the rows holding an undeclared identifier (no value)
        released_rows = next(i.rows for i in run.infos if i.name == "released")
        flags = np.zeros(released_rows, dtype=np.int8)
        flags[flagged[flagged < released_rows]] = 1
        run.record_flags["identifier"] = flags
    return report


def _measured_outputs(run: _Run, inputs: MeasureInputs, results: dict[str, MeasureResult],
                      errors: dict[str, str]) -> None:
    """measures.json, the per-record files and (detail "full") the example records."""
    gate = run.gate
    doc = measures_document(gate.config.release_id, run.run_id, results, errors)
    run.measures = doc["measures"]
    run.files["measures.json"] = json_bytes(doc)
    if inputs.released.multiplicity is None:
        run.per_record = per_record_frame(results, inputs.released.n, run.record_flags)
        run.encode_beside("per_record.parquet", partial(parquet_bytes, run.per_record))
    else:  # a partitioned table's distinct rows: their values go back to every record
        on_rows = {k: r for k, r in results.items() if BY_NAME[k].scale == "classes"}
        values = per_record_frame(on_rows, inputs.released.n).drop(columns="row")
        written = run.timed("per_record", lambda: run.steps.write_per_record(  # type: ignore[attr-defined]
            gate, values, run.folder, run.options))
        run.extra["per_record_parts"] = len(written)
    run.files.update(records_parquet(results))
    if gate.config.report.detail == "full" and inputs.released.multiplicity is None:
        run.examples = redact(example_records(inputs.released, results,
                                              gate.config.report.examples))
        run.files["examples.json"] = json_bytes(run.examples)


def _review(run: _Run, decision: Decision) -> Decision:
    """A person's sign-off where the config asks for one (the steps pause the run); the
    outputs but decision.json, and the report, are written before the reviewer is asked."""
    gate = run.gate

    def prepare() -> str | None:
        """Before a reviewer is asked: every output but decision.json, and the report; returns
        the report's link (or its URL)."""
        pending = run.record(decision)
        files = {**run.outputs(), "report.html": run.report(pending)}
        written = run.steps.write(run.folder, files, None, run.options)
        url = written.get("report.html")
        key = f"{gate.config.release_id}/{run.run_id}"
        return report_link(url, gate, run.options, key) or url

    reviewed, review = run.steps.review(gate, decision, prepare)
    if review is not None:
        run.extra["review"] = review
    return reviewed


#: the released rows the gate's diff links to judge the kind (a seeded sample above)
DIFF_ROWS = 20_000


def read_release(gate: Gate, frames: Mapping[str, Any]) -> ReleaseDiff | None:
    """The release read against its original on the measured columns
    (:func:`riskcore.anatomy.diff`: its kind, each column's transform and reading), for the
    validation record and the report; a mixed release's every row linked, for the families of
    equivalence classes (:func:`measure_release`). None for partitions."""
    tables = {t: frames.get(t) for t in ("original", "released", "control")}
    if not all(isinstance(tables[t], pd.DataFrame) for t in ("original", "released")):
        return None
    with progress.working("diff"):  # its span, when it runs beside the checks
        return _read_release(gate, tables)


#: the helper's heap faulted in for the diff, per row it reads (the original's, the control's
#: and the released sample's; at 1M rows its arrays grew the helper by 165 MB)
RESERVE_PER_ROW = 200


def _reserve_for_diff(frames: Mapping[str, Any]) -> None:
    """Have the helper fault in the memory the release's diff will take
    (:meth:`.gx_helper.Helper.reserve`) while this process prepares the tables and sends
    them: at 1M rows 0.15 s of the kernel's work, off the diff's path (its CPU there
    0.96-1.14 s without, 0.79-1.04 with; the checks phase 1.25-1.37 s -> 0.99-1.24, four
    alternated gates each on an idle machine). Nothing when the helper is not free now."""
    helper = gx_helper.current()
    tables = {t: df for t, df in frames.items() if isinstance(df, pd.DataFrame)}
    if helper is None or "original" not in tables or "released" not in tables:
        return
    rows = sum(len(df) for t, df in tables.items() if t in ("original", "control"))
    rows += min(len(tables["released"]), DIFF_ROWS)
    if helper.ready():
        try:
            helper.reserve(RESERVE_PER_ROW * rows)
        except (gx_helper.HelperGone, gx_helper.HelperFailed):
            log.debug("the helper could not reserve memory for the diff", exc_info=True)


def _read_release(gate: Gate, tables: Mapping[str, Any]) -> ReleaseDiff:
    """The release's reading (:func:`riskcore.anatomy.read_release`) on the measured columns:
    in Great Expectations' helper process when it is ready, on the other core (the diff is
    Python and NumPy under this process's lock, where the checks, the encoding and the
    families' start-up run beside it: at 1M rows it added 1.1-1.9 s of CPU there), else here;
    anything that goes wrong there is done again here, so it gives what it gives here."""
    cfg = gate.config
    roles = cfg.role_spec
    cols = list(roles.measured_columns)

    def measured(df: pd.DataFrame | None) -> pd.DataFrame | None:
        return None if df is None else df[[c for c in cols if c in df.columns]]

    original, released = measured(tables["original"]), measured(tables["released"])
    control = measured(tables["control"]) if isinstance(tables["control"], pd.DataFrame) \
        else None
    kwargs = {"types": dict(roles.types), "markers": tuple(cfg.missing_values),
              "seed": cfg.seed, "sample": DIFF_ROWS}
    assert original is not None and released is not None
    # the sample the diff links, taken here: the helper is sent 20,000 released rows, not a
    # million (at 1M rows, half of the 50 MB it was sent, a tenth of a second on its path);
    # a mixed release is read again on every row (its rows are linked one by one)
    sample = release_sample(released, DIFF_ROWS, cfg.seed)
    first = _read_once(gate, tables, (original, released if sample is None else sample,
                                      control), {**kwargs, "of_rows": len(released)})
    if first.kind == "mixed" and first.sampled:  # the sample's reading is known: every row
        return _read_once(gate, tables, (original, released, control),
                          {**kwargs, "sample": None})
    return first


def _read_once(gate: Gate, tables: Mapping[str, Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> ReleaseDiff:
    """:func:`riskcore.anatomy.read_release` of ``args`` and ``kwargs``, in the helper
    process when it is ready, else here (see :func:`_read_release`)."""
    helper = gx_helper.current()
    if helper is not None and helper.ready():
        try:
            families = _helper_families(gate, tables) if _MEASURES_HERE.get() else []
            if families:  # asked here, where the helper is known free: the diff follows
                helper.start_families(families)
            return helper.read_release(args, kwargs)  # type: ignore[no-any-return]
        except gx_helper.HelperGone as exc:
            log.warning("the release is read in this process: the helper process is gone "
                        "(%s)", exc)
        except gx_helper.HelperFailed:  # read here, it fails here as it did there (its
            # message, which may quote a value, goes the way of this process's errors)
            log.debug("the release's reading failed in the helper; read here")
    return read_here(*args, **kwargs)  # type: ignore[no-any-return]


def measure_release(run: _Run, inputs: MeasureInputs
                    ) -> tuple[dict[str, MeasureResult], dict[str, str]]:
    """Every family on the encoded inputs; for a mixed release (new rows with some of the
    original's records), the families of equivalence classes on its linked rows alone: the
    classes of the records it publishes, not padded by new rows (their per-record values go
    back to those rows; the others have none)."""
    gate, steps = run.gate, run.steps
    release = run.release
    classes = {n: p for n, p in gate.measures.items() if BY_NAME[n].scale == "classes"}
    if release is None or release.kind != "mixed" or not classes or \
            release.linked is None or inputs.released.multiplicity is not None:
        return steps.measures(gate, inputs)
    rows = np.flatnonzero(release.linked)
    rest = {n: p for n, p in gate.measures.items() if n not in classes}
    results, errors = steps.measures(replace(gate, measures=rest), inputs) if rest else ({}, {})
    linked = replace(inputs, released=inputs.released.take(rows), _cache={},
                     _lock=threading.Lock())
    more, more_errors = steps.measures(replace(gate, measures=classes), linked)
    n = inputs.released.n
    for name, result in more.items():
        per = {k: _scatter(np.asarray(v), rows, n) for k, v in result.per_record.items()}
        results[name] = replace(result, per_record=per, details={
            **result.details, "rows": f"the {rows.size:,} released rows linked to an original "
                                      f"record (of {n:,}): a mixed release's records"})
    return results, {**errors, **more_errors}


def _scatter(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, np.nan)
    out[rows] = values.astype(float)
    return out


def decide_results(gate: Gate, results: Mapping[str, MeasureResult],
                   errors: Mapping[str, str]) -> Decision:
    """The policy's decision on the families' results (their alarms and refutations too)."""
    alarms = {name: BY_NAME[name].alarm for name in results if BY_NAME[name].alarm}
    refutations = {name: BY_NAME[name].refutes for name in results if BY_NAME[name].refutes}
    return decide(gate.policy, results, errors, {}, alarms, refutations)  # type: ignore[arg-type]


#: verdicts from the least to the most severe
SEVERITY = (Verdict.APPROVED, Verdict.NEEDS_REVIEW, Verdict.REJECTED, Verdict.ERROR)


def judge_both_controls(run: _Run, inputs: MeasureInputs, lineage: Any,
                        results: dict[str, MeasureResult], errors: dict[str, str],
                        decision: Decision
                        ) -> tuple[dict[str, MeasureResult], dict[str, str], Decision]:
    """A release whose trigger payload named its own control is judged twice: against that
    control, and against the custodian's (the config's own), each family that reads a control
    run once against each; the worse decision is kept, with its results. A judged party's
    control can then only make the verdict stricter, never turn an alarm into a pass."""
    gate = run.gate
    again = {n: p for n, p in gate.measures.items() if "control" in BY_NAME[n].reads}
    second = replace(inputs, control=inputs.custodian_control, custodian_control=None,
                     lineage=lineage if lineage is not None else inputs.lineage)
    more, more_errors = run.steps.measures(replace(gate, measures=again), second)
    other_results = {**results, **more}
    other_errors = {**{k: v for k, v in errors.items() if k not in again}, **more_errors}
    other = decide_results(gate, other_results, other_errors)
    worse = SEVERITY.index(other.verdict) > SEVERITY.index(decision.verdict) or (
        other.verdict is decision.verdict and len(other.reasons) > len(decision.reasons))
    run.extra["controls"] = {
        "judged_against": ["control (the trigger payload's)",
                           "custodian_control (the config's own)"],
        "verdicts": {"control": decision.verdict.value,
                     "custodian_control": other.verdict.value},
        "kept": "custodian_control" if worse else "control"}
    if worse:
        return other_results, other_errors, other
    return results, errors, decision


def _discard(wait: Callable[[], object] | None, what: str) -> None:
    """Wait for a step begun beside checks that did not pass (the encoding, the diff) and
    drop its outcome (an error of unclean data included): the verdict is the checks'.
    Waiting keeps no step running once the run has ended."""
    if wait is None:
        return
    try:
        wait()
    except Exception:
        log.debug("the %s beside failed checks failed too", what, exc_info=True)


def finish(run: _Run, decision: Decision) -> RunOutcome:
    """Render the report, write every output (decision.json last) and say what happened."""
    t0 = time.perf_counter()
    record = run.record(decision)
    report = run.report(record)  # while the outputs encoded beside are finished
    try:
        files = run.outputs()
    except Exception as exc:  # as if it had failed in the run
        log.debug("an output failed", exc_info=True)
        run.drop_outputs()
        decision = _unexpected(exc)
        files, record = run.outputs(), run.record(decision)
        report = run.report(record)
    signature = None
    if run.signer is not None:  # beside decision.json, written before it
        try:
            signature = run.signer.sign(record)
        except RiskgateError as exc:  # a signer that refuses: an unsigned ERROR, and why
            run.signer = None
            decided = f"the gate had decided {decision.verdict.value}" + (
                ": " + "; ".join(decision.reasons) if decision.reasons else "")
            decision = fixed_decision(Verdict.ERROR, [
                f"the decision could not be signed: {redact_text(str(exc))}", decided])
            record = run.record(decision)
            report = run.report(record)
    files["report.html"] = report
    if signature is not None:
        files["decision.json.sig"] = signature
    written: dict[str, str] = {}
    reasons = list(decision.reasons)
    verdict = decision.verdict
    try:
        written = run.steps.write(run.folder, files, record, run.options)
    except RiskgateError as exc:
        verdict = Verdict.ERROR  # the error first: it is why the run ended ERROR
        reasons.insert(0, f"the outputs could not be written: {redact_text(str(exc))}")
    run.timings["write"] = time.perf_counter() - t0
    report_url = written.get("report.html")
    key = f"{run.gate.config.release_id}/{run.run_id}"
    return RunOutcome(
        release_id=run.gate.config.release_id, run_id=run.run_id, verdict=verdict.value,
        exit_code=verdict.exit_code, folder=run.folder if written else None,
        decision_url=written.get("decision.json"), report_url=report_url,
        report_link=report_link(report_url, run.gate, run.options, key),
        reasons=tuple(redact_text(r) for r in reasons),
        checks=tuple(record.get("checks", [])), written=bool(written), record=record)


def _unexpected(exc: BaseException) -> Decision:
    """The ERROR decision of an error nothing foresaw, with its name."""
    return fixed_decision(Verdict.ERROR, [f"unexpected error {type(exc).__name__}: "
                                          f"{redact_text(str(exc))}"])


def error_outcome(release_id: str, run_id: str, message: str) -> RunOutcome:
    """The outcome of a run that failed before a gate could be loaded (no output location)."""
    return RunOutcome(release_id=release_id, run_id=run_id, verdict=Verdict.ERROR.value,
                      exit_code=Verdict.ERROR.exit_code, folder=None, decision_url=None,
                      report_url=None, report_link=None, reasons=(redact_text(message),),
                      written=False)


__all__ = ["ConfigError", "InputError", "LocalSteps", "RunOutcome", "Steps", "error_outcome",
           "measure", "run_gate", "validate"]
