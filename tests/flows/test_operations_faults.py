"""Faults on a real server: killed gates, lost workers, the pool's limit, redeploys and the
history that survives them (tests/flows/operations_support.py sets the server up)."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import pytest

from tests.flows.operations_support import (
    LOST_AFTER_TEST_S,
    PINNED,
    RISKGATE,
    _decision,
    _descendants,
    _emit_all,
    _flow_run,
    _paused_and_waiting,
    _processes_of_run,
    _run,
    _verdict_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.waits]


@pytest.fixture(scope="module", autouse=True)
def _engine_runs(ops):
    """Each flow run here is Prefect's engine in a process of its own, as a pool without a
    standby runs it (``riskgate flow-run`` finds none answering): the module kills, counts and
    loses those processes. The worker's standby is stopped for the module."""
    ops["standby"](False)
    yield
    ops["standby"](True)


def test_a_plain_redeploy_keeps_the_nightly_schedule(ops):
    """A redeploy without --nightly-config kept nothing: the schedule went inactive. Now it
    stays as configured, and --no-nightly turns it off. First in the module: every deploy
    replaces the lost-run automation, which would forget the silence it is counting for the
    lost run (:func:`lost_run`) that the tests after it run beside."""
    from prefect.client.orchestration import get_client

    def active() -> bool:
        with get_client(sync_client=True) as client:
            dep = client.read_deployment_by_name("release-gate/nightly-recheck")
            return all(s.active for s in client.read_deployment_schedules(dep.id))

    first = _run(RISKGATE + ["deploy", "--trigger-config", PINNED, "--nightly-config", PINNED],
                 ops["env"])
    assert first.returncode == 0 and active(), first.stdout + first.stderr
    plain = _run(RISKGATE + ["deploy"], ops["env"])  # keeps the pinned config too
    assert plain.returncode == 0 and "nightly re-check: kept active" in plain.stdout
    assert f"triggered gate: keeps its pinned config {PINNED}" in plain.stdout
    assert active()
    off = _run(RISKGATE + ["deploy", "--trigger-config", PINNED, "--no-nightly"], ops["env"])
    assert off.returncode == 0 and "deactivated" in off.stdout and not active()
    # each deploy replaced the lost-run automation: one left, not one per deploy (each fired),
    # and without --lost-after each kept the module's silence (the lost-run test relies on it)
    from riskgate.flows.deployments import LOST_GATE_AUTOMATION

    with get_client(sync_client=True) as client:
        automations = client.read_automations_by_name(LOST_GATE_AUTOMATION)
    assert len(automations) == 1
    assert automations[0].trigger.within.total_seconds() == LOST_AFTER_TEST_S
    assert f"after {LOST_AFTER_TEST_S} s without a heartbeat" in plain.stdout
    short = _run(RISKGATE + ["deploy", "--lost-after", "45"], ops["env"])
    assert short.returncode != 0 and "--lost-after: 45 s is too short" in short.stderr, \
        short.stdout + short.stderr
    assert "Traceback" not in short.stderr


@pytest.fixture(scope="module")
def lost_run(ops):
    """What nothing on the worker's side survives: SIGKILL the worker and the
    gate's process together (a lost host or container), with a run its worker was starting
    (Pending: it never beat, seen in the ops walk-through). A new worker starts at once, as a
    platform's supervisor would start one. The server waits 60 s of silence before it declares
    the runs lost: the tests marked with this fixture run in that minute, and
    :func:`test_a_run_lost_with_its_worker_ends_error`, last in the module, reads the verdict
    (a wait of its own cost the suite's longest process a minute and a half)."""
    import os
    import signal

    from prefect.client.orchestration import get_client
    from prefect.states import Pending

    with get_client(sync_client=True) as client:  # submitted by a worker that then died
        dep = client.read_deployment_by_name("release-gate/on-anonymization")
        starting = client.create_flow_run_from_deployment(dep.id, state=Pending())
    waiting, paused = _paused_and_waiting(ops, "ops-lost")
    pids = _processes_of_run(paused.id)
    assert pids, "the paused run's process was not found"
    # a lost host takes every process of its worker with it: the other runs it started too
    # (an earlier test's review still paused), which would otherwise outlive the suite
    others = [pid for worker in ops["workers"] for pid in _descendants(worker.pid)
              if pid not in pids]
    for worker in ops["workers"]:
        worker.kill()
    for pid in [*pids, *others]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    ops["start_worker"]()
    yield {"waiting": waiting, "paused": paused, "starting": starting}
    if waiting.poll() is None:  # the verdict's test failed before the pipeline's wait ended
        waiting.kill()
        waiting.communicate()


@pytest.mark.usefixtures("lost_run")  # run in the minute the lost run stays silent
def test_a_killed_gate_process_ends_error_for_the_waiting_pipeline(ops):
    """SIGKILL the gate's process mid-run (here while its review waits; the worker lives):
    the worker runs the flow's crash hook, and the run ends in an ERROR verdict, event, tag,
    state ("Error", Crashed) and decision.json; emit-anonymized --wait exits 3 within
    seconds, not after its timeout."""
    import os
    import signal

    waiting, paused = _paused_and_waiting(ops, "ops-killed")
    pids = _processes_of_run(paused.id)
    assert pids, "the paused run's process was not found"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 3, out
    assert time.monotonic() - t0 < 60
    assert "verdict: ERROR" in out and "process ended without a verdict" in out, out
    events = _verdict_events("ops-killed")
    assert [e.event for e in events] == ["riskgate.release.error"], events
    run = _flow_run(str(paused.id))
    assert (run.state.type.value, run.state.name) == ("CRASHED", "Error")
    assert "verdict:ERROR" in run.tags and run.name == "ops-killed-ERROR"
    decision = _decision(ops, "ops-killed")
    assert decision["verdict"] == "ERROR" and "without a verdict" in decision["reasons"][0]
    assert decision["trigger"]["event_id"]  # riskgate history names the event that started it


@pytest.mark.usefixtures("lost_run")  # run in the minute the lost run stays silent
def test_a_run_cancelled_in_the_ui_ends_error(ops):
    """Cancel a gate paused for review as the UI does (the state Cancelling, through the
    API): the worker's cancellation observer stops the process, the gate writes its ERROR
    verdict (decision, event, tag; the flow's cancellation hook would, had it not) and the run
    ends Cancelled; the pipeline's wait exits 3. A gate that ran on would keep the run
    Cancelling and the pipeline waiting for a run its operator had stopped."""
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelling

    waiting, paused = _paused_and_waiting(ops, "ops-cancelled")
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(paused.id, Cancelling(), force=True)
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 3, out
    assert "verdict: ERROR" in out, out
    assert [e.event for e in _verdict_events("ops-cancelled")] == ["riskgate.release.error"]
    run = _flow_run(str(paused.id))
    assert run.state.type.value == "CANCELLED", run.state
    assert "verdict:ERROR" in run.tags
    decision = _decision(ops, "ops-cancelled")
    assert decision["verdict"] == "ERROR", decision
    assert not _processes_of_run(paused.id)


@pytest.mark.usefixtures("lost_run")  # run in the minute the lost run stays silent
def test_history_lists_a_releases_runs_newest_first(ops):
    """The release's runs from the output store, with a report link."""
    first, second = _emit_all(ops, ("ops-history",), ("ops-history",))
    assert first.returncode == second.returncode == 0, first.stdout + second.stdout
    done = _run(RISKGATE + ["history", "ops-history", "--config", PINNED, "--json"],
                ops["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(done.stdout)
    assert len(runs) == 2 and [r["verdict"] for r in runs] == ["APPROVED", "APPROVED"]
    assert runs[0]["finished_at"] >= runs[1]["finished_at"]
    assert all(r["started_by"].startswith("event ") for r in runs)
    assert httpx.get(runs[0]["report"], timeout=10).status_code == 200  # one click away
    table = _run(RISKGATE + ["history", "ops-history", "--config", PINNED], ops["env"])
    assert table.returncode == 0 and runs[0]["run_id"] in table.stdout


@pytest.mark.usefixtures("lost_run")  # run in the minute the lost run stays silent
def test_the_pool_starts_no_more_gates_than_its_limit(ops):
    """The limit is at the door. With the gate limit at 2, four triggers
    start two gate processes; the other two wait Scheduled (no process) and run after."""
    from datetime import UTC, datetime
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
    )
    from prefect.client.schemas.objects import TERMINAL_STATES, StateType

    assert _run(RISKGATE + ["limits", "--gate", "2"], ops["env"]).returncode == 0
    try:
        releases = [f"ops-door-{i}" for i in range(4)]
        since = datetime.now(UTC)
        # the four emitted at once, as pipelines do: emitted one after another (a process
        # each), the first gates could end before the last was triggered, and the limit
        # never held anyone back
        assert all(p.returncode == 0 for p in _emit_all(
            ops, *[(release, {"wait": False}) for release in releases]))
        most_started, waited_scheduled, finished, seen = 0, False, [], ""
        deadline = time.monotonic() + 300
        with get_client(sync_client=True) as client:
            dep = client.read_deployment_by_name("release-gate/on-anonymization")

            def states() -> dict[UUID, StateType | None]:
                # a triggered run is named after its release only once it runs: all of the
                # deployment's runs since the emits are these four
                return {r.id: r.state.type if r.state else None
                        for r in client.read_flow_runs(
                            flow_run_filter=FlowRunFilter(
                                expected_start_time=FlowRunFilterExpectedStartTime(after_=since)),
                            deployment_filter=DeploymentFilter(id=DeploymentFilterId(
                                any_=[dep.id])))}

            while time.monotonic() < deadline and len(finished) < len(releases):
                before = states()
                with_process = {i for i, s in before.items()
                                if s not in TERMINAL_STATES and _processes_of_run(i)}
                # read again after the scan (seconds on a loaded machine): a run that ended
                # meanwhile may leave its process's last moments (or its Great Expectations
                # helper) behind, and is not a gate started beyond the limit
                after = states()
                started = [i for i, s in after.items()
                           if s in (StateType.PENDING, StateType.RUNNING)]
                processes = [i for i in with_process if after.get(i) not in TERMINAL_STATES]
                if max(len(started), len(processes)) > most_started:
                    most_started = max(len(started), len(processes))
                    seen = f"before {before}, with a process {processes}, after {after}"
                waited_scheduled |= bool(started) and len(after) == 4 and \
                    StateType.SCHEDULED in after.values()
                finished = [i for i, s in after.items() if s in TERMINAL_STATES]
                time.sleep(0.5)
            runs = [client.read_flow_run(i) for i in finished]
        assert len(runs) == 4, [(r.name, r.state) for r in runs]
        assert sorted(r.name for r in runs) == [f"{r}-APPROVED" for r in releases]
        assert most_started <= 2 and waited_scheduled, (most_started, waited_scheduled, seen)
    finally:
        assert _run(RISKGATE + ["limits", "--gate", "5"], ops["env"]).returncode == 0


def test_a_run_lost_with_its_worker_ends_error(ops, lost_run):
    """The lost runs of :func:`lost_run`: with no process left, no hook runs, and the server's
    automation (riskgate deploy) ends each run Crashed "Error" once its heartbeats stop for
    60 s (the module deploys with --lost-after 60; 90 s by default); emit-anonymized --wait
    exits 3; that state triggers the lost-run-verdict deployment on the living worker, which
    writes the ERROR decision, event and tag. The run that never started is declared lost
    too."""
    from riskgate.flows.deployments import LOST_MESSAGE

    waiting, paused, starting = lost_run["waiting"], lost_run["paused"], lost_run["starting"]
    out, _ = waiting.communicate(timeout=LOST_AFTER_TEST_S + 90)
    assert waiting.returncode == 3, out
    assert "verdict: ERROR" in out and "stopped sending heartbeats" in out, out
    # the rest of the verdict: the lost-run-verdict deployment, triggered by that state, runs
    # on the worker started again and writes the decision, the event and the tag
    deadline = time.monotonic() + 120
    while not _verdict_events("ops-lost") and time.monotonic() < deadline:
        time.sleep(1)
    assert [e.event for e in _verdict_events("ops-lost")] == ["riskgate.release.error"]
    decision = _decision(ops, "ops-lost")
    assert decision["verdict"] == "ERROR" and "lost with its worker" in decision["reasons"][0]
    run = _flow_run(str(paused.id))
    assert (run.state.type.value, run.state.name) == ("CRASHED", "Error")
    assert "verdict:ERROR" in run.tags and "verdict:NEEDS_REVIEW" not in run.tags
    never_started = _flow_run(str(starting.id), timeout_s=60)
    assert (never_started.state.type.value, never_started.state.name) == ("CRASHED", "Error")
    assert LOST_MESSAGE in str(never_started.state.message)  # (and the recorder's words)
