"""Which Prefect API a CLI command talks to, and a private one when none is configured.

With ``PREFECT_API_URL`` set, the API must answer its health check within seconds, or the
command fails with one line (exit 3). Without it, ``riskgate gate`` starts a private server on
127.0.0.1 (the same uvicorn app Prefect's ephemeral mode runs) that dies with the process: the
child is started with the parent-death signal set, so even a SIGKILLed gate leaves no server
behind. The first start migrates the database, which takes longer than Prefect's default
ephemeral timeout on a small machine: riskgate waits up to :data:`STARTUP_TIMEOUT_S`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from riskcore.errors import RiskgateError
from riskcore.processes import wait_or_kill

STARTUP_TIMEOUT_S = 240.0
HEALTH_TIMEOUT_S = 5.0


class ApiUnavailable(RiskgateError):
    """The Prefect API cannot be reached."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: SQLite (WAL) survives it
    except OSError:
        pass
    os.setsid()  # and not in the terminal's process group: ^C reaches the parent only


def auth_headers() -> dict[str, str]:
    """The Authorization header Prefect's own client sends when PREFECT_API_AUTH_STRING is
    set (a server started with PREFECT_SERVER_API_AUTH_STRING refuses requests without it)."""
    import base64

    from prefect.settings import get_current_settings

    secret = get_current_settings().api.auth_string
    value = secret.get_secret_value() if secret is not None else None
    if not value:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(value.encode()).decode("ascii")}


def refused(status: int, url: str) -> ApiUnavailable | None:
    """One clear line for an API that refuses us for want of credentials: none given, or
    not the server's."""
    if status in (401, 403):
        given = bool(auth_headers())
        why = ("the PREFECT_API_AUTH_STRING given is not the server's" if given else
               "it requires authentication and PREFECT_API_AUTH_STRING is not set (or empty)")
        return ApiUnavailable(f"the Prefect API at {url} refused the request ({status}): {why}; "
                              "set PREFECT_API_AUTH_STRING to the server's "
                              "PREFECT_SERVER_API_AUTH_STRING")
    return None


def check_api(url: str, timeout: float = HEALTH_TIMEOUT_S) -> None:
    """Raise ApiUnavailable unless ``url``/health answers 200: within ``timeout`` seconds to
    connect (no server there is said at once), and as long to answer as Prefect's own client
    gives a request (PREFECT_API_REQUEST_TIMEOUT, 60 s by default). A server that took the
    connection is alive: on a loaded two-core machine a freshly started one answered its
    health check in more than 5 s, and the gate, whose later requests would have waited,
    ended in an error."""
    import httpx
    from prefect.settings import PREFECT_API_REQUEST_TIMEOUT

    answer_s = float(PREFECT_API_REQUEST_TIMEOUT.value())
    patience = httpx.Timeout(answer_s, connect=timeout)
    client = httpx.Client(timeout=patience, headers=auth_headers(), verify=api_tls())

    def get(path: str) -> httpx.Response:
        try:
            return client.get(f"{url.rstrip('/')}/{path}")
        except httpx.ReadTimeout:
            raise ApiUnavailable(f"the Prefect API at {url} took the connection but did not "
                                 f"answer /{path} within {answer_s:g} s "
                                 "(PREFECT_API_REQUEST_TIMEOUT): check the server and its "
                                 "database") from None
        except httpx.HTTPError as exc:
            raise ApiUnavailable(f"the Prefect API at {url} is unreachable "
                                 f"({type(exc).__name__}); start it (prefect server start) or "
                                 "unset PREFECT_API_URL to run with a private local server"
                                 ) from None

    with client:
        response = get("health")
        denied = refused(response.status_code, url)
        if denied is not None:
            raise denied
        if response.status_code != 200:
            raise ApiUnavailable(f"the Prefect API at {url} answered {response.status_code} to "
                                 "its health check; check the server")
        # the health check needs no credentials (Prefect leaves it open for probes): one
        # request that does, so that a missing or wrong auth string is this line, not a later
        # failure
        denied = refused(get("admin/version").status_code, url)
    if denied is not None:
        raise denied


def api_tls() -> ssl.SSLContext:
    """The TLS trust Prefect's own client gives its API (``PREFECT_API_SSL_CERT_FILE``, else
    certifi's roots; none checked with ``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``), so that the
    health check judges an https API as the gate's requests will. Built once a process (a
    standby builds it before it forks): loading a system's roots took 25 ms a request."""
    from prefect.settings import (
        PREFECT_API_SSL_CERT_FILE,
        PREFECT_API_TLS_INSECURE_SKIP_VERIFY,
    )

    cert_file = PREFECT_API_SSL_CERT_FILE.value() or None
    try:
        return _tls(bool(PREFECT_API_TLS_INSECURE_SKIP_VERIFY.value()), cert_file)
    except (OSError, ssl.SSLError) as exc:  # (ssl.SSLError is an OSError)
        raise ApiUnavailable(f"PREFECT_API_SSL_CERT_FILE ({cert_file}) cannot be read as CA "
                             f"certificates ({type(exc).__name__}: {exc}); name a PEM file "
                             "of the certificates that sign the API's") from None


@cache
def _tls(skip_verify: bool, cert_file: str | None) -> ssl.SSLContext:
    if skip_verify:  # the user's choice for Prefect's client: the same here
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    import certifi

    return ssl.create_default_context(cafile=cert_file or certifi.where())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_server(timeout: float = STARTUP_TIMEOUT_S, home: str | None = None,
                   port: int | None = None, log: str | None = None,
                   database_url: str | None = None) -> Iterator[str]:
    """A Prefect API on 127.0.0.1 for the duration of the block; yields its URL.

    The server's own messages go to a file (``log``, else a temporary one removed afterwards),
    never to a pipe: a pipe nobody reads fills up after 64 KiB, and a server blocked on
    writing a warning holds its database lock and answers nothing.

    Args:
        timeout: seconds to wait for its health check.
        home: a PREFECT_HOME of its own (its SQLite database lives there).
        port: the port (default: a free one).
        log: the file its messages are appended to.
        database_url: its database (``postgresql+asyncpg://...``, as production runs it);
            default: SQLite in its home.
    """
    import tempfile

    import httpx
    import prefect

    port = port or _free_port()
    # a full server (not Prefect's ephemeral mode): its services run, the one that reclaims
    # the gate slot of a killed gate (the lease repossessor) among them
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS": "5"}
    env.pop("PREFECT_API_URL", None)
    if home:
        env["PREFECT_HOME"] = home
        env.pop("PREFECT_API_DATABASE_CONNECTION_URL", None)
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    with (open(log, "a+b") if log
          else tempfile.TemporaryFile(prefix="riskgate-prefect-server-")) as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
             "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent)
        url = f"http://127.0.0.1:{port}/api"
        try:
            # one client for every look: ``httpx.get`` builds a client and its TLS context
            # each time (50 ms of CPU), on the two cores the starting server needs
            with httpx.Client(timeout=2.0, headers=auth_headers()) as looks:
                deadline = time.monotonic() + timeout
                while True:
                    if proc.poll() is not None:
                        log_file.flush()
                        log_file.seek(0)
                        said = log_file.read().decode(errors="replace").splitlines()
                        first = next((ln for ln in said if "ERROR" in ln),
                                     said[-1] if said else "")
                        raise ApiUnavailable(f"the private Prefect server exited with code "
                                             f"{proc.returncode}: {first.strip()[:300]}")
                    try:
                        if looks.get(f"{url}/health").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise ApiUnavailable(f"the private Prefect server did not start "
                                             f"within {timeout:.0f} s; set PREFECT_API_URL to "
                                             "a running server")
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            wait_or_kill(proc, 10)


@contextmanager
def prefect_api() -> Iterator[str]:
    """The configured API (checked), else a private server; Prefect's settings point at it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        check_api(configured)
        yield configured
        return
    with private_server() as url, temporary_settings({PREFECT_API_URL: url}):
        try:
            yield url
        finally:
            drain_prefect()


def drain_prefect(timeout: float = 15.0) -> None:
    """Send what Prefect still holds (run logs, events) before its API goes away."""
    from prefect._internal.concurrency.services import QueueService

    try:
        QueueService.drain_all(timeout=timeout)
    except Exception:  # best effort: the run's own outcome is already decided
        pass
