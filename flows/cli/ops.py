"""Operations commands that set the server up: ``deploy``, ``deployments``, ``serve`` and
``limits``. They talk to a running Prefect API (``PREFECT_API_URL``) and refuse to run without
one (``emit-anonymized``, the pipeline's client, is :mod:`.emit`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from riskcore.errors import ConfigError, RiskgateError
from riskcore.redact import redact_text
from riskcore.storage import check_url

from ..standby_wire import FLOW_RUN
from .common import api_url, out

DEFAULT_PREFECT_FILE = "deployments/prefect.yaml"


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    d = sub.add_parser("deploy", parents=[common],
                       help="create the work pool and limits, and deploy prefect.yaml",
                       description="One command for a running Prefect server: creates the "
                       "'riskgate-process' work pool and the gate's limits when missing, runs "
                       "'prefect deploy --all --prefect-file FILE', and with --nightly-config "
                       "sets the nightly re-check's config and activates its schedule.")
    d.add_argument("--prefect-file", default=DEFAULT_PREFECT_FILE, dest="prefect_file")
    d.add_argument("--nightly-config", dest="nightly_config", help="config URL of the "
                   "nightly re-check (activates its schedule)")
    d.add_argument("--no-nightly", action="store_true", dest="no_nightly",
                   help="deactivate the nightly re-check (a plain redeploy keeps it as it was)")
    d.add_argument("--trigger-config", dest="trigger_config", help="config URL that pins the "
                   "triggered gate's rules: its policy, original and output folder; a trigger "
                   "payload names only the release (release_id, released, control, checksums "
                   "and what the config's trigger.allow lists)")
    d.add_argument("--watch-every", type=int, default=None, dest="watch_every",
                   metavar="SECONDS", help="seconds between two looks for new release "
                   "manifests under the pinned config's trigger.released_prefixes (default 60; "
                   "a redeploy without it keeps the last)")
    d.add_argument("--lost-after", type=int, default=None, dest="lost_after",
                   metavar="SECONDS", help="seconds without a heartbeat after which a gate run "
                   "is declared lost with its worker and ends ERROR (at least 60: two of the "
                   "30 s heartbeats; default 90, and a redeploy without it keeps the last)")
    d.add_argument("--standby", action=argparse.BooleanOptionalAction, default=None,
                   help="the pool's workers start each flow run as `riskgate flow-run`: a fork "
                   "of the standby named by the worker's $RISKGATE_STANDBY when one runs beside "
                   "it, else Prefect's own engine (--no-standby: Prefect's command again; a "
                   "redeploy without either keeps the last)")
    d.set_defaults(handler=cmd_deploy)

    ds = sub.add_parser("deployments", parents=[common],
                        help="write or check deployments/prefect.yaml from its one source")
    ds.add_argument("--write", action="store_true", help="write the file")
    ds.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    ds.add_argument("--prefect-file", default=DEFAULT_PREFECT_FILE, dest="prefect_file")
    ds.set_defaults(handler=cmd_deployments)

    s = sub.add_parser("serve", parents=[common],
                       help="serve the gate's deployments (schedule + event trigger) without a "
                       "worker")
    s.add_argument("--config", default=None, help="config URL of the nightly re-check (its "
                   "schedule is inactive without one; the triggered gates keep the config "
                   "riskgate deploy --trigger-config pinned)")
    s.add_argument("--cron", default="0 2 * * *", help="schedule of the nightly re-check")
    s.set_defaults(handler=cmd_serve)

    lim = sub.add_parser("limits", parents=[common],
                         help="show or set the gate's shared limits (Protegrity's best practices)")
    lim.add_argument("--gate", type=int, default=None, help="gate runs at once (default 5)")
    lim.add_argument("--trigger-rate", type=int, default=None, dest="trigger_rate",
                     help="triggered runs per minute (default 60)")
    lim.set_defaults(handler=cmd_limits)


# ---------------------------------------------------------------- deploy / deployments / serve
def cmd_deployments(args: argparse.Namespace) -> int:
    from ..deployments import prefect_yaml

    text = prefect_yaml()
    path = Path(args.prefect_file)
    if args.write:
        path.write_text(text, encoding="utf-8")
        out.print(f"wrote {path}")
        return 0
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            out.print(f"{path} differs from riskgate/flows/deployments.py: run "
                      "'riskgate deployments --write'")
            return 1
        out.print(f"{path} is up to date")
        return 0
    print(text, end="")
    return 0


#: the pool's command with ``riskgate deploy --standby`` (:mod:`riskgate.flows.launch`)
FLOW_RUN_COMMAND = f"riskgate {FLOW_RUN}"


def job_template(template: dict[str, Any], standby: bool | None) -> dict[str, Any]:
    """A process work pool's job template with the gate processes' heartbeat in its
    environment and, with ``standby`` True, ``riskgate flow-run`` as its command (False:
    Prefect's own again; None: as it was), whatever else an administrator put there."""
    from ..deployments import HEARTBEAT_S

    props = template.setdefault("variables", {}).setdefault("properties", {})
    env = props.setdefault("env", {"type": "object", "title": "Environment Variables"})
    env["default"] = {**(env.get("default") or {}),
                      "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S)}
    if standby is not None:
        command = props.setdefault("command", {"anyOf": [{"type": "string"}, {"type": "null"}],
                                               "title": "Command"})
        command["default"] = FLOW_RUN_COMMAND if standby else None
    return template


def ensure_work_pool(limit: int, standby: bool | None = None) -> bool:
    """Create the process work pool when missing; True when it was created. Either way the
    pool's concurrency limit is ``limit`` (runs beyond it wait Scheduled and start
    no process) and its job environment sets the gate processes' heartbeat (the lost-run
    automation listens for it), keeping whatever else an administrator put there. ``standby``
    True sets its command to ``riskgate flow-run`` (:mod:`..launch`), False back to
    Prefect's own, None keeps it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate, WorkPoolUpdate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    from ..deployments import WORK_POOL

    with get_client(sync_client=True) as client:
        try:
            pool = client.read_work_pool(WORK_POOL)
        except ObjectNotFound:
            client.create_work_pool(WorkPoolCreate(
                name=WORK_POOL, type="process", concurrency_limit=limit,
                base_job_template=job_template(
                    ProcessWorker.get_default_base_job_template(), standby)))
            created = True
        else:
            client.update_work_pool(WORK_POOL, WorkPoolUpdate(
                concurrency_limit=limit,
                base_job_template=job_template(dict(pool.base_job_template or {}), standby)))
            created = False
        ensure_watch_queue(client)
        return created


def ensure_watch_queue(client: Any) -> None:
    """The pool's queue for watch-releases, polled after the gates' (a higher priority
    number): while no worker runs, the schedule leaves one late watcher run every interval,
    and a restarted worker must start the waiting gates before it works through those."""
    from prefect.exceptions import ObjectNotFound

    from ..deployments import WATCH_QUEUE, WATCH_QUEUE_PRIORITY, WORK_POOL

    try:
        queue = client.read_work_queue_by_name(WATCH_QUEUE, work_pool_name=WORK_POOL)
    except ObjectNotFound:
        client.create_work_queue(WATCH_QUEUE, work_pool_name=WORK_POOL,
                                 priority=WATCH_QUEUE_PRIORITY,
                                 description="riskgate watch-releases: after the gates")
        return
    if queue.priority != WATCH_QUEUE_PRIORITY:
        client.update_work_queue(queue.id, priority=WATCH_QUEUE_PRIORITY)


def install_lost_gate_automation(lost_after_s: int | None) -> int:
    """(Re)create the server's automation that ends a lost gate run ERROR (see
    :func:`riskgate.flows.deployments.lost_gate_automation`): every earlier one of that name is
    deleted first, so that a redeploy leaves exactly one (each fired on its own). Without
    ``lost_after_s`` the earlier one's silence is kept (a plain redeploy changes nothing), else
    :data:`~riskgate.flows.deployments.LOST_AFTER_S`; returns the seconds installed."""
    from prefect.client.orchestration import get_client

    from ..deployments import GATES, LOST_AFTER_S, LOST_GATE_AUTOMATION, lost_gate_automation

    with get_client(sync_client=True) as client:
        ids = [str(client.read_deployment_by_name(f"release-gate/{name}").id)
               for name in GATES]
        earlier = client.read_automations_by_name(LOST_GATE_AUTOMATION)
        for old in earlier:
            client.delete_automation(old.id)
    if lost_after_s is None:
        within = [getattr(old.trigger, "within", None) for old in earlier]
        kept = [int(w.total_seconds()) for w in within if w is not None]
        lost_after_s = kept[0] if kept else LOST_AFTER_S
    lost_gate_automation(ids, lost_after_s).create()
    return lost_after_s


def set_nightly_variable(config_url: str) -> None:
    """The nightly re-check's config URL (a Prefect Variable the flow reads)."""
    from prefect.variables import Variable

    from ..names import NIGHTLY_CONFIG_VARIABLE

    check_url(config_url, "--nightly-config")
    Variable.set(NIGHTLY_CONFIG_VARIABLE, config_url, overwrite=True)


def set_nightly(config_url: str) -> None:
    """The nightly re-check's config URL (a Prefect Variable) and its schedule activated."""
    from prefect.client.orchestration import get_client

    set_nightly_variable(config_url)
    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("release-gate/nightly-recheck")
        for sched in client.read_deployment_schedules(dep.id):
            client.update_deployment_schedule(dep.id, sched.id, active=True)


def _variable(name: str) -> str | None:
    """A Prefect Variable's value a previous deploy set (a config URL), if any."""
    from prefect.variables import Variable

    value = Variable.get(name, default=None)
    return str(value) if value else None


def _unset_nightly() -> None:
    from prefect.variables import Variable

    from ..names import NIGHTLY_CONFIG_VARIABLE

    Variable.unset(NIGHTLY_CONFIG_VARIABLE)


def set_trigger_config(config_url: str) -> None:
    """The triggered gate's pinned config URL (a Prefect Variable the flow reads)."""
    from prefect.variables import Variable

    from ..names import TRIGGER_CONFIG_VARIABLE

    check_url(config_url, "--trigger-config")
    Variable.set(TRIGGER_CONFIG_VARIABLE, config_url, overwrite=True)


def config_sha256(config_url: str) -> str:
    """The SHA-256 a gate run records for this config (its text as read), checked as a gate
    run checks it (ConfigError naming the key when it is not a valid gate config)."""
    from riskcore.gate.config import load_gate

    return str(load_gate(config_url).provenance["config"]["sha256"])


def watches(config_url: str | None) -> bool:
    """The config lists released prefixes (the watcher has somewhere to look)."""
    from riskcore.gate.config import load_gate

    if not config_url:
        return False
    try:
        return bool(load_gate(config_url).config.trigger.released_prefixes)
    except RiskgateError:
        return False


def recorded_tags() -> dict[str, str | None]:
    """Each deployment's recorded config SHA-256 (None when it has none or does not exist)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from ..deployments import DEPLOYMENTS
    from ..pinned import recorded_sha256

    out: dict[str, str | None] = {}
    with get_client(sync_client=True) as client:
        for name in DEPLOYMENTS:
            try:
                out[name] = recorded_sha256(client.read_deployment_by_name(
                    deployment_name(name)).tags)
            except ObjectNotFound:
                out[name] = None
    return out


def deployment_name(name: str) -> str:
    """``flow/deployment`` of one of :data:`~riskgate.flows.deployments.DEPLOYMENTS`."""
    return {"watch-releases": "riskgate-watch-releases/watch-releases",
            "lost-run-verdict": "riskgate-lost-run/lost-run-verdict"}.get(
                name, f"release-gate/{name}")


def record_pinned(shas: dict[str, str | None], watch_every: int, watch: bool) -> None:
    """Tag each deployment with the SHA-256 of the config it runs under (what every run
    checks), and set the watcher's schedule: every ``watch_every`` seconds, active when
    ``watch`` (the pinned config lists released prefixes)."""
    from datetime import timedelta

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.client.schemas.schedules import IntervalSchedule

    from ..deployments import DEPLOYMENTS, GATES, closed_schema
    from ..names import CONFIG_TAG_PREFIX

    with get_client(sync_client=True) as client:
        for name in DEPLOYMENTS:
            dep = client.read_deployment_by_name(deployment_name(name))
            tags = [t for t in dep.tags if not t.startswith(CONFIG_TAG_PREFIX)]
            if shas.get(name):
                tags.append(f"{CONFIG_TAG_PREFIX}{shas[name]}")
            update = DeploymentUpdate(tags=tags)
            if name in GATES:  # no parameter beyond the flow's, checked at run creation
                update = DeploymentUpdate(tags=tags, enforce_parameter_schema=True,
                                          parameter_openapi_schema=closed_schema(
                                              dep.parameter_openapi_schema))
            client.update_deployment(dep.id, update)
        watcher = client.read_deployment_by_name(deployment_name("watch-releases"))
        for sched in client.read_deployment_schedules(watcher.id):
            client.update_deployment_schedule(
                watcher.id, sched.id, active=watch and bool(shas.get("watch-releases")),
                schedule=IntervalSchedule(interval=timedelta(seconds=watch_every)))


def deployed_interval() -> int | None:
    """The watcher's interval as deployed now (a plain redeploy keeps it), if deployed."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            watch = client.read_deployment_by_name(deployment_name("watch-releases"))
        except ObjectNotFound:
            return None
        for sched in client.read_deployment_schedules(watch.id):
            interval = getattr(sched.schedule, "interval", None)
            if interval is not None:
                return int(interval.total_seconds())
    return None


def cmd_deploy(args: argparse.Namespace) -> int:
    from ..deployments import LOST_AFTER_S, MIN_LOST_AFTER_S, WATCH_EVERY_S
    from ..limits import current_gate_limit, ensure_defaults
    from ..names import NIGHTLY_CONFIG_VARIABLE, TRIGGER_CONFIG_VARIABLE

    if args.lost_after is not None and args.lost_after < MIN_LOST_AFTER_S:
        raise ConfigError(f"--lost-after: {args.lost_after} s is too short; give at least "
                          f"{MIN_LOST_AFTER_S} s (two heartbeats), or leave it out for "
                          f"{LOST_AFTER_S} s")
    url = api_url()
    path = Path(args.prefect_file)
    if not path.is_file():
        raise ConfigError(f"--prefect-file: '{path}' does not exist; run from the repository "
                          "root or give the file's path")
    if args.watch_every is not None and args.watch_every < 10:
        raise ConfigError(f"--watch-every: {args.watch_every} s is too often; give at least 10")
    # the rules are read and checked before anything is deployed: a config that is not
    # valid is one line here, not an ERROR in every run
    shas_given = {"trigger": config_sha256(args.trigger_config) if args.trigger_config
                  else None,
                  "nightly": config_sha256(args.nightly_config) if args.nightly_config
                  else None}
    ensure_defaults()
    recorded = recorded_tags()
    every = args.watch_every or deployed_interval() or WATCH_EVERY_S
    gate_limit = current_gate_limit()
    created = ensure_work_pool(gate_limit, args.standby)
    out.print(f"{'created' if created else 'updated'} work pool riskgate-process (type "
              f"process): at most {gate_limit} gate runs start at once, the others wait "
              "Scheduled")
    if args.standby is not None:
        out.print("its workers start each flow run as " + (
            f"`{FLOW_RUN_COMMAND}`: a fork of the standby of their $RISKGATE_STANDBY where "
            "one runs beside them, else Prefect's engine" if args.standby else
            "Prefect's engine (`python -m prefect.engine`)"))
    cmd = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file",
           str(path)]
    out.print(f"deploying to {url}: {' '.join(cmd[2:])}")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError("prefect deploy failed: " + redact_text(
            (done.stderr or done.stdout).strip()[-800:]))
    out.print("deployed: release-gate/nightly-recheck, release-gate/on-anonymization, "
              "riskgate-watch-releases/watch-releases, riskgate-lost-run/lost-run-verdict")
    lost_after = install_lost_gate_automation(args.lost_after)
    out.print("automation: a gate run lost with its worker ends Crashed 'Error' (ERROR) "
              f"after {lost_after} s without a heartbeat; lost-run-verdict then writes its "
              "ERROR decision, event and tag on a living worker")
    kept = (None if args.nightly_config or args.no_nightly
            else _variable(NIGHTLY_CONFIG_VARIABLE))
    if args.no_nightly:
        _unset_nightly()
        out.print("nightly re-check: deactivated (--no-nightly)")
    elif args.nightly_config or kept:
        set_nightly(str(args.nightly_config or kept))
        out.print("nightly re-check: config set, schedule active" if args.nightly_config else
                  f"nightly re-check: kept active with {redact_text(str(kept))}")
    else:
        out.print("nightly re-check: schedule inactive until 'riskgate deploy "
                  "--nightly-config URL'")
    pinned = None if args.trigger_config else _variable(TRIGGER_CONFIG_VARIABLE)
    if args.trigger_config:
        set_trigger_config(args.trigger_config)
        out.print(f"triggered gate: config pinned (sha256:{shas_given['trigger']}, recorded "
                  "in the deployments: a run whose config differs ends ERROR)")
    elif pinned:
        out.print(f"triggered gate: keeps its pinned config {redact_text(pinned)}")
    else:
        out.print("triggered gate: every triggered run ends ERROR until 'riskgate deploy "
                  "--trigger-config URL' pins its config")
    trigger_sha = shas_given["trigger"] or recorded.get("on-anonymization")
    nightly_sha = (None if args.no_nightly else
                   shas_given["nightly"] or recorded.get("nightly-recheck"))
    looks = bool(trigger_sha) and watches(args.trigger_config or pinned)
    record_pinned({"on-anonymization": trigger_sha, "watch-releases": trigger_sha,
                   "nightly-recheck": nightly_sha}, every, looks)
    out.print(f"release manifests: watch-releases looks every {every} s under the pinned "
              "config's trigger.released_prefixes" if looks else
              "release manifests: watch-releases is inactive until the pinned config lists "
              "trigger.released_prefixes")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from prefect import serve

    from ..deployments import runner_deployments
    from ..limits import ensure_defaults
    from ..names import TRIGGER_CONFIG_VARIABLE

    api_url()
    nightly = None
    if args.config:
        check_url(args.config, "--config")
        nightly = config_sha256(args.config)
        set_nightly_variable(args.config)
    trigger = _variable(TRIGGER_CONFIG_VARIABLE)
    trigger_sha = config_sha256(trigger) if trigger else None
    ensure_defaults()
    serve(*runner_deployments(cron=args.cron, pinned={
        "nightly-recheck": nightly, "on-anonymization": trigger_sha,
        "watch-releases": trigger_sha}))
    return 0


def cmd_limits(args: argparse.Namespace) -> int:
    from ..limits import set_limits, set_pool_limit

    api_url()
    for name, value in (("--gate", args.gate), ("--trigger-rate", args.trigger_rate)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1")
    for name, state in set_limits(args.gate, args.trigger_rate).items():
        out.print(f"{name}: {state}")
    if args.gate is not None and set_pool_limit(args.gate):
        out.print(f"work pool riskgate-process: concurrency limit {args.gate}")
    return 0
