"""Pytest fixtures for service-bound tests (a pytest plugin module).

- `s3_endpoint` (session): a moto S3 server with bucket `TEST_BUCKET`; its URL. For the rest
  of the session the standard AWS variables hold dummy credentials (`TEST_ENV`) and no
  profile/session token, so nothing reaches a real account; they are restored at the end.
- `s3_store_url` (function): `s3://shoal-test/<uuid hex>`, a prefix no other test uses, with
  `SHOAL_S3_ENDPOINT` set for this test, so `open_store(s3_store_url)` just works.
- `s3_store` (function): an `S3ObjectStore` on such a fresh prefix.

Tests using them should carry `@pytest.mark.s3`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shoal.storage import S3ObjectStore, open_store
from tests.support.s3server import TEST_BUCKET, TEST_ENV, s3_server

_AWS_UNSET = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in TEST_ENV.items():
            mp.setenv(name, value)
        for name in _AWS_UNSET:
            mp.delenv(name, raising=False)
        with s3_server(bucket=TEST_BUCKET) as endpoint:
            yield endpoint


@pytest.fixture
def s3_store_url(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SHOAL_S3_ENDPOINT", s3_endpoint)
    return f"s3://{TEST_BUCKET}/{uuid.uuid4().hex}"


@pytest.fixture
def s3_store(s3_store_url: str) -> S3ObjectStore:
    store = open_store(s3_store_url)
    assert isinstance(store, S3ObjectStore)
    return store


SPARK_MASTER = "local[2]"


@pytest.fixture(scope="session")
def spark(s3_endpoint):
    """The one Spark session of the test run (any test folder may use it). Started after the
    S3 test server: Spark's Python workers inherit the environment of the JVM at its launch,
    and must see the (dummy) AWS credentials like a deployment would."""
    from shoal.query.spark.session import spark_session

    return spark_session(SPARK_MASTER)
