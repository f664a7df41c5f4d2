"""Real parts for integration tests: Prefect's test harness and an S3 endpoint on 127.0.0.1."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from riskcore.examples import write_example


@pytest.fixture(scope="session", autouse=True)
def prefect_api():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Endpoint:
    """moto in server mode: a real HTTP S3 API on loopback."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._cls = ThreadedMotoServer
        self.server = None

    def start(self) -> None:
        self.server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1")

    def options(self) -> dict:
        # no credentials here: they come from the environment, as in production
        return {"endpoint_url": self.url, "skip_instance_cache": True,
                "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}


@pytest.fixture(scope="session")
def s3():
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    endpoint = S3Endpoint()
    endpoint.start()
    yield endpoint
    endpoint.stop()


@pytest.fixture(scope="session")
def example_files(tmp_path_factory) -> dict[str, Path]:
    return write_example(tmp_path_factory.mktemp("example"), n=3000, seed=7)


POLICY = {
    "version": 1,
    "checks": [
        {"figure": "k_anonymity.k", "min": 3},
        {"figure": "reid.pRb", "max": 0.34},
        {"figure": "reid.jRc", "max": 0.05},
        {"figure": "l_diversity.diagnosis.distinct_l", "min": 1},
        "t_closeness.t <= 0.9",
    ],
}


def gate_config(original: str, released: str, output: str, **extra) -> dict:
    cfg = {
        "release_id": "itest",
        "original": original,
        "released": released,
        "output_url": output,
        "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                  "sensitive": ["diagnosis"], "weight": "weight", "household": "household_id",
                  "direct_identifiers": ["person_id"], "types": {"age": "categorical"}},
        "measures": {"k_anonymity": {}, "reid": {"threshold": 0.1}, "l_diversity": {},
                     "t_closeness": {}},
        "policy": POLICY,
        "seed": 11,
    }
    cfg.update(extra)
    return cfg
